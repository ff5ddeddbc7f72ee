"""Attacks on `hermes-local serve` from a web page and from hostile clients, against the real server.

uvicorn on 127.0.0.1 with the scripted model (tests/fixtures/service_server.py) and real commands: a
DNS-rebinding page (Host and Origin of its own name) cannot start a run, read events or approve a
`run_shell`; cross-site "simple" requests (text/plain, forms, body-less POSTs) change nothing; with
tokens a run answers only the token that started it; `--token` warns and `--token-file` works; the
run queue is bounded; idle event streams do not starve `/v1/health`; a cancel racing an approval
never lets the command run; malformed schemas, numbers, event ids and workspace paths are 400.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import tool_call_text
from hermes_local.testing import ScriptedLLM
from tests.fixtures.service_server import http, served, wait_status


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _evil(base: str) -> dict[str, str]:
    """What a page at http://evil.example:PORT sends after its name was rebound to 127.0.0.1."""
    origin = f"evil.example:{_port(base)}"
    return {"Host": origin, "Origin": f"http://{origin}"}


def _shell_waiting(base: str, command: str) -> tuple[str, str]:
    """A run whose run_shell call waits for approval: (run id, call id)."""
    status, created = http("POST", f"{base}/v1/runs", {"task": "Run it"})
    assert status == 202, created
    [pending] = wait_status(base, created["id"], {"waiting_approval"})["pending_approvals"]
    assert pending["tool"] == "run_shell" and pending["arguments"]["command"] == command
    return created["id"], pending["call"]


def test_a_dns_rebinding_page_cannot_start_read_or_approve(workspace: Path) -> None:
    command = "touch pwned.txt"
    llm = ScriptedLLM([tool_call_text("run_shell", command=command), "Ran."])
    with served(llm, workspace, sandbox="off") as (base, manager):
        run_id, call = _shell_waiting(base, command)  # the user's own run, waiting for the user
        evil = _evil(base)
        status, body = http("POST", f"{base}/v1/runs", {"task": "Read ~/.ssh"}, headers=evil)
        assert status == 403 and "serve_hosts" in body["error"]["message"]
        assert len(manager.runs) == 1 and not manager.queue
        approve = {"call": call, "decision": "allow"}
        assert http("POST", f"{base}/v1/runs/{run_id}/approvals", approve, headers=evil)[0] == 403
        request = urllib.request.Request(f"{base}/v1/runs/{run_id}/events", headers=evil)
        with pytest.raises(urllib.error.HTTPError) as read:
            urllib.request.urlopen(request, timeout=30)
        assert read.value.code == 403
        assert http("GET", f"{base}/v1/runs", headers=evil)[0] == 403
        assert http("GET", f"{base}/v1/runs/{run_id}", headers={"Host": f"evil.example:{_port(base)}"})[0] == 403
        time.sleep(0.3)
        assert wait_status(base, run_id, {"waiting_approval"})["status"] == "waiting_approval"
        http("POST", f"{base}/v1/runs/{run_id}/cancel")
    assert not (workspace / "pwned.txt").exists()


def test_loopback_names_and_serve_hosts_are_answered(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace, serve_hosts=["box.lan"]) as (base, _):
        port = _port(base)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", "box.lan"):
            assert http("GET", f"{base}/v1/health", headers={"Host": host})[0] == 200, host
        for host in (f"box.lan.evil.example:{port}", f"192.168.1.7:{port}", f"127.0.0.1.nip.io:{port}"):
            assert http("GET", f"{base}/v1/health", headers={"Host": host})[0] == 403, host


def test_cross_site_simple_requests_change_nothing(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("write_file", path="w.txt", content="x")])
    with served(llm, workspace) as (base, manager):
        status, created = http("POST", f"{base}/v1/runs", {"task": "Write"})
        run_id = created["id"]
        wait_status(base, run_id, {"waiting_approval"})
        plain = {"Content-Type": "text/plain"}
        status, body = http("POST", f"{base}/v1/runs", raw=b'{"task": "Run"}', headers=plain)
        assert status == 415 and "application/json" in body["error"]["message"]
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        assert http("POST", f"{base}/v1/runs", raw=b'{"task": "Run"}', headers=form)[0] == 415
        assert len(manager.runs) == 1
        page = {"Origin": "http://evil.example"}  # a form or fetch(no-cors) from another site, no body
        assert http("POST", f"{base}/v1/runs/{run_id}/cancel", headers=page)[0] == 403
        assert http("POST", f"{base}/v1/runs/{run_id}/cancel", headers={"Origin": "null"})[0] == 403
        assert http("POST", f"{base}/v1/runs/{run_id}/cancel", headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
        assert wait_status(base, run_id, {"waiting_approval"})["status"] == "waiting_approval"
        own = {"Origin": base}  # the service's own origin, body-less: still a valid cancel
        status, body = http("POST", f"{base}/v1/runs/{run_id}/cancel", headers=own)
        assert status == 200 and body["cancel_requested"]
        assert wait_status(base, run_id, {"cancelled"})["status"] == "cancelled"
    assert not (workspace / "w.txt").exists()


def test_a_run_answers_only_the_token_that_started_it(workspace: Path) -> None:
    command = "touch approved.txt"
    llm = ScriptedLLM([tool_call_text("run_shell", command=command), "Ran."])
    alice, mallory = "alice-token-1", "mallory-token-2"
    with served(llm, workspace, tokens=(alice, mallory), sandbox="off") as (base, _):
        status, created = http("POST", f"{base}/v1/runs", {"task": "Run it"}, token=alice)
        assert status == 202
        run_id = created["id"]
        [pending] = wait_status(base, run_id, {"waiting_approval"}, token=alice)["pending_approvals"]
        approve = {"call": pending["call"], "decision": "allow"}
        status, body = http("POST", f"{base}/v1/runs/{run_id}/approvals", approve, token=mallory)
        assert status == 403 and "other credentials" in body["error"]["message"]
        assert http("POST", f"{base}/v1/runs/{run_id}/cancel", token=mallory)[0] == 403
        assert http("GET", f"{base}/v1/runs/{run_id}", token=mallory)[0] == 403
        assert http("GET", f"{base}/v1/runs", token=mallory)[1]["runs"] == []
        assert http("POST", f"{base}/v1/runs/{run_id}/approvals", approve, token="wrong")[0] == 401
        assert not (workspace / "approved.txt").exists()
        assert http("POST", f"{base}/v1/runs/{run_id}/approvals", approve, token=alice)[0] == 200
        assert wait_status(base, run_id, {"done", "error"}, token=alice)["status"] == "done"
    assert (workspace / "approved.txt").exists()


def test_token_flags_warn_about_ps_and_read_a_file(tmp_path: Path) -> None:
    secret = "s3cret-from-the-command-line"
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--token", secret, "--model", "replay:none"])
    assert "ps" in result.output and "--token-file" in result.output
    assert secret not in result.output
    missing = CliRunner().invoke(app, ["serve", "--token-file", str(tmp_path / "nope"), "--model", "replay:none"])
    assert missing.exit_code == 2 and "token file" in missing.output and "Traceback" not in missing.output
    empty = tmp_path / "empty"
    empty.write_text("# no token here\n\n")
    result = CliRunner().invoke(app, ["serve", "--token-file", str(empty), "--model", "replay:none"])
    assert result.exit_code == 2 and "holds no token" in result.output
    good = tmp_path / "tokens"
    good.write_text("file-token-123\n")
    good.chmod(0o600)
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--token-file", str(good), "--model", "replay:x"])
    assert "exposes the agent" not in result.output and "file-token-123" not in result.output
    assert "readable by others" not in result.output


def test_the_run_queue_is_bounded(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("run_shell", command="sleep 60")])
    with served(llm, workspace, allow_tools=["run_shell"]) as (base, manager):
        bound = getattr(manager.settings, "serve_max_queue", 32)
        assert bound == 32  # the default: well under the 1,500 an attacker queued
        run_id = http("POST", f"{base}/v1/runs", {"task": "First"})[1]["id"]
        wait_status(base, run_id, {"running"})  # it holds the one slot (a run waiting for approval would not)
        for _ in range(bound):
            assert http("POST", f"{base}/v1/runs", {"task": "Queued"})[0] == 202
        status, body = http("POST", f"{base}/v1/runs", {"task": "One too many"})
        assert status == 503 and "queue is full" in body["error"]["message"], body
        assert len(manager.queue) == bound
        for queued in list(manager.queue):
            http("POST", f"{base}/v1/runs/{queued.id}/cancel")
        http("POST", f"{base}/v1/runs/{run_id}/cancel")


def test_idle_event_streams_do_not_starve_health(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("write_file", path="s.txt", content="x")])
    with served(llm, workspace) as (base, _):
        run_id = http("POST", f"{base}/v1/runs", {"task": "Wait"})[1]["id"]
        wait_status(base, run_id, {"waiting_approval"})
        streams = []
        try:
            for _ in range(60):  # more than the server's worker threads (40)
                s = socket.create_connection(("127.0.0.1", _port(base)), timeout=30)
                s.sendall(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                streams.append(s)
            for s in streams:
                assert s.recv(12).startswith(b"HTTP/1.1 200")
            for _ in range(2):
                time.sleep(0.5)  # every stream is now waiting for the run's next event
                start = time.monotonic()
                with urllib.request.urlopen(f"{base}/v1/health", timeout=60) as response:
                    assert response.status == 200
                assert time.monotonic() - start < 5.0  # 18-20 s when each idle stream held a thread
        finally:
            for s in streams:
                s.close()
            http("POST", f"{base}/v1/runs/{run_id}/cancel")


def test_a_cancel_racing_an_approval_never_runs_the_command(workspace: Path) -> None:
    command = "sleep 0.5; echo ran >> raced.txt"
    tries = 10
    llm = ScriptedLLM([tool_call_text("run_shell", command=command)] * tries)
    with served(llm, workspace, sandbox="off") as (base, _):
        for n in range(tries):
            run_id, call = _shell_waiting(base, command)
            approve = {"call": call, "decision": "allow"}
            racer = threading.Thread(target=http, args=("POST", f"{base}/v1/runs/{run_id}/approvals", approve))
            racer.start()
            time.sleep(0.002 * n)  # the cancel lands at a different point of the approved call's start each try
            assert http("POST", f"{base}/v1/runs/{run_id}/cancel")[0] == 200
            racer.join(30)
            assert wait_status(base, run_id, {"cancelled", "done", "error"})["status"] == "cancelled"
        time.sleep(1.0)  # a command that slipped through would have finished its sleep by now
    assert not (workspace / "raced.txt").exists()


RECURSIVE = {
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/node"}},
    "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
}


def _chat(tools: list | None = None, **extra: object) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], "tools": tools, **extra}


def _tool(parameters: object) -> list:
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


def test_malformed_requests_are_400_with_a_message(workspace: Path, tmp_path: Path) -> None:
    (workspace / "loop-a").symlink_to(workspace / "loop-b")
    (workspace / "loop-b").symlink_to(workspace / "loop-a")
    huge = "9" * 5000
    big_call = {"id": "1", "function": {"name": "f", "arguments": f'{{"n": {huge}}}'}}
    tool_turn = {"role": "assistant", "tool_calls": [big_call]}
    named = {"type": "function", "function": "f"}
    bodies = {
        "recursive $ref": _chat(_tool(RECURSIVE)),
        "remote $ref": _chat(_tool({"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/x"}}})),
        "properties as a list": _chat(_tool({"type": "object", "properties": ["a", "b"]})),
        "function as a string": _chat(_tool({"type": "object", "properties": {}}), tool_choice=named),
        "5,000-digit number": {"messages": [{"role": "user", "content": "hi"}, tool_turn]},
    }
    with served(ScriptedLLM(["ok"] * 3), workspace) as (base, _):
        for what, body in bodies.items():
            status, answer = http("POST", f"{base}/v1/chat/completions", body)
            assert status == 400, (what, answer)
            assert answer["error"]["message"], what
        run_id = http("POST", f"{base}/v1/runs", {"task": "t", "tool_choice": "none"})[1]["id"]
        wait_status(base, run_id, {"done"})
        request = urllib.request.Request(f"{base}/v1/runs/{run_id}/events", headers={"Last-Event-ID": huge})
        with pytest.raises(urllib.error.HTTPError) as bad_id:
            urllib.request.urlopen(request, timeout=30)
        assert bad_id.value.code == 400 and b"Last-Event-ID" in bad_id.value.read()
        for workspace_path in ("a\x00b", "x" * 300, "loop-a/inside", "x/" * 3000):
            status, answer = http("POST", f"{base}/v1/runs", {"task": "t", "workspace": workspace_path})
            assert status == 400, (workspace_path[:20], answer)
            assert "workspace" in answer["error"]["message"]


def _retry_after(url: str) -> tuple[int, str | None, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers.get("Retry-After"), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After"), json.loads(exc.read())


def test_requests_per_client_are_rate_limited_by_default(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace) as (base, manager):
        assert (manager.settings.serve_rate_limit, manager.settings.serve_rate_window) == (120, 10.0)
        statuses = [http("GET", f"{base}/v1/runs")[0] for _ in range(100)]  # loopback GETs count
        statuses += [http("POST", f"{base}/v1/runs/nope/cancel")[0] for _ in range(20)]  # and so do POSTs
        status, retry_after, body = _retry_after(f"{base}/v1/runs")
        health = [http("GET", f"{base}/v1/health")[0] for _ in range(5)]  # exempt: monitors poll it
    assert statuses == [200] * 100 + [404] * 20
    assert status == 429 and retry_after is not None and 1 <= int(retry_after) <= 10
    assert body["error"]["type"] == "rate_limited" and "serve_rate_limit" in body["error"]["message"]
    assert health == [200] * 5


def test_the_rate_limit_is_configurable_and_the_window_slides(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace, serve_rate_limit=3, serve_rate_window=1.0) as (base, _):
        first = [http("GET", f"{base}/v1/runs")[0] for _ in range(3)]
        refused = _retry_after(f"{base}/v1/runs")
        time.sleep(1.1)
        again = http("GET", f"{base}/v1/runs")[0]
    assert first == [200] * 3 and refused[:2] == (429, "1") and again == 200
    with served(ScriptedLLM([]), workspace, serve_rate_limit=0) as (base, _):  # 0: off
        assert {http("GET", f"{base}/v1/runs")[0] for _ in range(150)} == {200}
