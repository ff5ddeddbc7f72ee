"""Sessions: append-only logs, `sessions show`, torn lines, and resume after a real kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.session import list_sessions, read_records, sessions_dir
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay

runner = CliRunner()
SLOW_TOOLS = '''
import time
from pathlib import Path
from hermes_local.tools import ToolContext, tool

@tool(permission="write")
def slow_write(filename: str, ctx: ToolContext) -> str:
    """Write a file slowly.

    Args:
        filename: File name.
    """
    (ctx.workspace / "started.flag").write_text("started")
    time.sleep(60)
    (ctx.workspace / filename).write_text("finished")
    return "written"
'''


def test_kill_9_mid_step_then_resume_runs_each_effect_once(tmp_path: Path, workspace: Path) -> None:
    tools = tmp_path / "slow_tools.py"
    tools.write_text(SLOW_TOOLS)
    first = write_replay(
        tmp_path / "first.jsonl", [call("append_to_memo", content="A"), call("slow_write", filename="out.txt")]
    )
    cmd = [
        sys.executable,
        "-m",
        "hermes_local",
        "run",
        "Note A, then write out.txt",
        "--json",
        "--workspace",
        str(workspace),
        "--tools-module",
        str(tools),
        "--allow",
        "slow_write",
    ]
    proc = subprocess.Popen(
        [*cmd, "--model", f"replay:{first}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 60
    while not (workspace / "started.flag").exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the slow tool never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert (workspace / "memo.md").read_text() == "- A\n"
    (session,) = list_sessions()
    assert session.stopped is None  # killed: no run_end

    # The resumed model tries to redo A (deduplicated), notes B, and answers.
    second = write_replay(
        tmp_path / "second.jsonl",
        [call("append_to_memo", content="A"), call("append_to_memo", content="B"), "Done after the crash."],
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_local",
            "run",
            "--resume",
            session.id,
            "--json",
            "--model",
            f"replay:{second}",
            "--workspace",
            str(workspace),
            "--tools-module",
            str(tools),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    out = json.loads(res.stdout)
    assert out["stopped"] == "answer" and out["answer"] == "Done after the crash."
    # out.txt was never written (its call was cut off and not re-run): "Done" is not claimed as done
    assert res.returncode == 6 and out["outcome"] == "unverified", res.stderr
    assert out["evidence"].startswith("the goal names out.txt and no tool call used it")
    assert (workspace / "memo.md").read_text() == "- A\n- B\n"
    assert not (workspace / "out.txt").exists()  # the in-flight call was not silently re-run
    events = read_records(sessions_dir() / f"{session.id}.jsonl")
    tool_turns = [e for e in events if e["kind"] == "turn" and e["role"] == "tool"]
    interrupted = [r for t in tool_turns for r in (t["responses"] or []) if r["name"] == "slow_write"]
    assert interrupted and "interrupted" in interrupted[0]["content"]["error"]
    first_step = [e for e in events if e["kind"] == "step_start"]
    assert [e["step"] for e in first_step] == [1, 2, 3, 4, 5]
    repeated = [e for e in events if e["kind"] == "tool_result" and e["step"] == 3]
    assert "already done" in repeated[0]["summary"]


def test_torn_last_line_is_skipped_with_a_warning(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [call("get_current_time"), "ok"])
    res = runner.invoke(app, ["run", "t", "--json", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    session_id = json.loads(res.stdout)["session_id"]
    path = sessions_dir() / f"{session_id}.jsonl"
    with open(path, "a") as fh:
        fh.write('{"kind": "tool_call", "step": 9, "na')
    skipped: list[str] = []
    events = read_records(path, on_skip=skipped.append)
    assert events[-1]["kind"] == "run_end"
    assert len(skipped) == 1 and "skipped corrupt line" in skipped[0]
    shown = runner.invoke(app, ["sessions", "show", session_id])
    assert shown.exit_code == 0 and "get_current_time" in shown.stdout and "stopped: answer" in shown.stdout
    assert "skipped corrupt line" in shown.stderr  # the CLI prints the warning


def test_resume_unknown_session_is_one_line(workspace: Path) -> None:
    res = runner.invoke(app, ["run", "--resume", "nope", "--workspace", str(workspace)])
    assert res.exit_code == 2 and "no session 'nope'" in res.stderr
    res = runner.invoke(app, ["run", "--workspace", str(workspace)])
    assert res.exit_code == 2 and "give a TASK" in res.stderr


def test_memory_list_and_forget(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [call("remember", fact="Prefers CSV exports"), "ok"])
    runner.invoke(app, ["run", "t", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    listed = runner.invoke(app, ["memory", "list"])
    assert "Prefers CSV exports" in listed.stdout
    fact_id = listed.stdout.split()[0]
    assert runner.invoke(app, ["memory", "forget", fact_id]).exit_code == 0
    assert "Prefers CSV" not in runner.invoke(app, ["memory", "list"]).stdout
    assert runner.invoke(app, ["memory", "forget", "999"]).exit_code == 2


def test_chat_keeps_history_and_resets(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["Hi Ann.", "Your name is Ann.", "Hello."])
    res = runner.invoke(
        app,
        ["chat", "--model", f"replay:{replay}", "--workspace", str(workspace)],
        input="I am Ann\nWhat is my name?\n/reset\nhello\n/exit\n",
    )
    assert res.exit_code == 0, res.stderr
    assert res.stdout.splitlines() == ["Hi Ann.", "Your name is Ann.", "Hello."]
    events = read_records(next(sessions_dir().glob("*.jsonl")))
    assert len([e for e in events if e["kind"] == "run_end"]) == 3
    starts = [e for e in events if e["kind"] == "run_start"]  # the first message, and the one after /reset
    assert [(e["goal"], e["dialect"]) for e in starts] == [("I am Ann", "hermes"), ("hello", "hermes")]
