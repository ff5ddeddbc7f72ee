"""Remote engines behind the `LLM` protocol: llama.cpp's `llama-server` and vLLM over HTTP.

`load_engine(settings)` builds the engine `settings.engine` names ("llama-server" or "vllm") for
`settings.engine_url` after the offline check (loopback, or a host in `allow_hosts`), with the optional
bearer token and timeout, and checks the server serves `settings.model` when one is given. The
in-process engine ("llama-cpp", the default) is `engines/inprocess/` and is loaded by `runtime.load_llm`;
only that folder imports llama_cpp. `replay.py` replays recorded outputs, `binaries.py` finds and starts
llama.cpp's own programs (llama-server, rpc-server).
"""

from __future__ import annotations

from hermes_local.config import Settings
from hermes_local.engines.http import EngineError, check_engine_url
from hermes_local.llm import LLM

ENGINES = ("llama-cpp", "llama-server", "vllm")

__all__ = ["ENGINES", "EngineError", "expected_model_names", "load_engine"]


def expected_model_names(spec: str | None) -> list[str]:
    """Names a server may report for `spec`: the spec itself and, for a registry name, its GGUF file name."""
    if not spec:
        return []
    from hermes_local.models.registry import lookup

    names = [spec]
    choice = lookup(spec)
    if choice is not None:
        names += [choice.name, choice.spec.file]
    return names


def load_engine(settings: Settings) -> LLM:
    """The remote engine of `settings` (raises EngineError with one line when it cannot be used)."""
    url = check_engine_url(settings.engine_url, settings.allow_hosts)
    expected = expected_model_names(settings.model)
    common = dict(token=settings.engine_token, timeout=settings.engine_timeout, expected_model=expected)
    if settings.engine == "llama-server":
        from hermes_local.engines.llama_server import LlamaServerLLM

        return LlamaServerLLM(url, seed=settings.seed, **common)  # type: ignore[arg-type]
    if settings.engine == "vllm":
        from hermes_local.engines.vllm import VLLMEngine

        return VLLMEngine(url, seed=settings.seed, n_ctx=settings.n_ctx, **common)  # type: ignore[arg-type]
    raise EngineError(f"unknown engine {settings.engine!r}; choose one of: {', '.join(ENGINES)}")
