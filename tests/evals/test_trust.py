"""Issue 43 item 2: a case made from a rated session never carries an approval the user gave for that run only; a
bad run's case replays only its read calls; an eval runs dangerous tools sandboxed or not at all. Real sessions,
real files, real `run_shell` commands through the CLI on the scripted model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.sandbox.policy import bwrap_status
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay

runner = CliRunner()


def recorded_run(tmp_path: Path, workspace: Path, marker: Path, verdict: str) -> str:
    """A run that ran `touch MARKER`, wrote report.md and read notes.md (approved with --allow, unsandboxed),
    rated `verdict`; the marker it made is removed again. Returns the session id."""
    (workspace / "notes.md").write_text("line one\n")
    script = [
        call("run_shell", command=f"touch {marker}"),
        call("write_file", path="report.md", content="# Report\n"),
        call("read_file", path="notes.md"),
        "Done.",
    ]
    replay = write_replay(tmp_path / f"{verdict}.jsonl", script)
    res = runner.invoke(
        app,
        ["run", "Tidy", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json", "--yes"]
        + ["--allow", "run_shell", "--sandbox", "off"],
    )
    assert res.exit_code == 0, res.stderr
    assert marker.exists(), res.stdout  # the recorded run did run the command, once, with the user's approval
    marker.unlink()
    session_id = json.loads(res.stdout)["session_id"]
    rated = runner.invoke(app, ["sessions", "rate", session_id, verdict, "--note", "it should not run that"])
    assert rated.exit_code == 0, rated.stderr
    return session_id


def export(tmp_path: Path, session_id: str) -> tuple[dict, str]:
    res = runner.invoke(app, ["sessions", "export", session_id, "--as-case", "--replay-dir", str(tmp_path / "rp")])
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout), res.stderr


@pytest.mark.parametrize("sandbox", ["off", "auto"])
def test_a_bad_runs_case_replays_only_its_reads(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    marker = tmp_path / "outside" / "shell-ran"
    marker.parent.mkdir()
    session_id = recorded_run(tmp_path, workspace, marker, "bad")
    case, _ = export(tmp_path, session_id)
    assert "approve" not in case
    assert case["deny"] == ["run_shell"]
    assert [c["name"] for c in case["deny_calls"]] == ["run_shell", "write_file"]
    monkeypatch.setenv("HERMES_LOCAL_SANDBOX", sandbox)
    suite = tmp_path / "suite"
    res = runner.invoke(
        app,
        ["eval", "--from-sessions", "--rated", "bad", "--suite-dir", str(suite)]
        + ["--model", f"replay:{suite / 'replay'}", "--out", str(tmp_path / "report.json")],
    )
    assert res.exit_code in (0, 1), res.output
    assert not marker.exists()  # the replay did not run the command the user rated bad
    report = json.loads((tmp_path / "report.json").read_text())
    run = report["cases"][0]["details"][0]
    assert [(c["name"], c["result"]["ok"]) for c in run["calls"]] == [
        ("run_shell", False),
        ("write_file", False),
        ("read_file", True),
    ]
    assert run["denied"] == [
        "step 1: run_shell denied (the run it came from was rated bad; its case replays only read calls)",
        "step 2: write_file denied (the run it came from was rated bad; its case replays only read calls)",
    ]
    assert report["summary"]["denied_calls"] == 2
    assert "run_shell denied" in res.stdout


def test_a_good_runs_case_carries_no_approval_and_an_eval_without_sandbox_refuses_dangerous_calls(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "outside" / "shell-ran"
    marker.parent.mkdir()
    session_id = recorded_run(tmp_path, workspace, marker, "good")
    case, warnings = export(tmp_path, session_id)
    assert "approve" not in case and "deny_calls" not in case
    assert 'add "approve": ["run_shell"] to replay it' in warnings
    case["approve"] = ["run_shell"]  # the user opts in by hand
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(case) + "\n")
    monkeypatch.setenv("HERMES_LOCAL_SANDBOX", "off")
    out = tmp_path / "report.json"
    res = runner.invoke(app, ["eval", str(cases), "--model", f"replay:{tmp_path / 'rp'}", "--out", str(out)])
    assert res.exit_code == 1, res.output  # the expected run_shell call did not run
    assert not marker.exists()
    run = json.loads(out.read_text())["cases"][0]["details"][0]
    assert run["denied"] == [
        "step 1: run_shell denied (dangerous, and no sandbox is in force (sandbox = off in the settings))"
    ]
    if not bwrap_status()[0]:
        pytest.skip("bwrap does not work here: the sandboxed half needs it")
    monkeypatch.setenv("HERMES_LOCAL_SANDBOX", "auto")
    res = runner.invoke(app, ["eval", str(cases), "--model", f"replay:{tmp_path / 'rp'}", "--out", str(out)])
    run = json.loads(out.read_text())["cases"][0]["details"][0]
    shell = next(c for c in run["calls"] if c["name"] == "run_shell")
    assert shell["result"]["approval"] == "policy" and run["denied"] == []
    assert not marker.exists()  # it ran, in the sandbox: the folder outside the eval's workspace is out of reach


def test_a_call_the_tool_itself_refused_is_said_so_not_named_by_its_approval() -> None:
    """The embedded model read /Users/JohnDoe/Documents/notes.txt: approved as a read, refused by the tool as a
    path outside the workspace; the eval's report said `read_file denied (read)`."""
    from hermes_local.evals.trust import EvalApprover, denial_lines
    from hermes_local.outcome import ToolOutcome, ToolResult
    from hermes_local.sandbox.policy import SandboxPolicy

    error = "path '/Users/x/notes.txt' is outside the workspace; only paths inside the workspace are allowed."
    outside = ToolResult.failure("permission_denied", error)
    refused = ToolOutcome(1, "read_file", {"path": "/Users/x/notes.txt"}, dataclasses.replace(outside, approval="read"))
    approver = EvalApprover(allow=[], deny=[], sandbox=SandboxPolicy(mode="off"))
    assert denial_lines([refused], approver) == [
        "step 1: read_file refused by the tool (path '/Users/x/notes.txt' is outside the workspace)"
    ]
