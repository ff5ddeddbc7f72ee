"""`hermes-local serve` runs over real HTTP (uvicorn on 127.0.0.1) with the replay model.

Covers: a run to completion with its SSE stream equal to the session log, approval allow / deny /
timeout, cancel (running and queued), a forbidden workspace (403), the bearer token on a
non-loopback bind, the body size limit, and `run --resume` of a run interrupted by SIGTERM of a real
`hermes-local serve` process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.dialects.llama3 import Llama3Dialect
from hermes_local.engines.replay import tool_call_text, write_replay
from hermes_local.session import read_events, session_path, sessions_dir
from hermes_local.testing import ScriptedLLM
from hermes_local.tools.approval import approval_view
from hermes_local.tools.builtin.shell import run_shell
from tests.fixtures.service_server import free_port, http, served, sse_events, wait_status

ROOT = Path(__file__).resolve().parents[2]


def test_run_to_completion_streams_the_session_events(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("get_current_time"), "It is noon."])
    with served(llm, workspace) as (base, _):
        status, created = http("POST", f"{base}/v1/runs", {"task": "What time is it?"})
        assert status == 202, created
        run_id = created["id"]
        events = sse_events(f"{base}/v1/runs/{run_id}/events")
        status, view = http("GET", f"{base}/v1/runs/{run_id}")
        late = sse_events(f"{base}/v1/runs/{run_id}/events")  # a late subscriber gets the whole run
        resumed = sse_events(f"{base}/v1/runs/{run_id}/events", last_id=2)  # a reconnect gets the rest
        status_health, health = http("GET", f"{base}/v1/health")
        _, listed = http("GET", f"{base}/v1/runs")
    llm.assert_all_used()
    assert view["status"] == "done" and view["result"]["answer"] == "It is noon."
    assert view["result"]["session_id"] == run_id
    assert [c["name"] for c in view["result"]["tool_calls"]] == ["get_current_time"]
    logged = [e.to_dict() for e in read_events(session_path(run_id))]
    run_events = [data for name, data in events if name not in ("status", "token")]  # tokens are never logged
    assert [e["kind"] for e in run_events] == [e["kind"] for e in logged]
    assert run_events == logged
    assert events[-1] == ("status", {"id": run_id, "status": "done", "error": None})
    assert late == events and resumed == events[3:]
    assert run_events[-1]["kind"] == "run_end" and run_events[-1]["answer"] == "It is noon."
    assert status_health == 200 and health["queue"] == 0 and health["model"] == "scripted"
    assert listed["runs"][0]["id"] == run_id


def test_cli_sessions_show_reads_a_run_made_over_http(workspace: Path) -> None:
    llm = ScriptedLLM(["Plain answer."])
    with served(llm, workspace) as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Say something", "tool_choice": "none"})
        wait_status(base, created["id"], {"done"})
    result = CliRunner().invoke(app, ["sessions", "show", created["id"]])
    assert result.exit_code == 0, result.output
    assert "Plain answer." in result.output


def test_a_runs_instructions_follow_the_configured_ones_in_the_served_dialect(workspace: Path) -> None:
    llm = ScriptedLLM(["Bonjour."])
    request = {"task": "Say hello", "tool_choice": "none", "instructions": "Answer in French."}
    with served(llm, workspace, served_dialect=Llama3Dialect(), instructions="Be brief.") as (base, _):
        _, created = http("POST", f"{base}/v1/runs", request)
        view = wait_status(base, created["id"], {"done"})
    assert view["result"]["answer"] == "Bonjour."
    prompt = llm.prompt_texts[0]
    assert prompt.index("Be brief.") < prompt.index("Answer in French.")
    assert "<|start_header_id|>system" in prompt and "<|im_start|>" not in prompt  # the format serve chose


def _write_run(base: str, name: str = "out.txt") -> tuple[str, dict]:
    status, created = http("POST", f"{base}/v1/runs", {"task": "Write the file"})
    assert status == 202
    view = wait_status(base, created["id"], {"waiting_approval"})
    return created["id"], view


def test_approval_allow_runs_the_write(workspace: Path) -> None:
    content = "line\n" * 2000  # longer than the abbreviated arguments of logged tool events
    llm = ScriptedLLM([tool_call_text("write_file", path="out.txt", content=content), "Written."])
    with served(llm, workspace) as (base, _):
        run_id, view = _write_run(base)
        [pending] = view["pending_approvals"]
        assert pending["tool"] == "write_file" and pending["arguments"] == {"path": "out.txt", "content": content}
        assert not (workspace / "out.txt").exists()
        status, body = http("POST", f"{base}/v1/runs/{run_id}/approvals", {"call": "nope", "decision": "allow"})
        assert status == 409, body
        status, _ = http("POST", f"{base}/v1/runs/{run_id}/approvals", {"call": pending["call"], "decision": "allow"})
        assert status == 200
        view = wait_status(base, run_id, {"done", "error"})
        events = sse_events(f"{base}/v1/runs/{run_id}/events")
    assert view["status"] == "done" and view["result"]["answer"] == "Written."
    assert (workspace / "out.txt").read_text() == content
    names = [name for name, _ in events]
    assert names.index("approval_request") < names.index("approval_decision") < names.index("tool_result")
    request = dict(events)["approval_request"]
    assert request["arguments"]["content"] == content
    result = next(data for name, data in events if name == "tool_result")
    assert result["ok"] and result["approval"] == "user"


def test_approval_deny_and_timeout_refuse_the_write(workspace: Path) -> None:
    script = [tool_call_text("write_file", path="a.txt", content="x"), "Not written."]
    llm = ScriptedLLM(script * 2)
    with served(llm, workspace, approval_timeout=0.3) as (base, manager):
        manager.approval_timeout = 60.0
        run_id, view = _write_run(base)
        call = view["pending_approvals"][0]["call"]
        http("POST", f"{base}/v1/runs/{run_id}/approvals", {"call": call, "decision": "deny"})
        denied = wait_status(base, run_id, {"done", "error"})
        manager.approval_timeout = 0.3  # nobody answers the second run
        _, created = http("POST", f"{base}/v1/runs", {"task": "Write the file"})
        timed_out = wait_status(base, created["id"], {"done", "error"})
        events = sse_events(f"{base}/v1/runs/{created['id']}/events")
    for view in (denied, timed_out):
        [call_record] = view["result"]["tool_calls"]
        assert call_record["error_kind"] == "permission_denied"
        assert view["result"]["answer"] == "Not written."
    assert not (workspace / "a.txt").exists()
    assert ("approval_decision", {"call": "call-1", "tool": "write_file", "decision": "timeout"}) in events
    timeout_result = next(data for name, data in events if name == "tool_result")
    assert timeout_result["approval"] == "timeout" and "nobody answered" in timeout_result["error"]
    assert "said no" not in timeout_result["error"]


def test_approval_request_shows_what_a_terminal_shows_and_notices_reach_the_stream(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("run_shell", command="echo hi"), "Ran."])
    with served(llm, workspace, sandbox="off") as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Run it"})
        [pending] = wait_status(base, created["id"], {"waiting_approval"})["pending_approvals"]
        http("POST", f"{base}/v1/runs/{created['id']}/approvals", {"call": pending["call"], "decision": "allow"})
        assert wait_status(base, created["id"], {"done", "error"})["status"] == "done"
        events = sse_events(f"{base}/v1/runs/{created['id']}/events")
    assert pending["view"] == approval_view(run_shell, {"command": "echo hi"})  # the terminal's rendering
    assert pending["note"].startswith("sandbox: NONE, it runs with your full rights (sandbox = off")
    request = dict(events)["approval_request"]
    assert (request["view"], request["note"]) == (pending["view"], pending["note"])
    notices = [data["text"] for name, data in events if name == "notice"]
    assert len(notices) == 1 and notices[0].startswith("warning: run_shell runs WITHOUT a sandbox")


def test_config_allow_tools_still_pre_approves(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("write_file", path="b.txt", content="y"), "Done."])
    with served(llm, workspace, allow_tools=["write_file"]) as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Write"})
        view = wait_status(base, created["id"], {"done", "error"})
    assert view["status"] == "done" and (workspace / "b.txt").read_text() == "y"


def test_cancel_a_waiting_run_and_a_queued_one(workspace: Path) -> None:
    script = [tool_call_text("write_file", path="c.txt", content="z"), tool_call_text("run_shell", command="sleep 60")]
    llm = ScriptedLLM(script)
    with served(llm, workspace, allow_tools=["run_shell"]) as (base, _):
        run_id, _ = _write_run(base)
        _, busy = http("POST", f"{base}/v1/runs", {"task": "Second"})  # it takes the slot the waiting run gave back
        wait_status(base, busy["id"], {"running"})
        _, queued = http("POST", f"{base}/v1/runs", {"task": "Third"})
        assert http("GET", f"{base}/v1/runs/{queued['id']}")[1]["status"] == "queued"
        assert http("GET", f"{base}/v1/health")[1]["queue"] == 1
        status, _ = http("POST", f"{base}/v1/runs/{queued['id']}/cancel")
        assert status == 200
        assert http("GET", f"{base}/v1/runs/{queued['id']}")[1]["status"] == "cancelled"
        http("POST", f"{base}/v1/runs/{run_id}/cancel")
        view = wait_status(base, run_id, {"cancelled", "done", "error"})
        http("POST", f"{base}/v1/runs/{busy['id']}/cancel")
        assert wait_status(base, busy["id"], {"cancelled", "done", "error"}, timeout=20)["status"] == "cancelled"
        events = sse_events(f"{base}/v1/runs/{run_id}/events")
    assert view["status"] == "cancelled"
    assert events[-1][0] == "status" and events[-1][1]["status"] == "cancelled"
    assert not (workspace / "c.txt").exists()
    kinds = [e.kind for e in read_events(session_path(run_id))]
    assert "run_end" not in kinds and kinds[-1] == "tool_call"  # resumable, like a killed CLI run


def test_workspace_outside_the_roots_is_forbidden(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (workspace / "sub").mkdir()
    llm = ScriptedLLM(["ok", "ok"])
    with served(llm, workspace) as (base, _):
        status, body = http("POST", f"{base}/v1/runs", {"task": "t", "workspace": str(other)})
        assert status == 403 and "workspace_roots" in body["error"]["message"]
        status, _ = http("POST", f"{base}/v1/runs", {"task": "t", "workspace": "../other"})
        assert status == 403
        status, created = http("POST", f"{base}/v1/runs", {"task": "t", "workspace": "sub"})
        assert status == 202
        wait_status(base, created["id"], {"done"})
        status, body = http("POST", f"{base}/v1/runs", {"task": "t", "tools": ["no_such_tool"]})
        assert status == 400 and "no_such_tool" in body["error"]["message"]
        assert http("GET", f"{base}/v1/runs/nope")[0] == 404
    with served(llm, workspace, workspace_roots=[str(other)]) as (base, _):
        status, created = http("POST", f"{base}/v1/runs", {"task": "t", "workspace": str(other)})
        assert status == 202
        assert wait_status(base, created["id"], {"done"})["workspace"] == str(other.resolve())


def test_token_required_on_a_non_loopback_bind(workspace: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--model", "replay:x.jsonl"])
    assert result.exit_code == 2 and "--token" in result.output
    llm = ScriptedLLM([])
    with served(llm, workspace, host="0.0.0.0", token="s3cret") as (base, _):
        assert http("GET", f"{base}/v1/health")[0] == 401
        assert http("GET", f"{base}/v1/health", token="wrong")[0] == 401
        assert http("POST", f"{base}/v1/runs", {"task": "t"})[0] == 401
        status, health = http("GET", f"{base}/v1/health", token="s3cret")
        assert status == 200 and health["status"] == "ok"


def test_request_body_is_size_limited(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace, max_body=2000) as (base, _):
        status, body = http("POST", f"{base}/v1/runs", {"task": "x" * 5000})
    assert status == 413, body


def _start_serve(replay: Path, workspace: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "hermes_local", "serve", "--model", f"replay:{replay}", "--port", str(port)]
    return subprocess.Popen([*command, "--workspace", str(workspace)], env=env, stderr=subprocess.PIPE)


def _wait_up(base: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if http("GET", f"{base}/v1/health")[0] == 200:
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"serve did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)


@pytest.mark.slow
def test_sigterm_leaves_a_run_that_resumes_from_the_cli(workspace: Path, tmp_path: Path) -> None:
    first = write_replay(tmp_path / "first.jsonl", [tool_call_text("write_file", path="d.txt", content="w")])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start_serve(first, workspace, port)
    try:
        _wait_up(base, proc)
        run_id, _ = _write_run(base)
        streamed: list = []
        follower = threading.Thread(target=lambda: streamed.extend(sse_events(f"{base}/v1/runs/{run_id}/events")))
        follower.start()  # an open event stream must not keep the server from stopping
        wait_status(base, run_id, {"waiting_approval"})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
        follower.join(60)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "Traceback" not in stderr, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
    assert streamed[-1] == ("status", {"id": run_id, "status": "cancelled", "error": streamed[-1][1]["error"]})
    kinds = [e.kind for e in read_events(session_path(run_id))]
    assert "run_end" not in kinds
    second = write_replay(tmp_path / "second.jsonl", ["Stopped before writing; nothing was written."])
    result = CliRunner().invoke(
        app,
        ["run", "--resume", run_id, "--model", f"replay:{second}", "--workspace", str(workspace), "--json"],
    )
    assert result.exit_code == 6, result.output  # the write's outcome is unknown: nothing backs the answer
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["answer"] == "Stopped before writing; nothing was written." and out["session_id"] == run_id
    assert out["outcome"] == "unverified" and "outcome unknown" in out["evidence"]
    assert not (workspace / "d.txt").exists()
    assert [e.kind for e in read_events(session_path(run_id))][-1] == "run_end"


@pytest.mark.slow
def test_cancel_kills_the_running_tool_command(workspace: Path, tmp_path: Path) -> None:
    command = "sleep 60; echo late > late.txt"
    replay = write_replay(tmp_path / "shell.jsonl", [tool_call_text("run_shell", command=command)])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HERMES_LOCAL_TOOL_TIMEOUT": "120"}
    args = ["serve", "--model", f"replay:{replay}", "--port", str(port), "--workspace", str(workspace)]
    proc = subprocess.Popen([sys.executable, "-m", "hermes_local", *args, "--allow", "run_shell"], env=env)
    try:
        _wait_up(base, proc)
        _, created = http("POST", f"{base}/v1/runs", {"task": "Run it"})
        wait_status(base, created["id"], {"running"})
        deadline = time.monotonic() + 30
        log = sessions_dir() / f"{created['id']}.jsonl"  # written once the run's agent is built: may lag "running"
        while not log.is_file() or "tool_call" not in [e.kind for e in read_events(log)]:
            assert time.monotonic() < deadline, "the tool call never started"
            time.sleep(0.1)
        time.sleep(0.5)  # the command is running
        http("POST", f"{base}/v1/runs/{created['id']}/cancel")
        view = wait_status(base, created["id"], {"cancelled", "done", "error"}, timeout=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert view["status"] == "cancelled"
    assert not (workspace / "late.txt").exists()


def _origin_header(base: str, token: str | None = None) -> str | None:
    request = urllib.request.Request(f"{base}/v1/health", headers={"Origin": "http://app.example"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("access-control-allow-origin")


def test_no_cors_unless_configured(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace) as (base, _):
        with pytest.raises(urllib.error.HTTPError) as refused:  # a foreign origin is refused, not served
            _origin_header(base)
        assert refused.value.code == 403 and refused.value.headers.get("access-control-allow-origin") is None
    with served(ScriptedLLM([]), workspace, token="t", cors_origins=["http://app.example"]) as (base, _):
        assert _origin_header(base, token="t") == "http://app.example"
        preflight = urllib.request.Request(
            f"{base}/v1/runs",
            method="OPTIONS",
            headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST"},
        )
        with urllib.request.urlopen(preflight, timeout=30) as response:
            assert response.status == 200


def test_serve_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if `pip install .` without [serve]
    result = CliRunner().invoke(app, ["serve", "--model", "replay:x.jsonl"])
    assert result.exit_code == 2 and "hermes-local[serve]" in result.output


def test_a_team_run_routes_delegates_and_asks_for_the_specialists_write_labelled(workspace: Path) -> None:
    from tests.agent.test_team import PROFILES, delegate_call

    script = [
        delegate_call("writer", "Write the revenue report into r.md"),
        tool_call_text("write_file", path="r.md", content="Revenue: 10"),
        "r.md is written.",
        "The writer wrote r.md.",
    ]
    with served(ScriptedLLM(script), workspace, agents=PROFILES) as (base, _):
        task = {"task": "Find the revenue with SQL, then write a report", "team": True}
        _, created = http("POST", f"{base}/v1/runs", task)
        [pending] = wait_status(base, created["id"], {"waiting_approval"})["pending_approvals"]
        assert pending["tool"] == "write_file"
        assert pending["note"].startswith("Asked for specialist 'writer', for its sub-task: Write the revenue report")
        http("POST", f"{base}/v1/runs/{created['id']}/approvals", {"call": pending["call"], "decision": "allow"})
        view = wait_status(base, created["id"], {"done", "error"})
        events = sse_events(f"{base}/v1/runs/{created['id']}/events")
    assert view["status"] == "done" and view["result"]["answer"] == "The writer wrote r.md."
    assert (workspace / "r.md").read_text() == "Revenue: 10"
    routed = dict(events)["routed"]
    assert routed["chosen"] == "manager" and routed["candidates"][-1] == "manager"
    links = [data for name, data in events if name == "delegation"]
    assert [link["status"] for link in links] == ["", "answered"] and links[0]["parent"] == created["id"]
    child = [data for name, data in events if name == "child_event"]  # the specialist's events, tagged
    assert {c["agent"] for c in child} == {"writer"} and {c["child"] for c in child} == {links[0]["child"]}
    assert [c["event"]["name"] for c in child if c["event"]["kind"] == "tool_result"] == ["write_file"]


def test_a_served_team_run_narrows_to_the_router_models_toolsets_and_runs_a_specialist_on_its_own_model(
    tmp_path: Path, workspace: Path
) -> None:
    """serve gets what `run --team` gets: the router model's toolsets in the big model's prompt, the Routed event
    with them on the stream, and a specialist on the model its profile names (issue 30)."""
    from tests.agent.test_team import PROFILES, delegate_call

    router = write_replay(tmp_path / "router.jsonl", ["manager", "files"])
    own = write_replay(tmp_path / "w.jsonl", [tool_call_text("write_file", path="r.md", content="10"), "r.md done."])
    profiles = {**PROFILES, "writer": {**PROFILES["writer"], "model": f"replay:{own}"}}
    llm = ScriptedLLM([delegate_call("writer", "Write r.md"), "The writer wrote r.md."])
    settings = {"agents": profiles, "router_model": f"replay:{router}", "allow_tools": ["write_file"]}
    with served(llm, workspace, **settings) as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Sum up the revenue and write it down", "team": True})
        view = wait_status(base, created["id"], {"done", "error"})
        events = sse_events(f"{base}/v1/runs/{created['id']}/events")
    assert view["status"] == "done" and view["result"]["answer"] == "The writer wrote r.md.", view
    assert (workspace / "r.md").read_text() == "10"  # the writer's own model wrote it; the manager's made 2 calls
    routed = dict(events)["routed"]
    assert routed["router"] == "router_model" and routed["toolsets"] == ["files"]
    first = llm.prompt_texts[0]
    assert '"read_file"' in first and '"delegate"' in first and '"get_current_time"' not in first
    assert llm.remaining == 0 and len(llm.prompt_texts) == 2
