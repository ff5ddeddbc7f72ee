"""llama.cpp RPC for real: the embedded model split over a local `rpc-server`, driven through llama-server.

llama-server runs once on its own CPU and once with `--rpc 127.0.0.1:PORT` (all layers offloaded to the
RPC device); at temperature 0 both must produce the same tokens, llama-server must list the rpc-server
as a device, and the rpc-server must have served it. Uses the binaries scripts/build_llama_cpp_tools.sh
built (skipped with the reason shown otherwise); prints the figures, asserts no timings.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.engines import load_engine
from hermes_local.engines.binaries import LocalProcess, find_tool, tools_dir
from hermes_local.llm import CallOptions

TOOLS = tools_dir()  # computed at import: the hermetic-home fixture moves HOME for each test
pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(
        find_tool("rpc-server", TOOLS) is None or find_tool("llama-server", TOOLS) is None,
        reason=f"rpc-server/llama-server not built in {TOOLS}; run scripts/build_llama_cpp_tools.sh",
    ),
]


def greedy(url: str, goal: str) -> tuple[list[int], dict[str, float]]:
    from hermes_local.prompts import chat_tokens

    engine = load_engine(load_settings({"engine": "llama-server", "engine_url": url}))
    prompt = chat_tokens([{"role": "user", "content": goal}], engine)
    start = time.perf_counter()
    out = engine.complete(prompt, CallOptions(max_tokens=16, temperature=0.0))
    figures = {"prompt_tokens": len(prompt), "tokens": len(out.tokens), "seconds": time.perf_counter() - start}
    return out.tokens, figures


def test_model_split_over_rpc_gives_the_same_tokens(embedded_model_path: Path, tmp_path: Path) -> None:
    goal = "List three colours of the rainbow."
    with LocalProcess.llama_server(embedded_model_path, log=tmp_path / "local.log", folder=TOOLS) as local:
        local_tokens, local_fig = greedy(local.url, goal)
    with LocalProcess.rpc_server(log=tmp_path / "rpc.log", folder=TOOLS).start(http=False) as rpc:
        address = f"127.0.0.1:{rpc.port}"
        server = str(find_tool("llama-server", TOOLS))
        listing = subprocess.run([server, "--rpc", address, "--list-devices"], capture_output=True, timeout=120)
        devices = (listing.stdout + listing.stderr).decode(errors="replace")
        assert "RPC" in devices and address in devices, devices  # the rpc-server is a device of llama-server
        extra = ["--rpc", address, "-ngl", "99"]  # every layer on the non-CPU device: the RPC backend
        with LocalProcess.llama_server(embedded_model_path, extra=extra, log=tmp_path / "split.log", folder=TOOLS) as s:
            rpc_tokens, rpc_fig = greedy(s.url, goal)
    assert "Accepted client connection" in (tmp_path / "rpc.log").read_text(errors="replace")
    assert local_tokens and rpc_tokens == local_tokens
    print(f"\nlocal: {local_fig}\nover RPC: {rpc_fig}\n{devices.strip()}")
