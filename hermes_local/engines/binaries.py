"""Where `scripts/build_llama_cpp_tools.sh` puts llama.cpp's `llama-server` and `rpc-server`, and running them.

`tools_dir()` computes the same cache folder as the build script (keyed by the llama-cpp-python version
the code is written against); `find_tool()` returns a binary there or None. `LocalProcess` starts one
of them on 127.0.0.1 and waits until it answers (tests, the benchmark, a user's quick local server);
stopping it stops the process. `rpc_support()` is what `doctor` reports. Builds nothing and never
binds anything but loopback.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # the sdist whose llama.cpp sources the build script compiles
BUILD_SCRIPT = "scripts/build_llama_cpp_tools.sh"


def tools_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/hermes-local/llama.cpp-VERSION/bin`, as the build script computes it."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "hermes-local" / f"llama.cpp-{version}" / "bin"


def find_tool(name: str, folder: Path | None = None) -> Path | None:
    """`llama-server` or `rpc-server` from the build script's folder, when it was built."""
    path = (folder or tools_dir()) / name
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _in_process_rpc() -> bool:
    """Whether the installed llama-cpp-python was built with GGML_RPC (it ships libggml-rpc then)."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if any(Path(folder).rglob("*ggml-rpc*")):
            return True
    return False


def rpc_support() -> dict[str, Any]:
    """For `doctor`: whether the in-process build and the built tools can split a model over RPC."""
    server, rpc = find_tool("llama-server"), find_tool("rpc-server")
    return {
        "in_process": _in_process_rpc(),
        "rpc_server": str(rpc) if rpc else None,
        "llama_server": str(server) if server else None,
    }


def rpc_line(info: dict[str, Any]) -> str:
    """One line for `doctor`."""
    inproc = "in-process: yes" if info["in_process"] else "in-process: no (pip build without GGML_RPC)"
    if info["rpc_server"] and info["llama_server"]:
        tools = f"llama-server --rpc and rpc-server built in {Path(info['rpc_server']).parent}"
    else:
        tools = f"rpc-server/llama-server not built (run {BUILD_SCRIPT})"
    return f"{inproc}; {tools}"


def cpu_has_amx() -> bool:
    """The CPU advertises AMX tiles (Linux /proc/cpuinfo)."""
    with contextlib.suppress(OSError):
        return " amx_tile" in Path("/proc/cpuinfo").read_text()
    return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalProcess:
    """A llama.cpp tool running on 127.0.0.1 until `stop()` (or the end of a `with` block)."""

    def __init__(self, argv: list[str], port: int, *, log: Path | None = None) -> None:
        self.argv, self.port, self.log = argv, port, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{port}"

    @classmethod
    def llama_server(
        cls,
        model: Path,
        *,
        n_ctx: int = 2048,
        threads: int = 2,
        extra: list[str] | None = None,
        log: Path | None = None,
        folder: Path | None = None,
    ) -> LocalProcess:
        binary = find_tool("llama-server", folder)
        if binary is None:
            raise FileNotFoundError(f"llama-server is not built; run {BUILD_SCRIPT}")
        port = free_port()
        argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", str(n_ctx)]
        argv += ["-t", str(threads), "-np", "1", "--no-webui"]
        if cpu_has_amx():
            # A natively built llama-server dies with SIGILL in ggml's AMX kernels on VMs that advertise AMX
            # but do not enable it; --no-repack keeps weights out of the AMX buffers (plain CPU kernels).
            argv.append("--no-repack")
        argv += extra or []
        return cls(argv, port, log=log)

    @classmethod
    def rpc_server(cls, *, threads: int = 2, log: Path | None = None, folder: Path | None = None) -> LocalProcess:
        binary = find_tool("rpc-server", folder)
        if binary is None:
            raise FileNotFoundError(f"rpc-server is not built; run {BUILD_SCRIPT}")
        port = free_port()
        return cls([str(binary), "-H", "127.0.0.1", "-p", str(port), "-t", str(threads)], port, log=log)

    def start(self, *, http: bool = True, timeout: float = 120.0) -> LocalProcess:
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{Path(self.argv[0]).name} exited with {self.proc.returncode} ({self.log})")
            if self._ready(http):
                return self
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"{Path(self.argv[0]).name} did not come up on port {self.port}")

    def _ready(self, http: bool) -> bool:
        if not http:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
            return False
        with contextlib.suppress(OSError), urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
            return bool(resp.status == 200)
        return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> LocalProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
