"""Started-but-unknown is a state (issue 26 item 6): a write that timed out, or that a kill cut off, is never re-run
by a resume on its own.

Real processes: `python -m hermes_local run` with a `--tools-module` whose write tool appends to a marker file and then
outlives its time limit (or the run), killed with SIGKILL; then `run --resume` with no terminal must stop with one
line naming the call and leave the marker written once. The executor asks a person when there is one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import tool_call_text, write_replay
from hermes_local.session import read_records, sessions_dir

TOOLS = textwrap.dedent(
    '''
    import time
    from hermes_local.tools import ToolContext, tool

    @tool(permission="write", timeout=1)
    def send_invoice(number: str, ctx: ToolContext) -> str:
        """Send an invoice (marks it sent, then hangs past its time limit)."""
        with open(ctx.workspace / "sent.txt", "a") as fh:
            fh.write(number + "\\n")
        time.sleep(5)
        return "sent"

    @tool(permission="write", timeout=120)
    def slow_invoice(number: str, ctx: ToolContext) -> str:
        """Send an invoice slowly (marks it sent, then works for a minute)."""
        with open(ctx.workspace / "sent.txt", "a") as fh:
            fh.write(number + "\\n")
        time.sleep(60)
        return "sent"

    @tool(timeout=120)
    def wait_long(seconds: float) -> str:
        """Wait a while (read)."""
        time.sleep(seconds)
        return "waited"
    '''
)


def start_and_kill(tmp_path: Path, workspace: Path, replies: list[str], killed_when: str) -> str:
    """Run the agent in a child process, SIGKILL it once `killed_when` (a tool name) has started; the session id."""
    tools = tmp_path / "invoice_tools.py"
    tools.write_text(TOOLS)
    replay = write_replay(tmp_path / "first.jsonl", replies)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [sys.executable, "-m", "hermes_local", "run", "--tools-module", str(tools), "--workspace", str(workspace)]
    cmd += ["--allow", "send_invoice", "--allow", "slow_invoice", "--model", f"replay:{replay}", "Send invoice 7"]
    child = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            logs = list(sessions_dir().glob("*.jsonl")) if sessions_dir().exists() else []
            started = [r for p in logs for r in read_records(p) if r.get("kind") == "tool_call"]
            if any(r["name"] == killed_when for r in started) and (workspace / "sent.txt").exists():
                break
            assert child.poll() is None, child.communicate()
            time.sleep(0.1)
        else:
            raise AssertionError("the run never started its call")
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
    return logs[0].stem


def resume(tmp_path: Path, workspace: Path, session_id: str, replies: list[str]) -> object:
    replay = write_replay(tmp_path / "again.jsonl", replies)
    args = ["run", "--resume", session_id, "--tools-module", str(tmp_path / "invoice_tools.py")]
    args += ["--workspace", str(workspace), "--allow", "send_invoice", "--allow", "slow_invoice"]
    args += ["--model", f"replay:{replay}"]
    return CliRunner().invoke(app, args)


def test_a_timed_out_write_is_not_sent_again_after_kill_and_resume(tmp_path: Path, workspace: Path) -> None:
    first = [tool_call_text("send_invoice", number="7"), tool_call_text("wait_long", seconds=60), "Done."]
    session_id = start_and_kill(tmp_path, workspace, first, killed_when="wait_long")
    records = read_records(sessions_dir() / f"{session_id}.jsonl")
    timed_out = next(r for r in records if r["kind"] == "tool_result" and r["name"] == "send_invoice")
    assert timed_out["summary"].startswith("started, outcome unknown")  # logged as such

    result = resume(tmp_path, workspace, session_id, [tool_call_text("send_invoice", number="7"), "Done."])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "send_invoice" in lines[0] and "outcome is unknown" in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert (workspace / "sent.txt").read_text() == "7\n"  # sent once


def test_a_write_cut_off_by_a_kill_is_not_run_again_and_the_model_is_told(tmp_path: Path, workspace: Path) -> None:
    first = [tool_call_text("slow_invoice", number="8"), "Done."]
    session_id = start_and_kill(tmp_path, workspace, first, killed_when="slow_invoice")
    result = resume(tmp_path, workspace, session_id, [tool_call_text("slow_invoice", number="8"), "Done."])
    assert result.exit_code == 1, result.output
    assert "slow_invoice" in result.stderr and "outcome is unknown" in result.stderr
    assert (workspace / "sent.txt").read_text() == "8\n"
    records = read_records(sessions_dir() / f"{session_id}.jsonl")
    told = [r for r in records if r["kind"] == "turn" and "outcome unknown" in json.dumps(r)]
    assert told, "the resumed run's tool turn must tell the model the outcome is unknown"


def test_on_a_terminal_the_person_is_asked_and_no_means_not_run(tmp_path: Path, workspace: Path) -> None:
    from hermes_local.outcome import arguments_digest
    from hermes_local.tools import Approver, Executor, ToolContext, ToolRegistry
    from hermes_local.tools.execution import UNKNOWN_NOTE
    from hermes_local.tools.modules import load_tools_module

    (tmp_path / "invoice_tools.py").write_text(TOOLS)
    registry = ToolRegistry(load_tools_module(str(tmp_path / "invoice_tools.py")))
    asked: list[str] = []
    approver = Approver(allow=["slow_invoice"], ask=lambda request: asked.append(request.note) or "n")
    ex = Executor(registry, ToolContext(workspace=workspace), approver)
    ex.remember_unknown(arguments_digest("slow_invoice", {"number": "9"}))
    result = ex.execute("slow_invoice", {"number": "9"})
    assert not result.ok and result.error_kind == "permission_denied" and "outcome is unknown" in (result.error or "")
    assert asked == [UNKNOWN_NOTE]  # asked even though --allow covers the tool
    assert not (workspace / "sent.txt").exists()
