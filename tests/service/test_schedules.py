"""Schedules: `schedule add|list|remove|run-now|daemon` and the scheduler inside `serve`, with the scripted model.

Unattended runs never wait for a person (calls outside the schedule's allow-list are denied and reported), each
run is an ordinary session, a missed run runs once and says so, and two runs of one schedule never overlap.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import tool_call_text, write_replay
from hermes_local.service import schedules
from hermes_local.service.scheduler import Scheduler
from hermes_local.service.schedules import Schedule, ScheduleLock
from hermes_local.session import read_records, session_path
from hermes_local.testing import ScriptedLLM
from tests.fixtures.service_server import free_port, http, served
from tests.service.test_service import _start_serve, _wait_up

ROOT = Path(__file__).resolve().parents[2]
WRITE = tool_call_text("write_file", path="a.txt", content="x")


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_add_list_remove_and_the_mistakes_they_refuse(workspace: Path, tmp_path: Path) -> None:
    code, _, err = _cli("schedule", "add", "daily", "--cron", "0 8 * * 1-5", "Summarize notes.md", "--workspace",
                        str(workspace), "--allow", "append_to_memo")  # fmt: skip
    assert code == 0 and "schedule daily added; next run" in err
    code, out, _ = _cli("schedule", "list", "--json")
    [listed] = json.loads(out)
    assert code == 0 and listed["name"] == "daily" and listed["cron"] == "0 8 * * 1-5"
    assert listed["task"] == "Summarize notes.md" and listed["allow"] == ["append_to_memo"]
    assert listed["workspace"] == str(workspace.resolve()) and listed["next"] > time.time()
    assert time.localtime(listed["next"]).tm_hour == 8 and time.localtime(listed["next"]).tm_wday < 5
    assert "daily  [0 8 * * 1-5]  next " in _cli("schedule", "list")[1]
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "b"\n[[steps]]\nid = "a"\ntool = "fly"\n')
    (empty_db := tmp_path / "empty.db").touch()
    for args, words in [
        (["daily", "--cron", "0 8 * * *", "again"], "exists; remove it first"),
        (["bad", "--cron", "0 25 * * *", "task"], "not a 5-field cron expression"),
        (["bad", "--cron", "@daily", "task"], "not a 5-field cron expression"),
        (["../up", "--cron", "0 8 * * *", "task"], "not a plain name"),
        (["wf", "--cron", "0 8 * * *", str(broken)], "unknown tool 'fly'"),
        (["wf", "--cron", "0 8 * * *", str(tmp_path / "none.toml")], "does not exist"),
        (["t", "--cron", "0 8 * * *", "task", "--db", str(empty_db)], "--db and --var are for a workflow schedule"),
    ]:
        code, _, err = _cli("schedule", "add", *args, "--workspace", str(workspace))
        assert code == 2 and words in err and err.count("\n") == 1, err
    assert _cli("schedule", "remove", "daily")[0] == 0
    assert json.loads(_cli("schedule", "list", "--json")[1]) == []
    code, _, err = _cli("schedule", "remove", "daily")
    assert code == 2 and "no schedule 'daily'" in err


def _schedule(workspace: Path, name: str = "nightly", **fields) -> Schedule:  # type: ignore[no-untyped-def]
    defaults = {"cron": "0 3 * * *", "task": "Write a.txt", "workspace": str(workspace)}
    schedule = Schedule(name=name, **(defaults | fields))
    schedules.add(schedule)
    return schedule


def test_an_unattended_run_denies_calls_outside_its_allow_list_and_never_waits(workspace: Path) -> None:
    _schedule(workspace)
    _schedule(workspace, "allowed", allow=["write_file"], task="Write a.txt, allowed", instructions="Be terse.")
    llm = ScriptedLLM([WRITE, "I could not write it.", WRITE, "Written."])
    with served(llm, workspace, approval_timeout=60) as (base, manager):
        lines: list[str] = []
        scheduler = Scheduler(manager, on_line=lines.append)
        started = time.monotonic()
        denied = scheduler.fire("nightly")
        assert time.monotonic() - started < 30  # nobody was waited for (the approval timeout is 60 s)
        assert not (workspace / "a.txt").exists()
        allowed = scheduler.fire("allowed")
        listed = http("GET", f"{base}/v1/runs")[1]["runs"]
    assert denied is not None and denied.last_status == "answer" and denied.last_session
    assert "denied (not in the schedule's allow-list, nobody is asked): write_file" in (denied.last_note or "")
    assert lines[0].startswith(f"schedule nightly: answer (session {denied.last_session}): denied")
    events = read_records(session_path(denied.last_session))  # an ordinary session
    assert events[0]["kind"] == "run_start" and events[-1]["kind"] == "run_end"
    [result] = [e for e in events if e["kind"] == "tool_result"]
    assert result["approval"] == "no_terminal" and result["error_kind"] == "permission_denied"
    assert allowed is not None and allowed.last_status == "answer" and allowed.last_note is None
    assert (workspace / "a.txt").read_text() == "x"
    assert "Be terse." in llm.prompt_texts[-1] and "Be terse." not in llm.prompt_texts[0]  # its own instructions
    assert {denied.last_session, allowed.last_session} <= {r["id"] for r in listed}  # runs of the service
    assert schedules.get("nightly").last_session == denied.last_session  # the outcome is kept


def test_a_missed_run_runs_once_and_says_so_and_a_time_not_yet_due_waits(workspace: Path) -> None:
    now = time.time()
    _schedule(workspace, "hourly", task="Say hello", last_due=now - 5 * 3600)  # five hourly runs missed
    schedules.add(schedules.Schedule(name="later", cron="0 8 * * *", task="Not yet", workspace=str(workspace)))
    with served(ScriptedLLM(["Hello."]), workspace) as (_, manager):
        schedules.save(schedules.get("hourly").model_copy(update={"cron": "0 * * * *"}))
        lines: list[str] = []
        scheduler = Scheduler(manager, on_line=lines.append)
        threads = scheduler.tick(now)
        for thread in threads:
            thread.join(30)
        again = scheduler.tick(now + 1)
    hourly = schedules.get("hourly")
    assert len(threads) == 1 and again == []  # one run for all the missed times; nothing due after it
    assert hourly.last_status == "answer" and "missed runs from " in (hourly.last_note or "")
    assert hourly.last_due is not None and now - 3600 < hourly.last_due <= now  # the latest missed time
    assert any("missed runs from " in line and "run once at" in line for line in lines)
    assert schedules.get("later").last_status is None


def test_two_runs_of_one_schedule_never_overlap(workspace: Path) -> None:
    _schedule(workspace, last_due=time.time() - 2 * 86400)
    with served(ScriptedLLM([]), workspace) as (_, manager):
        lines: list[str] = []
        scheduler = Scheduler(manager, on_line=lines.append)
        held = ScheduleLock("nightly")  # a run of it going (in this process, `serve` or `schedule daemon`)
        assert held.acquire()
        try:
            for thread in scheduler.tick():
                thread.join(30)
            code, _, err = _cli("schedule", "run-now", "nightly", "--model", "replay:/nonexistent.jsonl")
            assert not ScheduleLock("nightly").acquire()
        finally:
            held.release()
    assert [line for line in lines if "waits: the previous run is still going" in line]
    assert schedules.get("nightly").last_status is None  # nothing ran
    assert code == 2 and "schedule nightly is running now; wait for that run to finish" in err


def test_run_now_and_the_daemon_run_a_schedule_as_a_session(workspace: Path, tmp_path: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["Hello from run-now."])
    _schedule(workspace, "greet", task="Say hello", tool_choice="none")
    code, _, err = _cli("schedule", "run-now", "greet", "--model", f"replay:{replay}")
    greet = schedules.get("greet")
    assert code == 0, err
    assert greet.last_status == "answer" and f"schedule greet: answer (session {greet.last_session})" in err
    assert read_records(session_path(greet.last_session or ""))[-1]["answer"] == "Hello from run-now."

    daemon_replay = write_replay(tmp_path / "d.jsonl", ["Hello from the daemon."])
    schedules.save(greet.model_copy(update={"last_due": time.time() - 2 * 86400}))  # missed while it was off
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "hermes_local", "schedule", "daemon", "--model", f"replay:{daemon_replay}"]
    proc = subprocess.Popen(cmd, cwd=workspace, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        first = greet.last_session
        while (seen := schedules.get("greet")).last_session in (first, None) or seen.last_status == "running":
            assert time.monotonic() < deadline and proc.poll() is None, "the daemon did not run the missed schedule"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    ran = schedules.get("greet")
    assert proc.returncode == 0, stderr
    assert "missed run" in stderr and "schedule greet: answer" in stderr
    assert read_records(session_path(ran.last_session or ""))[-1]["answer"] == "Hello from the daemon."


def test_a_scheduled_workflow_runs_unattended_too(workspace: Path, tmp_path: Path) -> None:
    wf = tmp_path / "notes.toml"
    step = 'id = "w"\ntool = "write_file"\nparams = { path = "n.txt", content = "{{ vars.greeting }}" }'
    wf.write_text(f'name = "notes"\n\n[vars]\ngreeting = "hi"\n\n[[steps]]\n{step}\n')
    code, _, err = _cli("schedule", "add", "wf", "--cron", "30 6 * * *", str(wf), "--workspace", str(workspace),
                        "--var", "greeting=hello")  # fmt: skip
    assert code == 0, err
    assert json.loads(_cli("schedule", "list", "--json")[1])[0]["workflow"] == str(wf.resolve())
    with served(ScriptedLLM([]), workspace) as (_, manager):
        scheduler = Scheduler(manager)
        denied = scheduler.fire("wf")
        schedules.save(schedules.get("wf").model_copy(update={"allow": ["write_file"]}))
        allowed = scheduler.fire("wf")
    assert denied is not None and denied.last_status == "failed" and "write_file" in (denied.last_note or "")
    assert allowed is not None and allowed.last_status == "ok" and (workspace / "n.txt").read_text() == "hello"
    assert read_records(session_path(allowed.last_session or ""))[0]["kind"] == "workflow_start"


@pytest.mark.slow
def test_serve_runs_the_schedules_and_shows_their_runs(workspace: Path, tmp_path: Path) -> None:
    replay = write_replay(tmp_path / "s.jsonl", ["Hello from serve."])
    _schedule(workspace, "served", task="Say hello", tool_choice="none", last_due=time.time() - 2 * 86400)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start_serve(replay, workspace, port)
    try:
        _wait_up(base, proc)
        deadline = time.monotonic() + 60
        while (seen := schedules.get("served")).last_session is None or seen.last_status == "running":
            assert time.monotonic() < deadline, "serve did not run the missed schedule"
            time.sleep(0.2)
        view = http("GET", f"{base}/v1/runs/{seen.last_session}")[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert seen.last_status == "answer" and view["result"]["answer"] == "Hello from serve."
    assert b"missed run" in stderr and b"schedule served: answer" in stderr
