"""Issue 43 item 5: the service under a flood of chat completions. 48 slow chats used to hold every worker thread,
so creating a run, an approval and a cancel waited 20+ s while `/v1/health` said ok, and abandoned chats kept
generating. The real app under uvicorn on 127.0.0.1, real sockets (a client that goes away closes its socket),
a paced replay model. The bounds are generous (this machine is shared): `scripts/serve_flood.py` measures."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_local.llm import DEFAULT_OPTIONS, CallOptions, Completion, TokenCallback
from hermes_local.testing import PacedLLM, tool_call_text
from tests.fixtures.service_server import http, served, wait_status

SLOW = " ".join(["word"] * 60)  # 60 pieces, paced: a chat of about 2 s
BOUND = 5.0  # seconds; unloaded they answer in milliseconds, before the fix in 15-25 s


class CountingLLM(PacedLLM):
    """A paced replay model that counts the pieces it generated (a chat stopped early stops the count)."""

    def __init__(self, outputs: list[str], pause: float) -> None:
        super().__init__(outputs, pause=pause)
        self.pieces = 0

    def complete(
        self, tokens: Any, options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        def counted(piece: str) -> None:
            self.pieces += 1
            if on_token is not None:
                on_token(piece)

        return super().complete(tokens, options, on_token=counted)


def open_chat(base: str, content: str, *, stream: bool = False) -> socket.socket:
    """A chat request sent on a raw socket that stays open (the client waits); closing it is leaving."""
    port = int(base.rsplit(":", 1)[1])
    body = json.dumps({"messages": [{"role": "user", "content": content}], "stream": stream}).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def answered(sock: socket.socket) -> bytes:
    """What the server has sent on `sock` so far (nothing yet: b"")."""
    sock.settimeout(0.05)
    try:
        return sock.recv(65536)
    except (TimeoutError, BlockingIOError):
        return b""


def chats(base: str) -> dict[str, Any]:
    return http("GET", f"{base}/v1/health")[1]["chats"]


def until(check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def timed(method: str, url: str, body: dict | None = None) -> tuple[float, int, Any]:
    started = time.monotonic()
    status, answer = http(method, url, body)
    return time.monotonic() - started, status, answer


@contextlib.contextmanager
def flood(base: str, n: int) -> Iterator[list[socket.socket]]:
    socks = [open_chat(base, f"Question {i}: tell me a long story.") for i in range(n)]
    try:
        yield socks
    finally:
        for sock in socks:
            sock.close()


def test_runs_approvals_and_cancel_answer_under_a_flood_of_slow_chats(workspace: Path) -> None:
    write = tool_call_text("write_file", path="a.txt", content="x")
    llm = CountingLLM([write] + [SLOW] * 200, pause=0.03)
    with served(llm, workspace, approval_timeout=120, serve_max_queue=32) as (base, _):
        status, started = http("POST", f"{base}/v1/runs", {"task": "Write a.txt"})
        assert status == 202
        wait_status(base, started["id"], {"waiting_approval"})
        with flood(base, 48):
            until(lambda: (c := chats(base))["busy"] == 1 and c["busy"] + c["waiting"] + c["refused"] == 48)
            health = http("GET", f"{base}/v1/health")[1]
            create = timed("POST", f"{base}/v1/runs", {"task": "Another task"})
            [pending] = http("GET", f"{base}/v1/runs/{started['id']}")[1]["pending_approvals"]
            decision = {"call": pending["call"], "decision": "deny"}
            approve = timed("POST", f"{base}/v1/runs/{started['id']}/approvals", decision)
            cancel = timed("POST", f"{base}/v1/runs/{create[2]['id']}/cancel")
            refused = chats(base)["refused"]
        assert health["status"] == "ok" and health["chats"]["capacity"] == 32
        assert health["chats"]["waiting"] <= 32 and refused >= 48 - 33  # the rest were told to come back later
        for seconds, status, _ in (create, approve, cancel):
            assert status in (200, 202) and seconds < BOUND, (create, approve, cancel)
        # every flood client has gone: the one generating stops, the queued ones never run
        until(lambda: chats(base)["abandoned"] == 48 - refused and chats(base)["busy"] == 0)
        started_at = time.monotonic()
        status, reply = http("POST", f"{base}/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})
        assert status == 200 and reply["choices"][0]["message"]["content"], reply
        assert time.monotonic() - started_at < BOUND


def test_a_full_chat_queue_answers_503_with_retry_after(workspace: Path) -> None:
    with served(CountingLLM([SLOW] * 10, pause=0.05), workspace, serve_max_queue=1) as (base, _):
        with flood(base, 1):
            until(lambda: chats(base)["busy"] == 1)
            with flood(base, 1):
                until(lambda: chats(base)["waiting"] == 1)
                sock = open_chat(base, "One too many")
                got: list[bytes] = []
                until(lambda: bool(got.append(answered(sock)) or b"}" in b"".join(got)), timeout=10)
                sock.close()
    head, _, body = b"".join(got).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503") and b"retry-after: " in head.lower(), head
    assert json.loads(body)["error"]["message"].startswith("the chat queue is full (1 requests waiting); retry in ")


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_whose_client_disconnects_stops_generating(workspace: Path, stream: bool) -> None:
    llm = CountingLLM([" ".join(["word"] * 400)] * 2, pause=0.03)  # 12 s unless stopped
    with served(llm, workspace) as (base, _):
        sock = open_chat(base, "Tell me everything.", stream=stream)
        until(lambda: llm.pieces >= 5)
        sock.close()
        until(lambda: chats(base)["abandoned"] == 1 and chats(base)["busy"] == 0, timeout=BOUND)
        stopped_at = llm.pieces
        time.sleep(0.5)
        assert llm.pieces <= stopped_at + 1 and stopped_at < 100  # nothing generated for nobody
