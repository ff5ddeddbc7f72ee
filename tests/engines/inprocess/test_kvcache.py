"""The persistent prompt cache: files, keying, damage, LRU cap; and a real reload across model instances."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from hermes_local.engines.inprocess import kvcache
from hermes_local.engines.inprocess.kvcache import PromptCache
from hermes_local.llm import CallOptions

IDENTITY = {"model": "/m.gguf", "size": 1, "mtime_ns": 2, "n_ctx": 4096}


def test_store_lookup_and_load_the_longest_matching_prefix(tmp_path: Path) -> None:
    cache = PromptCache(IDENTITY, tmp_path)
    cache.store([1, 2, 3], b"short")
    cache.store([1, 2, 3, 4, 5], b"long")
    cache.store([9, 9], b"other")
    entry = cache.lookup([1, 2, 3, 4, 5, 6, 7])
    assert entry is not None and entry.tokens == [1, 2, 3, 4, 5] and cache.load(entry) == b"long"
    assert cache.lookup([1, 2, 3, 4, 5]).tokens == [1, 2, 3]  # never the whole prompt: one token stays to eval
    assert cache.lookup([7, 1, 2, 3]) is None
    assert cache.has([1, 2, 3]) and not cache.has([1, 2])
    assert not list(tmp_path.glob(".tmp-*"))  # atomic writes leave no temporary files


def test_default_folder_is_under_the_home() -> None:
    cache = PromptCache(IDENTITY)
    path = cache.store([1, 2], b"x")
    assert path is not None and path.parent == Path(os.environ["HERMES_LOCAL_HOME"]) / "cache" / "kv"


def test_other_identity_and_damaged_files_are_ignored_with_a_debug_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    PromptCache({**IDENTITY, "n_ctx": 2048}, tmp_path).store([1, 2, 3], b"other settings")
    assert PromptCache(IDENTITY, tmp_path).lookup([1, 2, 3, 4]) is None
    cache = PromptCache(IDENTITY, tmp_path)
    path = cache.store([1, 2, 3], b"payload")
    path.write_bytes(path.read_bytes()[:-3] + b"XYZ")  # damaged payload
    (tmp_path / "junk.kv").write_bytes(b"not a cache file")
    with caplog.at_level(logging.DEBUG, logger="hermes_local.engines.inprocess.kvcache"):
        entry = cache.lookup([1, 2, 3, 4])
        assert entry is not None and cache.load(entry) is None
    notes = [r.getMessage() for r in caplog.records]
    assert any("checksum mismatch" in n for n in notes) and any("junk.kv" in n for n in notes)


def test_lru_cap_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = PromptCache(IDENTITY, tmp_path, cap_bytes=2500)
    a = cache.store([1], b"a" * 1000)
    b = cache.store([2], b"b" * 1000)
    os.utime(a, ns=(1, 1))
    os.utime(b, ns=(2, 2))
    cache.load(cache.lookup([1, 0]))  # touching a makes b the least recently used
    c = cache.store([3], b"c" * 1000)
    assert a.exists() and c.exists() and not b.exists()
    assert cache.store([4], b"d" * 5000) is None  # bigger than the cap: not saved


def test_clear_removes_every_file(tmp_path: Path) -> None:
    cache = PromptCache(IDENTITY, tmp_path)
    cache.store([1], b"a")
    cache.store([2], b"bb")
    files, _ = kvcache.clear(tmp_path)
    assert files == 2 and not list(tmp_path.glob("*.kv"))


@pytest.mark.real_model
def test_a_new_model_instance_loads_the_saved_prefix_and_answers_identically(embedded_model_path: Path) -> None:
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.prompts import chat_tokens, render
    from hermes_local.runtime import build_registry

    system = render("system.jinja", tools=build_registry().schemas(), instructions="")
    outs, evaluated = [], []
    for goal in ("What time is it?", "What time is it?", "List the files here."):
        llm = LlamaCppLLM(embedded_model_path, LlamaParams(n_ctx=2048, prompt_cache=True))
        tokens = chat_tokens([{"role": "system", "content": system}, {"role": "user", "content": goal}], llm)
        out = llm.complete(tokens, CallOptions(max_tokens=24, temperature=0.0))
        outs.append(out.text)
        usage = out.usage
        evaluated.append((usage.prompt_tokens, usage.prompt_tokens_evaluated, kvcache.fixed_prefix(llm, tokens)))
        del llm
    (n0, e0, fixed), (n1, e1, _), (n2, e2, _) = evaluated
    assert e0 == n0  # cold: everything evaluated (and the prefix saved)
    assert e1 == n1 - fixed and e2 == n2 - fixed  # warm: only the tokens after the saved prefix
    assert outs[0] == outs[1]
    assert len(list((kvcache.cache_dir()).glob("*.kv"))) == 1
