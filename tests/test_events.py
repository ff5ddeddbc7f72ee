"""Typed run events and the session log: round trips, hostile strings, ids, locks, ended sessions, disk full."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.errors import UserError
from hermes_local.events import (
    LOGGED_ARGUMENT_CHARS,
    AssistantText,
    LLMCall,
    RunEnd,
    RunStart,
    StepStart,
    Token,
    ToolCallStarted,
    ToolFinished,
    ToolOutcome,
    Unknown,
    event_from_dict,
)
from hermes_local.outcome import ToolResult
from hermes_local.session import (
    SessionLog,
    describe_event,
    events_to_resume,
    list_sessions,
    read_events,
    sessions_dir,
)
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay

runner = CliRunner()
HOSTILE = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei\ud800j\udfffk\x1b[31m\u202el\n"


def test_every_event_round_trips_through_a_dict() -> None:
    outcome = ToolOutcome(2, "read_file", {"path": "a.txt"}, ToolResult(True, "read it", "text", approval="read"))
    for event in [
        RunStart("goal", ["fact"]),
        StepStart(3),
        LLMCall(1, 10, 4, 4, 5, 0.5, 0.1, "length"),
        AssistantText(1, "hi", final=True),
        ToolCallStarted(1, "read_file", {"path": "x"}),
        ToolFinished(outcome),
        RunEnd({"answer": "x", "stopped": "answer", "steps": 1}),
    ]:
        again = event_from_dict(json.loads(json.dumps(event.to_dict())))
        assert again == event, event


def test_unknown_kinds_are_kept_and_malformed_known_kinds_are_refused() -> None:
    assert isinstance(event_from_dict({"kind": "from_the_future", "x": 1}), Unknown)
    with pytest.raises(ValueError):
        event_from_dict({"kind": "step_start", "step": "three"})
    with pytest.raises(ValueError):
        event_from_dict({"kind": "tool_result", "step": 1})  # no name


def test_log_round_trips_line_separators_and_lone_surrogates(tmp_path: Path) -> None:
    log = SessionLog()
    log.log(RunStart(HOSTILE))
    log.log(AssistantText(1, HOSTILE))
    log.log(ToolFinished(ToolOutcome(1, "write_file", {"content": HOSTILE}, ToolResult(True, HOSTILE, HOSTILE))))
    log.log(Token("never logged"))
    log.close()
    raw = log.path.read_bytes()
    assert raw.isascii() and raw.count(b"\n") == 3
    events = read_events(log.path)
    assert [type(e) for e in events] == [RunStart, AssistantText, ToolFinished]
    assert events[0].goal == HOSTILE and events[1].text == HOSTILE
    assert events[2].outcome.arguments["content"] == HOSTILE and events[2].outcome.data == HOSTILE


def test_described_events_never_carry_terminal_controls() -> None:
    lines = [
        describe_event(RunStart(HOSTILE)),
        describe_event(ToolCallStarted(1, "x\x1b]0;t\x07", {"a": HOSTILE})),
        describe_event(ToolFinished(ToolOutcome(1, "x", {}, ToolResult(False, HOSTILE)))),
        describe_event(RunEnd({"stopped": "answer", "answer": HOSTILE})),
    ]
    for line in lines:
        assert line is not None
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029\u202e" for c in line), line


def test_big_arguments_are_logged_once_not_five_times(workspace: Path) -> None:
    big = "x" * 2_000_000
    replay = write_replay(workspace.parent / "r.jsonl", [call("write_file", path="big.txt", content=big), "done"])
    res = runner.invoke(app, ["run", "w", "--model", f"replay:{replay}", "--workspace", str(workspace), "--yes"])
    assert res.exit_code == 0, res.output
    log = next(sessions_dir().glob("*.jsonl"))
    assert (workspace / "big.txt").stat().st_size == len(big)
    assert log.stat().st_size < 2 * len(big) + 100_000  # the assistant text once (+ its turn), not 5 copies
    assert LOGGED_ARGUMENT_CHARS < 10_000


def test_session_id_is_a_name_never_a_path(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "x.jsonl"
    outside.write_text('{"kind": "run_start", "goal": "g"}\n')
    for bad in ["../../x", "/etc/passwd", "..", "a/b", ".hidden", "x\x1b[2J"]:
        res = runner.invoke(app, ["run", "--resume", bad, "--workspace", str(workspace)])
        assert res.exit_code == 2 and "not a session ID" in res.output, (bad, res.output)
        assert "\x1b" not in res.output
    assert outside.read_text() == '{"kind": "run_start", "goal": "g"}\n'


def test_two_processes_cannot_append_to_one_session() -> None:
    first = SessionLog()
    with pytest.raises(UserError, match="in use"):
        SessionLog(first.id)
    first.close()
    SessionLog(first.id).close()


def test_resuming_an_ended_session_says_so(workspace: Path) -> None:
    replay = write_replay(workspace.parent / "r.jsonl", ["All done."])
    assert runner.invoke(app, ["run", "t", "--model", f"replay:{replay}", "--workspace", str(workspace)]).exit_code == 0
    session_id = list_sessions()[0].id
    res = runner.invoke(
        app, ["run", "--resume", session_id, "--model", f"replay:{replay}", "--workspace", str(workspace)]
    )
    assert res.exit_code == 2 and "already ended" in res.output


def test_tampered_logs_give_one_line_and_do_not_break_the_listing(workspace: Path) -> None:
    folder = sessions_dir()
    folder.mkdir(parents=True)
    (folder / "bad.jsonl").write_bytes(b'{"kind": "run_start", "goal": 5}\n\xff\xfe[1,2]\n{"kind": "turn"}\n')
    (folder / "good.jsonl").write_text('{"kind": "run_start", "goal": "ok"}\n')
    assert [s.id for s in list_sessions()] == ["bad", "good"]
    with pytest.raises(UserError, match="no recorded start"):
        events_to_resume("bad")
    res = runner.invoke(app, ["sessions", "show", "bad"])
    assert res.exit_code == 0 and "Traceback" not in res.output


_DISK_FULL = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from hermes_local.errors import UserError
from hermes_local.events import AssistantText
from hermes_local.session import SessionLog
log = SessionLog("full")
log.log(AssistantText(1, "small"))
size = log.path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 50, size + 50))
try:
    log.log(AssistantText(2, "y" * 500))
except UserError as exc:
    print("stopped:", exc)
"""


def test_disk_full_leaves_no_torn_line_and_the_next_append_starts_fresh() -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", _DISK_FULL], capture_output=True, text=True, env=env, timeout=60)
    assert "stopped:" in out.stdout and "--resume full" in out.stdout, out.stdout + out.stderr
    path = sessions_dir() / "full.jsonl"
    assert path.read_bytes().endswith(b"\n") and len(read_events(path)) == 1
    with path.open("ab") as fh:  # a torn tail written by something else
        fh.write(b'{"kind": "assist')
    with SessionLog("full") as log:
        log.log(AssistantText(3, "after"))
    events = read_events(path)
    assert [e.step for e in events if isinstance(e, AssistantText)] == [1, 3]


def test_task_shortcut_runs_without_the_run_word(workspace: Path) -> None:
    replay = write_replay(workspace.parent / "r.jsonl", ["It is noon."])
    res = runner.invoke(app, ["Say it is noon.", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 0 and "It is noon." in res.output
