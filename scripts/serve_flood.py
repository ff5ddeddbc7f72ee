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


def timed(base: str, method: str, path: str, body: dict | None = None) -> tuple[float, int, Any]:
    started = time.perf_counter()
    status, answer = http(base, method, path, body)
    return (time.perf_counter() - started) * 1000, status, answer


def open_chat(port: int, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def three(base: str, repeat: int) -> dict[str, Any]:
    """Median ms of run creation, an approval and a cancel (and the approval's status codes)."""
    create, approve, cancel, statuses = [], [], [], set()
    for _ in range(repeat):
        ms, status, run = timed(base, "POST", "/v1/runs", {"task": "Say hello.", "max_steps": 1})
        assert status == 202, run
        create.append(ms)
        ms, status, _ = timed(base, "POST", f"/v1/runs/{run['id']}/approvals", {"call": "call-1", "decision": "deny"})
        approve.append(ms)
        statuses.add(status)
        ms, status, answer = timed(base, "POST", f"/v1/runs/{run['id']}/cancel")
        assert status == 200, answer
        cancel.append(ms)
    median = statistics.median
    return {
        "create_ms": round(median(create), 1),
        "approval_ms": round(median(approve), 1),
        "cancel_ms": round(median(cancel), 1),
        "approval_status": sorted(statuses),
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
            while http(base, "GET", "/v1/health")[1]["chats"]["busy"] < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            report["flood"] = three(base, args.repeat)
            ms, _, health = timed(base, "GET", "/v1/health")
            report["flood"]["health_ms"] = round(ms, 1)
            report["health_chats"] = health["chats"]
            for sock in socks:
                sock.close()
            socks = []
            time.sleep(0.5)
            short = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 5}
            ms, status, _ = timed(base, "POST", "/v1/chat/completions", short)
            report["after_abandon"] = {"five_token_chat_ms": round(ms, 1), "status": status}
            report["after_abandon"]["chats"] = http(base, "GET", "/v1/health")[1]["chats"]
            b, f = report["baseline"], report["flood"]
            report["ratios"] = {
                k: round(f[k] / b[k], 2) if b[k] else None for k in ("create_ms", "approval_ms", "cancel_ms")
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
