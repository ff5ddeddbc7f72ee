"""How llama.cpp is loaded: options `llama_cpp.Llama()` does not expose, and batch-invariant kernels.

`extra_buffers(llama_cpp, wanted)` wraps a `Llama()` construction to turn llama.cpp's extra buffer
types (CPU weight repacking, AMX) off; `no_chat_handlers(llama_cpp)` keeps it from compiling the GGUF's chat
templates (prompts are rendered by `dialects/`). `batch_invariant(kwargs)` sets the `Llama()` options under which
a token's logits do not depend on how many tokens share its decode. Used by `llamacpp.py` only; receives the
llama_cpp module from it and never imports llama_cpp itself.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

_BUILD_LOCK = threading.Lock()


@contextlib.contextmanager
def extra_buffers(llama_cpp: Any, wanted: bool | None) -> Iterator[None]:
    """Load with llama.cpp's extra buffer types (CPU weight repacking, AMX) on or off.

    None means on, except when this llama.cpp build has AMX kernels and the CPU reports AMX: under
    kernels or sandboxes that do not grant AMX tile state they die with SIGILL on the first eval.
    HERMES_LOCAL_EXTRA_BUFFERS=1|0 overrides. `Llama()` has no option for it, so its default model
    params are wrapped while it loads.
    """
    env = os.environ.get("HERMES_LOCAL_EXTRA_BUFFERS")
    if env is not None:
        wanted = env.strip().lower() not in ("0", "false", "no", "off")
    if wanted is None:
        wanted = not amx_risk(llama_cpp)
    if wanted:
        yield
        return
    module = llama_cpp.llama_cpp
    original = module.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    with _BUILD_LOCK:
        module.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            module.llama_model_default_params = original


class _UnusedChatFormatter:
    """Stands in for llama_cpp's `Jinja2ChatFormatter` while a model loads: hermes-local renders prompts itself
    (`dialects/`), so the GGUF's templates are never compiled here, and a broken one cannot crash the load."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def to_chat_handler(self) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("hermes-local renders chat prompts through its dialects, not llama_cpp's handlers")

        return refuse


_FORMATTER_LOCK = threading.Lock()


@contextlib.contextmanager
def no_chat_handlers(llama_cpp: Any) -> Iterator[None]:
    """Load without llama_cpp compiling the GGUF's chat templates into chat handlers (which `Llama()` always does,
    raising a Jinja traceback for a template that does not parse; `runtime/model.py` reports such a template in
    one line before the load, and `--dialect` renders with its own)."""
    module = llama_cpp.llama.llama_chat_format
    with _FORMATTER_LOCK:
        original = module.Jinja2ChatFormatter
        module.Jinja2ChatFormatter = _UnusedChatFormatter
        try:
            yield
        finally:
            module.Jinja2ChatFormatter = original


def amx_risk(llama_cpp: Any) -> bool:
    """This build has AMX kernels and the CPU reports AMX: they may die with SIGILL (see `extra_buffers`), unless
    HERMES_LOCAL_EXTRA_BUFFERS decides. The pre-flight load (preflight.py) tries them in a child first."""
    if os.environ.get("HERMES_LOCAL_EXTRA_BUFFERS") is not None:
        return False
    if "AMX_INT8 = 1" not in llama_cpp.llama_print_system_info().decode(errors="replace"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return " amx_tile" in fh.read()
    except OSError:
        return False


GGML_TYPE_Q8_0 = 8


def batch_invariant(kwargs: dict[str, Any]) -> str:
    """Flash attention over a q8_0 KV cache; returns the KV type's name (for the prompt cache's identity).

    Why: with an f16 KV cache llama.cpp's CPU backend computes attention with other kernels for one token
    (vec_dot; flash attention's split-KV path past 512 cells) than for several (llamafile's tinyBLAS skips
    batches of one; flash attention's tiled path from 64 queries). The last-bit differences are amplified
    by each layer's 8-bit activation quantization into logit differences of 0.3-0.9 on the embedded model,
    enough to flip greedy choices when drafted tokens are verified in a batch. With a quantized KV cache
    and flash attention every query row takes the same reference path, and the weight matmuls of this
    model's quantization are per-row already: single-token decodes are bit-identical to a batch.
    """
    kwargs.update(flash_attn=True, type_k=GGML_TYPE_Q8_0, type_v=GGML_TYPE_Q8_0)
    return "q8_0"
