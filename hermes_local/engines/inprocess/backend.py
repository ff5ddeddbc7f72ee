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


DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}  # enum ggml_backend_dev_type


def devices() -> list[dict[str, Any]]:
    """The compute devices llama.cpp registered (ggml's device list; the binding does not wrap it): name,
    description, type ("cpu", "gpu", "igpu", "accel"), free and total bytes. [] when it cannot be asked."""
    import ctypes
    from pathlib import Path

    import llama_cpp

    try:
        lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml.so"))
        lib.ggml_backend_dev_count.restype = ctypes.c_size_t
        lib.ggml_backend_dev_get.restype, lib.ggml_backend_dev_get.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
            getattr(lib, name).restype, getattr(lib, name).argtypes = ctypes.c_char_p, [ctypes.c_void_p]
        lib.ggml_backend_dev_type.restype, lib.ggml_backend_dev_type.argtypes = ctypes.c_int, [ctypes.c_void_p]
        size_p = ctypes.POINTER(ctypes.c_size_t)
        lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, size_p, size_p]
    except (OSError, AttributeError):
        return []
    found = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        found.append(
            {
                "name": lib.ggml_backend_dev_name(dev).decode(errors="replace"),
                "description": lib.ggml_backend_dev_description(dev).decode(errors="replace"),
                "type": DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "other"),
                "free": int(free.value),
                "total": int(total.value),
            }
        )
    return found


def backend_name(found: list[dict[str, Any]]) -> str:
    """The build's accelerator backend as its devices name it ("CUDA", "Metal", "Vulkan", ...), or "CPU"."""
    for dev in found:
        if dev["type"] != "cpu":
            return str(dev["name"]).rstrip("0123456789") or "GPU"
    return "CPU"


def device_free(main_gpu: int = 0) -> int | None:
    """Free bytes on the `main_gpu`-th accelerator llama.cpp can offload to; None without one.

    HERMES_LOCAL_DEVICE_FREE_MB pretends a device with that much free memory (to see what `auto` would choose
    on another card; the GPU check's dry run uses it)."""
    import os

    pretend = os.environ.get("HERMES_LOCAL_DEVICE_FREE_MB")
    if pretend:
        return int(float(pretend) * 2**20)
    try:
        if not gpu_offload_available():
            return None
        gpus = [d for d in devices() if d["type"] != "cpu"]
    except ImportError:
        return None
    return int(gpus[main_gpu]["free"]) if main_gpu < len(gpus) else None
