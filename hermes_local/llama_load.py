"""How llama.cpp is loaded: options `llama_cpp.Llama()` does not expose.

`extra_buffers(llama_cpp, wanted)` wraps a `Llama()` construction to turn llama.cpp's extra buffer
types (CPU weight repacking, AMX) off. Used by `llm.py` only; receives the llama_cpp module from it
and never imports llama_cpp itself.
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
        wanted = True
        if "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode(errors="replace"):
            try:
                with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                    wanted = " amx_tile" not in fh.read()
            except OSError:
                pass
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
