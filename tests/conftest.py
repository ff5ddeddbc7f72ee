"""Shared fixtures: a hermetic home dir for every test, the embedded model when installed."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def hermetic_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HERMES_LOCAL_HOME", str(home / "hermes"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    for name in list(os.environ):
        if name.startswith("HERMES_LOCAL_") and name != "HERMES_LOCAL_HOME":
            monkeypatch.delenv(name)
    return home


@pytest.fixture(autouse=True)
def no_outside_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that opens a socket to anything but loopback is a bug: fail it loudly."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and not (host.startswith("127.") or host in ("localhost", "::1"))
            and self.family
            in (
                socket.AF_INET,
                socket.AF_INET6,
            )
        ):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    from hermes_local.errors import UserError
    from hermes_local.models.registry import embedded_model_path

    try:
        return embedded_model_path()
    except UserError as exc:
        pytest.fail(f"real-model tests need the embedded model: {exc}")


@pytest.fixture(scope="session")
def real_llm(embedded_model_path: Path):
    """One llama.cpp model for the whole test session (CPU, small context)."""
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams

    return LlamaCppLLM(embedded_model_path, LlamaParams(n_ctx=2048, n_gpu_layers=0, n_threads=2, seed=1))


@pytest.fixture(scope="session")
def exact_llm(embedded_model_path: Path):
    """The embedded model with batch-invariant kernels: drafts verified in a batch give exactly the tokens
    of one-at-a-time decoding (fast-forward, prompt lookup and batched runs are compared on it)."""
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams

    params = LlamaParams(n_ctx=2048, n_gpu_layers=0, n_threads=2, seed=1, batch_invariant=True)
    return LlamaCppLLM(embedded_model_path, params)


@contextlib.contextmanager
def loopback_http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on 127.0.0.1 (a free port) for the block; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def fixed_page(body: bytes, content_type: str = "text/html; charset=utf-8") -> type[BaseHTTPRequestHandler]:
    """A handler for `loopback_http_server` that answers every GET with `body`."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Page
