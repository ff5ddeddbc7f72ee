"""`hermes-local sessions diff|undo` and `checkpoints info|clear` on a real `run` (replay model, real files).

The run goes through the CLI (so its session is checkpointed as users get it); diff and undo run from
another folder, find the workspace from the session, print terminal-safe text and exit 1 when a path was
refused, 2 on a user mistake.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import tool_call_text, write_replay

runner = CliRunner()


def cli_run(tmp_path: Path, workspace: Path, outputs: list[str]) -> str:
    replay = write_replay(tmp_path / "r.jsonl", outputs)
    args = ["run", "go", "--model", f"replay:{replay}", "--workspace", str(workspace), "--allow", "write_file"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.stderr
    return str(json.loads(res.stdout)["session_id"])


def test_diff_and_undo_from_another_folder(tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / "a.txt").write_text("before\n")
    session = cli_run(
        tmp_path, workspace,
        [tool_call_text("write_file", path="a.txt", content="after \x1b[31mred\n"),
         tool_call_text("write_file", path="new.txt", content="new\n"), "Done."],
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    diff = runner.invoke(app, ["sessions", "diff", session])
    assert diff.exit_code == 0 and "-before\n+after \\x1b[31mred\n" in diff.stdout  # escaped, never raw
    assert "+++ b/new.txt" in runner.invoke(app, ["sessions", "diff", session, "--step", "2"]).stdout
    (workspace / "new.txt").write_text("the user's\n")
    undo = runner.invoke(app, ["sessions", "undo", session])
    assert undo.exit_code == 1 and "refused  new.txt: changed since the run" in undo.stderr
    assert (workspace / "a.txt").read_text() == "before\n" and (workspace / "new.txt").read_text() == "the user's\n"
    forced = runner.invoke(app, ["sessions", "undo", session, "--force"])
    assert forced.exit_code == 0 and "removed  new.txt" in forced.stdout and not (workspace / "new.txt").exists()
    info = runner.invoke(app, ["checkpoints", "info"])
    assert info.exit_code == 0 and "1 session(s)" in info.stdout
    assert runner.invoke(app, ["checkpoints", "clear"]).exit_code == 0
    gone = runner.invoke(app, ["sessions", "undo", session])
    assert gone.exit_code == 2 and "has no checkpoints" in gone.stderr and "Traceback" not in gone.stderr
    bad = runner.invoke(app, ["sessions", "diff", "../etc"])
    assert bad.exit_code == 2 and "is not a session ID" in bad.stderr


def test_a_run_that_changed_nothing_has_an_empty_diff(tmp_path: Path, workspace: Path) -> None:
    session = cli_run(tmp_path, workspace, [tool_call_text("get_current_time"), "It is noon."])
    res = runner.invoke(app, ["sessions", "diff", session])
    assert res.exit_code == 0 and res.stdout == "" and "no changes" in res.stderr
    nothing = runner.invoke(app, ["sessions", "undo", session])
    assert nothing.exit_code == 2 and "has no checkpoints" in nothing.stderr


def test_sessions_apply_is_checkpointed_and_undone(tmp_path: Path, workspace: Path) -> None:
    from tests.cli.test_review import NOTES, plan_run, tree

    (workspace / "notes.md").write_text(NOTES)
    before = tree(workspace)
    session = plan_run(tmp_path, workspace)
    applied = runner.invoke(app, ["sessions", "apply", session, "--yes"])  # run_shell stays denied: exit 1
    assert "✓ 1. write_file replaced notes.md" in applied.stdout and tree(workspace) != before
    diff = runner.invoke(app, ["sessions", "diff", session])
    assert "-line two\n+line 2\n" in diff.stdout and "+++ b/sub/report.md" in diff.stdout
    undo = runner.invoke(app, ["sessions", "undo", session])
    assert undo.exit_code == 0, undo.stderr
    assert tree(workspace) == before and not (workspace / "sub").exists()
