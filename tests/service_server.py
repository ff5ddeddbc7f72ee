"""Test helpers for `hermes-local serve`: the real app under uvicorn on 127.0.0.1, and a tiny HTTP client.

`served(model, workspace, ...)` runs `service.app.create_app` with a `RunManager` in a uvicorn thread
on a free port and yields the base URL and the manager. `http()` is urllib with JSON in and out;
`sse_events()` reads a Server-Sent Events stream to its end.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from hermes_local.config import load_settings
from hermes_local.runtime import build_registry
from hermes_local.service.app import create_app
from hermes_local.service.process import SharedModel
from hermes_local.service.runs import RunManager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(
    llm: Any,
    workspace: Path,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    max_body: int = 1_000_000,
    approval_timeout: float = 60.0,
    cors_origins: list[str] | None = None,
    **settings: Any,
) -> Iterator[tuple[str, RunManager]]:
    """The service on a free port (bound to `host`, always reached through 127.0.0.1)."""
    manager = RunManager(
        SharedModel(llm),
        load_settings(settings),
        registry=build_registry(),
        workspace=workspace,
        approval_timeout=approval_timeout,
    )
    app = create_app(manager, token=token, max_body=max_body, cors_origins=cors_origins)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", manager
    finally:
        server.should_exit = True
        thread.join(30)


def http(
    method: str, url: str, body: Any = None, *, token: str | None = None, raw: bytes | None = None
) -> tuple[int, Any]:
    """(status, decoded JSON body) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def sse_events(url: str, token: str | None = None, last_id: int | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Every (event name, data) of a Server-Sent Events stream, read until the server closes it."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if last_id is not None:
        request.add_header("Last-Event-ID", str(last_id))
    events = []
    name, data = "message", []
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        for raw in response:
            line = raw.decode("utf-8").rstrip("\n")
            if not line:
                if data:
                    events.append((name, json.loads("\n".join(data))))
                name, data = "message", []
            elif line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):  # (`id:` lines are the event numbers)
                data.append(line[len("data: ") :])
    return events


def wait_status(base: str, run_id: str, wanted: set[str], token: str | None = None, timeout: float = 60) -> dict:
    """Poll `GET /v1/runs/{id}` until its status is one of `wanted` (fails after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        status, view = http("GET", f"{base}/v1/runs/{run_id}", token=token)
        assert status == 200, view
        if view["status"] in wanted:
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} stayed {view['status']}, wanted {wanted}")
        time.sleep(0.05)
