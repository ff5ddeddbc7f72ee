"""Wiring: the model is resolved once per run; registry offload/context settings reach llama.cpp unless the
user set them."""

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
[models.tiny.quants]
Q8_0 = { file = "tiny.Q8_0.gguf", size = 1000 }
"""


def test_one_run_finds_its_model_once(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One `run` looks the registry up and parses the GGUF header once, then hands that result to the
    tokenizer, the dialect choice and the weights (it used to do each three times)."""
    from hermes_local import engines
    from hermes_local.cli.app import app
    from hermes_local.engines.inprocess import llamacpp
    from hermes_local.models import gguf, registry

    (home_dir() / "models").mkdir(parents=True)
    (home_dir() / "models" / "tiny.Q8_0.gguf").write_bytes(make_gguf())
    (home_dir() / "models.toml").write_text(TINY_ENTRY, encoding="utf-8")
    counts = {"lookup": 0, "read_header": 0}
    loads: list[Any] = []

    def counted(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        return wrapper

    header = counted("read_header", gguf.read_header)
    monkeypatch.setattr(gguf, "read_header", header)
    monkeypatch.setattr(registry, "read_header", header)
    monkeypatch.setattr(registry, "lookup", counted("lookup", registry.lookup))

    class FakeLlama(ScriptedLLM):  # stands in for llama.cpp: the tokenizer load, then the weights
        def __init__(self, path: Path, params: Any) -> None:
            super().__init__(["Hello there."])
            self.model_path, self.params = Path(path), params
            loads.append((self.model_path.name, params.vocab_only, params.n_ctx))

    monkeypatch.setattr(llamacpp, "LlamaCppLLM", FakeLlama)
    monkeypatch.setattr(engines, "_loaded", {})
    res = CliRunner().invoke(app, ["run", "Say hello.", "--model", "tiny", "--workspace", str(workspace), "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["answer"] == "Hello there."
    assert counts == {"lookup": 1, "read_header": 1}
    assert loads == [("tiny.Q8_0.gguf", True, 4096), ("tiny.Q8_0.gguf", False, 1024)]  # the entry's n_ctx


@pytest.mark.real_model
def test_registry_n_ctx_applies_unless_the_user_sets_it() -> None:
    home_dir().mkdir(parents=True, exist_ok=True)
    (home_dir() / "models.toml").write_text("[models.smollm2]\nn_ctx = 1024\nn_gpu_layers = 0\nmain_gpu = 0\n")
    from_registry = load_llm(load_settings({"model": "smollm2"}))
    assert from_registry.n_ctx == 1024 and from_registry.params.n_gpu_layers == 0
    from_flag = load_llm(load_settings({"model": "smollm2", "n_ctx": 2048}))
    assert from_flag.n_ctx == 2048
    assert load_llm(load_settings({"model": "smollm2"})) is from_registry  # one Llama per settings, reused
