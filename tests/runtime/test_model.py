"""Wiring: the model is resolved once per run; registry offload/context settings and the thread count `models
qualify` recorded reach llama.cpp unless the user set them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hermes_local.config import home_dir, load_settings
from hermes_local.runtime import load_llm
from hermes_local.testing import ScriptedLLM
from tests.models.test_gguf import make_gguf

TINY_ENTRY = """[models.tiny]
repo = "test/tiny"
default_quant = "Q8_0"
n_ctx = 1024
chat_format = "CHAT_FORMAT"
[models.tiny.quants]
Q8_0 = { file = "tiny.Q8_0.gguf", size = 1000 }
"""


class TinyModel:
    """`--model tiny`: a registry entry in the user's models.toml for a tiny GGUF in ~/.hermes-local/models,
    with llama.cpp replaced by a scripted model. Counts registry lookups, header parses and loads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, chat_format: str = "chatml", answers: int = 1) -> None:
        from hermes_local import engines
        from hermes_local.engines.inprocess import llamacpp
        from hermes_local.models import gguf, registry

        (home_dir() / "models").mkdir(parents=True)
        (home_dir() / "models" / "tiny.Q8_0.gguf").write_bytes(make_gguf())
        (home_dir() / "models.toml").write_text(TINY_ENTRY.replace("CHAT_FORMAT", chat_format), encoding="utf-8")
        self.counts = {"lookup": 0, "read_header": 0}
        self.loads: list[tuple[str, bool, int]] = []
        self.models: list[ScriptedLLM] = []
        header = self._counted("read_header", gguf.read_header)
        monkeypatch.setattr(gguf, "read_header", header)
        monkeypatch.setattr(registry, "read_header", header)
        monkeypatch.setattr(registry, "lookup", self._counted("lookup", registry.lookup))
        tiny = self

        class FakeLlama(ScriptedLLM):  # stands in for llama.cpp: the tokenizer load, then the weights
            remaining = 0  # like a real model, it has no recording that runs can leave unused

            def __init__(self, path: Path, params: Any, threads: Any = None) -> None:
                super().__init__(["Hello there."] * answers)
                self.model_path, self.params = Path(path), params
                tiny.loads.append((self.model_path.name, params.vocab_only, params.n_ctx))
                tiny.models.append(self)

        monkeypatch.setattr(llamacpp, "LlamaCppLLM", FakeLlama)
        monkeypatch.setattr(engines, "_loaded", {})

    def _counted(self, name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] += 1
            return real(*args, **kwargs)

        return wrapper


def test_one_run_finds_its_model_once(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One `run` looks the registry up and parses the GGUF header once, then hands that result to the
    tokenizer, the dialect choice and the weights (it used to do each three times)."""
    from hermes_local.cli.app import app

    tiny = TinyModel(monkeypatch)
    res = CliRunner().invoke(app, ["run", "Say hello.", "--model", "tiny", "--workspace", str(workspace), "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["answer"] == "Hello there."
    assert tiny.counts == {"lookup": 1, "read_header": 1}
    assert tiny.loads == [("tiny.Q8_0.gguf", True, 4096), ("tiny.Q8_0.gguf", False, 1024)]  # the entry's n_ctx


def test_an_eval_finds_its_model_once_in_the_users_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite resolves the model once, with the user's models.toml (each case then builds its agent in a
    temporary home, where that entry, and its chat_format, would not be found)."""
    from hermes_local.cli.app import app

    tiny = TinyModel(monkeypatch, chat_format="llama3", answers=2)
    case = {"task": "Say hello.", "tools": [], "checks": {"answer_contains": ["Hello"]}}
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"hello{i}", **case}) + "\n" for i in (1, 2)), encoding="utf-8")
    args = ["eval", str(cases), "--model", "tiny", "--report", str(tmp_path / "report.json")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.stdout + res.stderr
    assert tiny.counts == {"lookup": 1, "read_header": 1}
    assert tiny.loads == [("tiny.Q8_0.gguf", False, 1024)]  # the weights, loaded once for both cases
    prompts = tiny.models[0].prompt_texts
    assert len(prompts) == 2 and all("<|start_header_id|>system" in p for p in prompts)  # the entry's format


def test_a_run_uses_the_qualified_thread_count_unless_n_threads_is_given(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`models qualify` recorded n_threads = 1 for the file: a run loads with 1 thread and says who set it; the
    environment, the config file (0 there asks for auto) and a recorded "auto" (left unset) each win over it."""
    from hermes_local.cli.app import app
    from hermes_local.models.qualified import save_qualification

    tiny = TinyModel(monkeypatch)
    gguf = home_dir() / "models" / "tiny.Q8_0.gguf"
    save_qualification(gguf, {"model": "tiny", "defaults": {"n_threads": 1}})

    def run_threads() -> tuple[int | None, str]:
        res = CliRunner().invoke(app, ["run", "Say hello.", "--model", "tiny", "--workspace", str(workspace)])
        assert res.exit_code == 0, res.output
        return tiny.models[-1].params.n_threads, res.stderr

    threads, said = run_threads()
    assert threads == 1 and "threads 1 (set by models qualify)" in said
    monkeypatch.setenv("HERMES_LOCAL_N_THREADS", "2")
    threads, said = run_threads()
    assert threads == 2 and "threads 2 (set by n_threads)" in said
    monkeypatch.delenv("HERMES_LOCAL_N_THREADS")
    (home_dir() / "config.toml").write_text("n_threads = 0\n", encoding="utf-8")  # auto, over the recorded 1
    threads, said = run_threads()
    assert threads == 0 and "threads auto: " in said
    (home_dir() / "config.toml").unlink()
    save_qualification(gguf, {"model": "tiny", "defaults": {"n_threads": "auto"}})
    threads, said = run_threads()
    assert threads is None and "threads auto: " in said


@pytest.mark.real_model
def test_registry_n_ctx_applies_unless_the_user_sets_it() -> None:
    home_dir().mkdir(parents=True, exist_ok=True)
    (home_dir() / "models.toml").write_text("[models.smollm2]\nn_ctx = 1024\nn_gpu_layers = 0\nmain_gpu = 0\n")
    from_registry = load_llm(load_settings({"model": "smollm2"}))
    assert from_registry.n_ctx == 1024 and from_registry.params.n_gpu_layers == 0
    from_flag = load_llm(load_settings({"model": "smollm2", "n_ctx": 2048}))
    assert from_flag.n_ctx == 2048
    assert load_llm(load_settings({"model": "smollm2"})) is from_registry  # one Llama per settings, reused
