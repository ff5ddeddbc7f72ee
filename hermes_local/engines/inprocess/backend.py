"""Facts of the llama.cpp build this process imports: version, GPU offload, mmap, devices.

Imports llama_cpp lazily, inside each call, so importing this module stays cheap; a missing or broken
llama-cpp-python raises ImportError (callers such as `doctor` report it).
"""

from __future__ import annotations

from typing import Any


def backend_info() -> dict[str, Any]:
    """llama.cpp build facts for `hermes-local doctor`; raises ImportError if llama_cpp is unusable."""
    import llama_cpp

    return {
        "version": llama_cpp.__version__,
        "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        "mmap": bool(llama_cpp.llama_supports_mmap()),
        "mlock": bool(llama_cpp.llama_supports_mlock()),
        "max_devices": int(llama_cpp.llama_max_devices()),
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
    }


def gpu_offload_available() -> bool:
    """Whether this llama.cpp build can offload layers to a GPU (False when llama_cpp is missing)."""
    try:
        return bool(backend_info()["gpu_offload"])
    except ImportError:
        return False
