"""Pre-flight load in a child process: a native crash in llama.cpp's loader becomes one line, not a dead agent.

A GPU build can die inside `llama_model_load_from_file` or on the first decode (SIGSEGV in a CUDA build,
SIGILL from AMX kernels, an abort on CUDA out-of-memory) and take the whole agent with it, silently.
`preflight(path, params)` therefore loads the model once in a child process, with the same options, and
decodes one token there, before the run's own process loads it. The verdict is cached per (llama.cpp build,
model file, n_gpu_layers, n_ctx, extra buffers) in `$HERMES_LOCAL_HOME/cache/preflight.json`: one extra load
the first time a build meets a model, nothing after. A child killed by a signal raises `ModelLoadError`
with one line naming the build and the fix; a child that fails normally (a bad file) leaves the error to
the real load, which says it better. When: `HERMES_LOCAL_PREFLIGHT=auto` (default: a build that can offload,
loading with layers on the device; and a CPU that reports AMX, to keep llama.cpp's extra buffer types where
they do not die with SIGILL), `on` (every in-process load) or `off`.

The child runs `python -m hermes_local.engines.inprocess.preflight`; what it loads with is `LOADER`, a
"module:function" the tests point at a loader that crashes on purpose. Does not load anything in this process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from hermes_local.errors import ModelLoadError

LOADER = "hermes_local.engines.inprocess.preflight:load_and_decode"
TIMEOUT = 600.0  # a 70B model's first load from a cold disk
REINSTALL = (
    'CMAKE_ARGS="-DGGML_CUDA=on" pip install --force-reinstall --no-cache-dir llama-cpp-python'
    " (or scripts/gpu_check.sh to build and check it for this card)"
)


def wanted(params: Any) -> bool:
    """Whether this load is checked first (see the module docstring for HERMES_LOCAL_PREFLIGHT)."""
    mode = os.environ.get("HERMES_LOCAL_PREFLIGHT", "auto").strip().lower()
    if params.vocab_only or _off():
        return False
    if mode in ("1", "on", "true", "yes"):
        return True
    from hermes_local.engines.inprocess.backend import gpu_offload_available

    return params.n_gpu_layers != 0 and gpu_offload_available()


def _off() -> bool:
    return os.environ.get("HERMES_LOCAL_PREFLIGHT", "auto").strip().lower() in ("0", "off", "false", "no")


def build_identity() -> str:
    """The llama.cpp build this process would load: llama-cpp-python's version and its libraries' sizes and
    mtimes (a reinstall or rebuild is a new build)."""
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    parts = [llama_cpp.__version__, os.environ.get("LLAMA_CPP_LIB_PATH", "")]
    with contextlib.suppress(OSError):
        for f in sorted(lib.iterdir()):
            if f.is_file() and not f.is_symlink():
                st = f.stat()
                parts.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _cache_file() -> Path:
    from hermes_local.config import home_dir

    return home_dir() / "cache" / "preflight.json"


def _key(path: Path, params: Any) -> str:
    st = path.stat()
    return "|".join(
        [build_identity(), str(path.resolve()), str(st.st_size), str(st.st_mtime_ns),
         f"ngl={params.n_gpu_layers}", f"ctx={params.n_ctx}", f"xbuf={params.extra_buffers}"]
    )  # fmt: skip


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(key: str, verdict: str) -> None:
    cache = _read_cache()
    cache[key] = verdict
    target = _cache_file()
    with contextlib.suppress(OSError):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1), encoding="utf-8")
        os.replace(tmp, target)


def preflight(path: Path, params: Any, *, loader: str | None = None, timeout: float = TIMEOUT) -> None:
    """Load `path` with `params` (a `LlamaParams`) in a child first, when `wanted`; raise `ModelLoadError` (one
    line) when the child dies of a signal. Passed and crashed verdicts are cached.

    Where the CPU reports AMX and `params.extra_buffers` is unset, the child tries llama.cpp's extra buffer types
    (weight repacking, AMX) first: if they pass, `params.extra_buffers` becomes True (the layers left on the CPU
    keep them), if they die with SIGILL it becomes False and the load is tried again without them."""
    amx = params.extra_buffers is None and not params.vocab_only and not _off() and _amx_risk()
    if not amx and not wanted(params):
        return
    tries = [True, False] if amx else [params.extra_buffers]
    for extra in tries:
        attempt = replace(params, extra_buffers=extra)
        key = _key(path, attempt)
        verdict = _read_cache().get(key)
        if verdict is None:
            verdict = _run_child(path, attempt, loader or LOADER, timeout)
            if verdict is None:
                return  # no verdict (a normal failure, a timeout): the real load reports what it finds
            _remember(key, verdict)
        if verdict == "ok":
            params.extra_buffers = extra
            return
        if not (extra and verdict == "SIGILL"):
            raise ModelLoadError(_crash_line(path, attempt, verdict))


def _amx_risk() -> bool:
    import llama_cpp

    from hermes_local.engines.inprocess.load import amx_risk

    return amx_risk(llama_cpp)


def _run_child(path: Path, params: Any, loader: str, timeout: float) -> str | None:
    """ "ok", the name of the signal that killed the child, or None (no verdict)."""
    spec = json.dumps({"path": str(path), "params": asdict(params), "loader": loader})
    try:
        done = subprocess.run(  # noqa: S603 - our own interpreter and module, arguments as data
            [sys.executable, "-m", "hermes_local.engines.inprocess.preflight", spec],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
        )  # fmt: skip
    except (subprocess.TimeoutExpired, OSError):
        return None
    if done.returncode == 0:
        return "ok"
    return _signal_name(-done.returncode) if done.returncode < 0 else None  # killed by a signal: a crash


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _crash_line(path: Path, params: Any, how: str) -> str:
    from hermes_local.engines.inprocess.backend import backend_name, devices

    try:
        import llama_cpp

        build = f"llama-cpp-python {llama_cpp.__version__}, {backend_name(devices())} build"
    except ImportError:
        build = "llama-cpp-python"
    fix = "run with --n-gpu-layers 0 (CPU only)" if params.n_gpu_layers != 0 else "try another --n-ctx"
    return (
        f"llama.cpp crashed ({how}) loading {path.name} with n_gpu_layers={params.n_gpu_layers}, "
        f"n_ctx={params.n_ctx} in a pre-flight process ({build}); this process was spared. Fix: {fix}, or "
        f"reinstall llama-cpp-python for this machine: {REINSTALL}; `hermes-local doctor --gpu` checks the build"
    )


def load_and_decode(path: str, params: dict[str, Any]) -> None:
    """The default loader: load as the run would, and decode one token (SIGILL shows on the first decode)."""
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.llm import CallOptions

    llm = LlamaCppLLM(path, LlamaParams(**{**params, "prompt_cache": False}))
    llm.complete(llm.bos_tokens() + llm.tokenize("Hello", special=False), CallOptions(max_tokens=1, temperature=0.0))


def main(argv: list[str]) -> int:
    import importlib

    spec = json.loads(argv[0])
    module, _, name = spec["loader"].partition(":")
    getattr(importlib.import_module(module), name)(spec["path"], spec["params"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
