"""Issue 31 items 3-5 through the CLI, on the scripted model, real files and real sessions: `run --plan` and
`sessions apply`, the hand-off of a run that gave up, and the user's verdict (`sessions rate`, export, eval)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.events import Applied, Proposal, Rating, ToolFinished
from hermes_local.session import SessionLog, read_events, session_path, sessions_dir
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay

runner = CliRunner()
NOTES = "line one\nline two\n"
TIDY = [
    call("read_file", path="notes.md"),
    call("write_file", path="notes.md", content="line one\nline 2\n"),
    call("write_file", path="sub/report.md", content="# Report\nall tidy\n"),
    call("append_to_memo", content="tidied   notes"),
    call("run_shell", command="touch shell-ran.txt"),
    "Tidied notes.md and wrote sub/report.md.",
]


def tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` by relative path -> sha256 of its bytes (what a run left, byte for byte)."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run_task(
    tmp_path: Path, workspace: Path, script: list[str], *flags: str, task: str = "Tidy notes.md"
) -> tuple[int, dict, str]:
    replay = write_replay(tmp_path / f"r-{len(list(tmp_path.glob('r-*')))}.jsonl", script)
    res = runner.invoke(
        app, ["run", task, "--model", f"replay:{replay}", "--workspace", str(workspace), "--json", *flags]
    )
    return res.exit_code, json.loads(res.stdout) if res.stdout.startswith("{") else {}, res.stderr


def plan_run(tmp_path: Path, workspace: Path, script: list[str] = TIDY) -> str:
    code, out, err = run_task(tmp_path, workspace, script, "--plan")
    assert code == 0, err
    return out["session_id"]


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "notes.md").write_text(NOTES)
    return workspace


# -- plan-only runs and `sessions apply` -----------------------------------------------------------------
def test_a_plan_run_changes_nothing_shows_a_diff_and_takes_the_turns_of_a_normal_run(
    tmp_path: Path, notes: Path
) -> None:
    normal = tmp_path / "normal"
    normal.mkdir()
    (normal / "notes.md").write_text(NOTES)
    _, done, _ = run_task(tmp_path, normal, TIDY, "--yes")
    before = tree(notes)
    replay = write_replay(tmp_path / "plan.jsonl", TIDY)
    res = runner.invoke(
        app, ["run", "Tidy notes.md", "--plan", "--model", f"replay:{replay}", "--workspace", str(notes)]
    )
    assert res.exit_code == 0, res.stderr
    assert tree(notes) == before  # nothing was written, no command ran
    out = res.stdout
    assert "--- a/notes.md\n+++ b/notes.md" in out and "\n-line two\n+line 2\n" in out
    assert "--- /dev/null\n+++ b/sub/report.md" in out and "+all tidy" in out
    assert "+++ b/memo.md" in out and "+- tidied notes" in out
    assert '4. step 5: run_shell({"command": "touch shell-ran.txt"})' in out
    assert "apply these with: hermes-local sessions apply" in res.stderr
    # the same turns as the normal run: every proposed call got a tool result
    _, planned, _ = run_task(tmp_path, tmp_path / "normal", TIDY, "--plan")
    assert planned["steps"] == done["steps"] == 6 and len(planned["llm_calls"]) == len(done["llm_calls"])
    assert [p["name"] for p in planned["proposals"]] == ["write_file", "write_file", "append_to_memo", "run_shell"]
    events = read_events(session_path(planned["session_id"]))
    proposals = [e for e in events if isinstance(e, Proposal)]
    assert proposals[0].arguments == {"path": "notes.md", "content": "line one\nline 2\n"}
    results = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.approval for o in results] == ["read", "proposed", "proposed", "proposed", "proposed"]
    assert "recorded for review, not run" in results[1].data.lower()


def test_apply_from_another_folder_runs_exactly_the_proposals_once(
    tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    normal = tmp_path / "normal"
    normal.mkdir()
    (normal / "notes.md").write_text(NOTES)
    run_task(tmp_path, normal, TIDY, "--yes")  # run_shell is dangerous: --yes leaves it denied
    session_id = plan_run(tmp_path, notes)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = runner.invoke(app, ["sessions", "apply", session_id, "--yes"])
    assert res.exit_code == 1, res.stderr  # one proposal was not approved
    assert "✓ 1. write_file replaced notes.md" in res.stdout and "✗ 4. run_shell: not approved" in res.stdout
    assert "pass --allow run_shell" in res.stdout or "--trust-content" in res.stdout
    assert tree(notes) == tree(normal)  # byte for byte what the normal run left
    assert not (notes / "shell-ran.txt").exists() and list(elsewhere.iterdir()) == []
    again = runner.invoke(app, ["sessions", "apply", session_id, "--yes"])
    assert "(applied before)" in again.stdout and "memo.md" not in again.stdout.split("proposed (")[0]
    assert (notes / "memo.md").read_text() == "- tidied notes\n"  # never appended twice
    applied = [e for e in read_events(session_path(session_id)) if isinstance(e, Applied)]
    assert [(e.index, e.outcome is not None) for e in applied[:8]] == [
        (1, False),
        (1, True),
        (2, False),
        (2, True),
        (3, False),
        (3, True),
        (4, False),
        (4, True),
    ]
    assert [e.index for e in applied[8:]] == [4, 4]  # the second apply only retried the denied one


def test_a_proposal_cut_off_by_a_crash_is_not_run_again_by_itself(tmp_path: Path, notes: Path) -> None:
    session_id = plan_run(tmp_path, notes, [call("write_file", path="notes.md", content="new\n"), "Done."])
    with SessionLog(session_id) as log:
        log.log(Applied(1))  # an apply killed while it wrote
    res = runner.invoke(app, ["sessions", "apply", session_id, "--yes"])
    assert res.exit_code == 1 and "outcome is unknown" in res.stderr
    assert (notes / "notes.md").read_text() == NOTES


def test_apply_refuses_a_session_that_was_no_plan(tmp_path: Path, notes: Path) -> None:
    _, out, _ = run_task(tmp_path, notes, ["Hello."], task="Say hello")
    res = runner.invoke(app, ["sessions", "apply", out["session_id"]])
    assert res.exit_code == 2 and "is not a plan-only run" in res.stderr and "Traceback" not in res.output


def test_proposed_text_is_shown_terminal_safe(tmp_path: Path, notes: Path) -> None:
    hostile = "ok\x1b[2J\x1b]0;pwned\x07\n"
    session_id = plan_run(
        tmp_path,
        notes,
        [call("write_file", path="notes.md", content=hostile), call("run_shell", command="echo \x1b[31mred"), "Done."],
    )
    res = runner.invoke(app, ["sessions", "apply", session_id])  # nobody to ask: both denied, nothing run
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and (notes / "notes.md").read_text() == NOTES


# -- hand-off ----------------------------------------------------------------------------------------------
def test_a_run_at_the_step_limit_hands_off_with_what_was_done_failed_and_left(tmp_path: Path, notes: Path) -> None:
    plan = "<plan>current: read the notes todo: write summary.md from them</plan>"
    script = [call("read_file", path="notes.md"), plan + call("read_file", path="missing.md"), "Still working."]
    replay = write_replay(tmp_path / "r.jsonl", script)
    args = ["run", "Summarise notes.md", "--model", f"replay:{replay}", "--workspace", str(notes), "--max-steps", "2"]
    res = runner.invoke(app, args)
    assert res.exit_code == 3
    session_id = sorted(p.stem for p in sessions_dir().glob("*.jsonl"))[-1]
    lines = [line for line in res.stderr.splitlines() if line.startswith(("hand-off", "  "))]
    text = "\n".join(lines)
    assert "hand-off: the run stopped: the task took more steps than allowed (--max-steps 2)" in text
    assert "  done: step 1: read_file notes.md ok" in text
    assert "  failed: step 2: read_file missing.md → failed (not_found)" in text
    assert "  left: write summary.md from them" in text
    assert f'take it from here with: hermes-local run --continue {session_id} "' in text
    code, out, _ = run_task(tmp_path, notes, script, "--max-steps", "2")
    assert code == 3 and out["handoff"]["left"] == "write summary.md from them"
    assert out["handoff"]["continue"].startswith(f"hermes-local run --continue {out['session_id']} ")
    _, answered, _ = run_task(tmp_path, notes, ["Hello."], task="Say hello")
    assert answered["handoff"] is None


# -- the user's verdict ------------------------------------------------------------------------------------
def test_rating_export_and_a_suite_of_bad_runs(tmp_path: Path, notes: Path) -> None:
    script = [
        call("read_file", path="notes.md"),
        call("write_file", path="report.md", content="# Notes\nline one\n"),
        "Wrote report.md.",
    ]
    _, out, _ = run_task(tmp_path, notes, script, "--yes")
    session_id = out["session_id"]
    res = runner.invoke(app, ["sessions", "rate", session_id, "bad", "--note", "it dropped   line two"])
    assert res.exit_code == 0, res.stderr
    assert [(e.verdict, e.note) for e in read_events(session_path(session_id)) if isinstance(e, Rating)] == [
        ("bad", "it dropped line two")
    ]
    case = json.loads(
        runner.invoke(app, ["sessions", "export", session_id, "--as-case", "--replay-dir", str(tmp_path / "rp")]).stdout
    )
    assert case["origin"] == {
        "session": session_id,
        "verdict": "bad",
        "note": "it dropped line two",
        "undone": False,
        "changed_by_user": [],
    }
    assert case["checks"]["tool_calls"] == [{"name": "read_file", "arguments": {"path": "notes.md"}}]
    (notes / "report.md").write_text("# Notes\nline one\nline two\n")  # the user fixes the result
    case = json.loads(
        runner.invoke(app, ["sessions", "export", session_id, "--as-case", "--replay-dir", str(tmp_path / "rp")]).stdout
    )
    assert case["origin"]["changed_by_user"] == ["report.md"]
    assert case["checks"]["files"] == [{"path": "report.md", "contains": ["line two"]}]
    _, good, _ = run_task(tmp_path, notes, ["Hello."], task="Say hello")
    assert runner.invoke(app, ["sessions", "rate", good["session_id"], "good"]).exit_code == 0
    suite = tmp_path / "suite"
    res = runner.invoke(
        app,
        [
            "eval",
            "--from-sessions",
            "--rated",
            "bad",
            "--suite-dir",
            str(suite),
            "--model",
            f"replay:{suite / 'replay'}",
            "--out",
            str(tmp_path / "report.json"),
        ],
    )
    assert res.exit_code == 1, res.output  # the recorded run lacks the user's fix
    assert "0/1 cases passed (pass^1: 0%)" in res.stdout and "report.md was not created" in res.stdout
    assert "write_file denied (the run it came from was rated bad" in res.stdout  # its recorded write is not replayed
    cases = [json.loads(line) for line in (suite / "cases.jsonl").read_text().splitlines()]
    assert [c["origin"]["session"] for c in cases] == [session_id]
    res = runner.invoke(
        app,
        [
            "eval",
            "--from-sessions",
            "--rated",
            "good",
            "--suite-dir",
            str(tmp_path / "g"),
            "--model",
            f"replay:{tmp_path / 'g' / 'replay'}",
            "--repeat",
            "2",
        ],
    )
    assert res.exit_code == 0 and "1/1 cases passed (pass^2: 100%)" in res.stdout, res.output
    undo = runner.invoke(app, ["sessions", "undo", session_id, "--force"])  # over the user's own edit
    assert undo.exit_code == 0, undo.stdout + undo.stderr
    case = json.loads(
        runner.invoke(app, ["sessions", "export", session_id, "--as-case", "--replay-dir", str(tmp_path / "rp")]).stdout
    )
    assert case["origin"]["undone"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sessions", "rate", "SID", "meh"], "rate a run good or bad"),
        (["sessions", "rate", "no-such-session", "bad"], "no session 'no-such-session'"),
        (["eval", "--from-sessions", "--rated", "bad"], "no session is rated bad"),
        (["eval", "--from-sessions"], "give --rated good or --rated bad"),
    ],
)
def test_verdict_mistakes_are_one_line_exit_2(tmp_path: Path, notes: Path, args: list[str], message: str) -> None:
    _, out, _ = run_task(tmp_path, notes, ["Hello."], task="Say hello")
    res = runner.invoke(app, [a.replace("SID", out["session_id"]) for a in args])
    assert res.exit_code == 2 and message in res.stderr, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output


@pytest.mark.real_model
def test_a_plan_run_on_the_embedded_model_writes_nothing_until_applied(workspace: Path) -> None:
    task = "What time is it? Note it in my memo."
    res = runner.invoke(
        app, ["run", task, "--plan", "--json", "--workspace", str(workspace), "--max-steps", "3", "--n-ctx", "2048"]
    )
    out = json.loads(res.stdout)
    assert list(workspace.iterdir()) == [], res.stderr  # whatever the model chose, nothing was written
    proposed = [c for c in out["tool_calls"] if c["name"] == "append_to_memo" and c["ok"]]
    memo_proposals = [p["arguments"] for p in out["proposals"] if p["name"] == "append_to_memo"]
    assert memo_proposals == [c["arguments"] for c in proposed]
    if proposed:
        applied = runner.invoke(app, ["sessions", "apply", out["session_id"], "--yes"])
        assert applied.exit_code == 0, applied.output
        assert (workspace / "memo.md").read_text().count("\n") == len(proposed)
