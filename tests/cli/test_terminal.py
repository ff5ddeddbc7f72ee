"""What a person at a terminal sees (issue 27.5, 27.6): the thought dimmed (hidden with --quiet), no raw call
or plan markup streamed as if it were the answer, the parsed call once, the answer once."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.calls.thoughts import ReplyStream
from hermes_local.cli.app import app
from hermes_local.cli.terminal import DIM, NORMAL, TerminalPrinter
from hermes_local.events import LLMCall, Reasoning, RehearsedCall, StepStart, Token
from hermes_local.testing import write_replay

SAMPLE = Path(__file__).parents[1] / "data" / "hermes2pro_thought_sample.txt"
TASK = "What time is it?"  # (with "Note it in my memo." an answer without the memo write is unverified, exit 6)
STEP_1 = (
    "<think>I need the clock first.</think>\n<plan>current: read the clock; todo: answer</plan>\n"
    '<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>'
)
ANSWER = "It is noon, and that is all I found."


def on_a_terminal(args: list[str], cwd: Path) -> str:
    """Run `python -m hermes_local ARGS` with stdout and stderr on one pseudo-terminal; what it showed."""
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_local", *args], stdin=subprocess.DEVNULL, stdout=child, stderr=child,
        cwd=cwd, env=env,
    )  # fmt: skip
    os.close(child)
    out, deadline = b"", time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(main)
    assert proc.returncode == 0, (proc.returncode, out.decode(errors="replace"))
    return out.decode("utf-8", errors="replace").replace("\r\n", "\n")


def test_a_terminal_shows_the_call_once_and_the_answer_once(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [STEP_1, ANSWER])
    # --no-answer-guard: step 1 free (not forced to a call), so the recorded reply may open with a thought
    args = ["run", TASK, "--model", f"replay:{replay}", "--workspace", str(workspace), "--no-answer-guard"]
    shown = on_a_terminal(args, tmp_path)
    assert shown.count("It is noon,") == 1, shown  # today: streamed on stderr, then printed again on stdout
    assert shown.count("→ get_current_time({})") == 1
    for markup in ("<tool_call>", '"name": "get_current_time"', "<plan>", "</plan>", "<think>"):
        assert markup not in shown, shown
    assert f"{DIM}I " in shown and "I need the clock first." in shown.replace(DIM, "").replace(NORMAL, "")  # dimmed
    quiet = on_a_terminal([*args, "-q"], tmp_path)
    assert "I need the clock first" not in quiet and quiet.count("It is noon,") == 1


def test_piped_stdout_still_gets_the_answer_and_json_the_reasoning(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [SAMPLE.read_text(), ANSWER])
    args = ["run", TASK, "--model", f"replay:{replay}", "--workspace", str(workspace), "--no-answer-guard"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and res.stdout.strip() == ANSWER
    assert "(not run: append_to_memo(" in res.stderr  # the rehearsed call, said once
    res = CliRunner().invoke(app, [*args, "--json"])
    out = json.loads(res.stdout)
    assert [c["name"] for c in out["tool_calls"]] == ["get_current_time"]  # no invalid_tool_call from [/TOOL_CALLS]
    assert out["rehearsed_calls"] == [
        {"step": 1, "name": "append_to_memo", "arguments": {"content": "The time is <time>"}}
    ]
    assert "I should get the time first" in out["reasoning"][0]["text"]
    assert not (workspace / "memo.md").exists()


def test_the_printer_splits_pieces_cut_anywhere() -> None:
    """Markers cut across streamed pieces are still recognised; markup is held back, never half-shown."""
    text = STEP_1 + "\nThen [TOOL_CALLS][{}][/TOOL_CALLS] the end."
    for size in (1, 2, 3, 7):
        stream = ReplyStream()
        parts = [p for i in range(0, len(text), size) for p in stream.feed(text[i : i + size])]
        thought = "".join(t for c, t in parts if c == "thought")
        prose = "".join(t for c, t in parts if c == "text")
        assert thought == "I need the clock first." and " ".join(prose.split()) == "Then the end."


def test_printer_without_streaming_shows_the_thought_line_and_quiet_hides_it() -> None:
    lines = io.StringIO()
    printer = TerminalPrinter(stream_tokens=False, stream=lines)
    for event in (
        StepStart(1),
        Token("x"),
        Reasoning(1, "Think first."),
        RehearsedCall(1, "write_file", {"path": "a"}),
    ):
        printer(event)
    assert lines.getvalue() == (
        "── step 1\n   thought: Think first.\n"
        '   (not run: write_file({"path": "a"}) was only written inside the thought)\n'
    )
    quiet = io.StringIO()
    printer = TerminalPrinter(stream_tokens=True, stream=quiet, show_thoughts=False)
    for event in (StepStart(1), Token("<think>Hidden</think>Visible"), LLMCall(1, 1, 1, 1, 1, 0.0)):
        printer(event)
    assert "Hidden" not in quiet.getvalue() and quiet.getvalue().startswith("── step 1\nVisible\n")
    assert printer.showed("Visible") and not printer.showed("Other")
