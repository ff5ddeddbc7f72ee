"""The service under a flood of chat completions (issue 43 item 5): run creation, an approval and a cancel, timed
unloaded and while 48 slow chats wait, in one run of a real `hermes-local serve` on 127.0.0.1.

Starts `python -m hermes_local serve` (the embedded SmolLM2 unless --model; a temporary home and workspace), then:
1. baseline: `POST /v1/runs`, `POST /v1/runs/ID/approvals` (a call id the run never asked about: the route's own
   cost; its status is printed) and `POST /v1/runs/ID/cancel`, each --repeat times, unloaded;
2. the flood: 48 chats asking for a long count (`max_tokens` 512) on raw sockets that stay open, then the same
   three requests again, and `/v1/health`'s `chats` section;
3. the flood's clients all leave (their sockets close), then a 5-token chat is timed (abandoned chats must not
   keep the model busy).
Prints medians (ms) and flood / baseline ratios. Goal: each under 1000 ms during the flood. Figures, not
assertions; run it on an otherwise idle machine: `python scripts/serve_flood.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def http(base: str, method: str, path: str, body: dict | None = None, timeout: float = 120) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def timed(base: str, method: str, path: str, body: dict | None = None, timeout: float = 120) -> tuple[float, int, Any]:
    """Milliseconds, status and answer; a request that gets no answer in `timeout` s counts as that long, status 0
    (a server without the chat queue can leave a route waiting behind the flood)."""
    started = time.perf_counter()
    try:
        status, answer = http(base, method, path, body, timeout)
    except (TimeoutError, urllib.error.URLError, ConnectionError):
        status, answer = 0, None
    return (time.perf_counter() - started) * 1000, status, answer


def chats_section(base: str) -> dict[str, Any] | None:
    """`/v1/health`'s chat queue (None from a server that has none, or that does not answer in 30 s)."""
    _, status, health = timed(base, "GET", "/v1/health", timeout=30)
    return health.get("chats") if status == 200 and isinstance(health, dict) else None


def open_chat(port: int, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def three(base: str, repeat: int) -> dict[str, Any]:
    """Median ms of run creation, an approval and a cancel (and their status codes: 0 is no answer in 120 s)."""
    create: list[float] = []
    approve: list[float] = []
    cancel: list[float] = []
    statuses: set[str] = set()
    for _ in range(repeat):
        ms, status, run = timed(base, "POST", "/v1/runs", {"task": "Say hello.", "max_steps": 1})
        create.append(ms)
        if status != 202:  # no run to approve or cancel: recorded as it is
            statuses.add(f"create {status}")
            continue
        ms, status, _ = timed(base, "POST", f"/v1/runs/{run['id']}/approvals", {"call": "call-1", "decision": "deny"})
        approve.append(ms)
        statuses.add(f"approval {status}")
        ms, status, _ = timed(base, "POST", f"/v1/runs/{run['id']}/cancel")
        cancel.append(ms)
        statuses.add(f"cancel {status}")

    def median(values: list[float]) -> float | None:
        return round(statistics.median(values), 1) if values else None

    return {
        "create_ms": median(create),
        "approval_ms": median(approve),
        "cancel_ms": median(cancel),
        "statuses": sorted(statuses),
        "worst_ms": round(max(create + approve + cancel), 1),
    }


def wait_up(base: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited with {proc.returncode}")
        try:
            if http(base, "GET", "/v1/health", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("serve did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="--model for serve (default: the embedded SmolLM2)")
    parser.add_argument("--chats", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--port", type=int, default=8399)
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory(prefix="serve-flood-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        env = os.environ | {"HERMES_LOCAL_HOME": str(Path(tmp) / "home"), "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "hermes_local", "serve", "--port", str(args.port), "--workspace", str(workspace)]
        cmd += ["--model", args.model] if args.model else []
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        socks: list[socket.socket] = []
        try:
            wait_up(base, proc)
            report: dict[str, Any] = {"chats": args.chats, "baseline": three(base, args.repeat)}
            long_chat = {"messages": [{"role": "user", "content": "Count from 1 to 500, one number a line."}]}
            long_chat["max_tokens"] = 512
            socks = [open_chat(args.port, long_chat) for _ in range(args.chats)]
            deadline = time.monotonic() + 60
            while (queue := chats_section(base)) is not None and queue["busy"] < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            if queue is None:  # a server before the chat queue: give the flood time to reach the model
                time.sleep(3)
            report["flood"] = three(base, args.repeat)
            ms, _, health = timed(base, "GET", "/v1/health")
            report["flood"]["health_ms"] = round(ms, 1)
            report["health_chats"] = health.get("chats") if isinstance(health, dict) else None
            for sock in socks:
                sock.close()
            socks = []
            time.sleep(0.5)
            short = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 5}
            ms, status, _ = timed(base, "POST", "/v1/chat/completions", short)
            report["after_abandon"] = {"five_token_chat_ms": round(ms, 1), "status": status}
            report["after_abandon"]["chats"] = chats_section(base)
            b, f = report["baseline"], report["flood"]
            report["ratios"] = {
                k: round(f[k] / b[k], 2) if b[k] and f[k] else None for k in ("create_ms", "approval_ms", "cancel_ms")
            }
            report["goal_met"] = f["worst_ms"] < 1000
            print(json.dumps(report, indent=2))
        finally:
            for sock in socks:
                sock.close()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
