"""The README's command lines run as written (issue 29.1): each `hermes-local ...` line of its Commands block, and
the eval README's, is split as a shell would split it and run through the CLI in a folder that holds what the line
names (`notes.txt` in `~/work`, `shop.sqlite`, `rules.txt`, `my_tools.py`, ...).

Only the README's placeholders are filled: TASK (a task), ID (a recorded session, a killed one for `--resume`, a
remembered fact for `memory show|forget`) and NAME (the configured MCP server, a model of the loopback stand-in hub).
A line without `--model` runs the model `HERMES_LOCAL_MODEL` names: a replay of the replies each case scripts, or
the embedded model for the few lines that need a real GGUF (marked real_model). `tests/test_readme.py` checks
that every line of the README's code blocks is run here or named with the test that exercises it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from hermes_local.cli.app import app
from hermes_local.session import SessionLog, list_sessions, read_records
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay
from tests.models.test_download import online, start_hub  # noqa: F401 - `online` is a fixture, asked for by name
from tests.tools.mcp.test_mcp import TIME_SERVER, write_config

ROOT = Path(__file__).resolve().parents[2]
TASK = "What time is it?"
TIMED = [call("get_current_time"), "It is ten."]
runner = CliRunner()


@dataclass
class Case:
    """How one README line is run: the replies of the replay model, what it must show and do."""

    replies: list[str] = field(default_factory=lambda: list(TIMED))
    exit: int = 0
    shows: str = ""  # in stdout or stderr
    stdin: str | None = None
    check: Callable[[Path, Result], None] | None = None  # (the folder the line runs in, the result of its last part)
    real: bool = False  # a real GGUF: the embedded model
    mcp: bool = False  # the `time` MCP server configured (mcp-server-time over stdio)
    hub: bool = False  # the loopback stand-in hub serves the `tiny` model
    name: str = "time"
    at_root: bool = False  # run in the repository (paths like tests/data/eval/starter.jsonl)


def _wrote_report(folder: Path, _: Result) -> None:
    assert "Tea at ten" in (Path.home() / "work" / "report.md").read_text()


def _forgotten(folder: Path, _: Result) -> None:
    from hermes_local.longterm import LongTermMemory

    assert "The user drinks tea at ten." not in [i.text for i in LongTermMemory().items()]  # the fact is gone


def _recalls_nothing(folder: Path, res: Result) -> None:
    assert json.loads(res.stdout) == []  # the fact about tea is unrelated to "my goal", on the real vectors


def _stated(folder: Path, _: Result) -> None:
    from hermes_local.longterm import LongTermMemory

    stated = [i for i in LongTermMemory().items() if i.text == "Reports go in reports/ as Markdown"]
    assert [i.trust for i in stated] == ["trusted"]  # the user's own words


def _memory_on(folder: Path, _: Result) -> None:
    from hermes_local.longterm import LongTermMemory

    assert LongTermMemory().enabled and "The user drinks tea at ten." in [i.text for i in LongTermMemory().items()]


def _records(goal: str) -> list[dict]:
    """The session log of the run with this goal."""
    [path] = [s.path for s in list_sessions() if s.goal == goal]
    return read_records(path)


def _queried(folder: Path, _: Result) -> None:
    results = [r for r in _records("Which customers ordered most last week?") if r["kind"] == "tool_result"]
    assert [(r["name"], r["ok"]) for r in results] == [("query_database", True)], results


def _replayed_json(folder: Path, res: Result) -> None:
    out = json.loads(res.stdout)
    assert out["answer"] == "Recorded." and out["stopped"] == "answer"


def _piped_goal(folder: Path, _: Result) -> None:
    assert _records("Summarise this: ...")[0]["kind"] == "run_start"  # the goal came from stdin


def _continued(folder: Path, _: Result) -> None:
    kinds = [r["kind"] for r in _records(TASK) if r["kind"] in ("run_start", "run_end", "run_resumed")]
    assert kinds == ["run_start", "run_end", "run_resumed", "run_end"]  # the finished session, followed up


def _gguf_prompt(folder: Path, res: Result) -> None:
    shown = json.loads(res.stdout)
    assert "<|im_start|>user\nWhat time is it?" in shown["text"] and shown["token_count"] > 0


def _exported(folder: Path, res: Result) -> None:
    case = json.loads(res.stdout)
    assert case["task"] == TASK and (folder / "replay" / f"{case['id']}.jsonl").is_file()


def _downloaded(folder: Path, _: Result) -> None:
    assert list((Path.home() / "hf" / "hub").rglob("tiny.Q8_0.gguf"))


MY_TOOLS = '''"""My tools."""
from hermes_local.tools import tool


@tool
def count_words(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())
'''

CASES: dict[str, Case] = {
    'hermes-local run "Summarise notes.txt into report.md" --workspace ~/work --allow write_file': Case(
        [
            call("read_file", path="notes.txt"),
            call("write_file", path="report.md", content="# Report\nTea at ten."),
            "Wrote report.md.",
        ],
        shows="Wrote report.md.",
        check=_wrote_report,
    ),
    'hermes-local run "Which customers ordered most last week?" --db shop.sqlite': Case(
        [call("query_database", sql="SELECT customer, SUM(total) FROM orders GROUP BY customer"), "Ada."],
        shows="Ada.",
        check=_queried,
    ),
    "hermes-local run TASK --model hermes-2-pro-llama-3-8b:Q5_K_M --n-gpu-layers -1": Case(
        exit=2, shows="not downloaded yet; run: hermes-local models download hermes-2-pro-llama-3-8b:Q5_K_M"
    ),
    "hermes-local run TASK --tool-choice required": Case(
        [call("get_current_time"), call("final_answer", answer="It is ten.")], shows="It is ten."
    ),
    "hermes-local run TASK --instructions @rules.txt": Case(shows="It is ten."),
    "hermes-local run TASK --model replay:run.jsonl --json": Case(check=_replayed_json),
    "hermes-local run TASK --verbose": Case(shows='   call: {"name": "get_current_time", "arguments": {}}'),
    "hermes-local run --resume ID": Case(shows="It is ten."),
    'hermes-local run --continue ID "And last month?"': Case(["Last month."], shows="Last month.", check=_continued),
    'echo "Summarise this: ..." | hermes-local run -': Case(["A summary."], shows="A summary.", check=_piped_goal),
    "hermes-local run TASK --model my.gguf --dialect llama3": Case(
        exit=2, real=True, shows="so the llama3 format would reach it as plain text"
    ),
    "hermes-local run TASK --tools files,time__get_current_time": Case(
        [call("time__get_current_time", timezone="UTC"), "It is ten UTC."], mcp=True, shows="✓ time__get_current_time"
    ),
    "hermes-local chat": Case(["Hello to you."], stdin="Say hello\n/exit\n", shows="Hello to you."),
    "hermes-local prompt TASK --dialect gguf --json": Case(real=True, check=_gguf_prompt),
    "hermes-local prompt --session ID --step 3": Case(shows="<|im_start|>assistant"),
    "hermes-local tools list": Case(shows="get_current_time"),
    "hermes-local tools check my_tools.py": Case(shows="count_words"),
    "hermes-local mcp list": Case(mcp=True, shows="running"),
    "hermes-local mcp trust NAME": Case(mcp=True, shows="the current definitions of time are pinned"),
    "hermes-local models list | info NAME | download NAME[:QUANT]": Case(hub=True, name="tiny", check=_downloaded),
    "hermes-local doctor": Case(real=True, shows="speed:"),
    "hermes-local sessions list | show ID | export ID --as-case": Case(check=_exported),
    "hermes-local memory list | show ID | forget ID": Case(shows="forgot", check=_forgotten),
    'hermes-local memory search "my goal" --json': Case(real=True, check=_recalls_nothing),
    'hermes-local memory add "Reports go in reports/ as Markdown"': Case(shows="remembered", check=_stated),
    "hermes-local memory export | off | on": Case(shows="long-term memory is on", check=_memory_on),
    "hermes-local cache info | clear": Case(shows="removed 0 file(s)"),
    "hermes-local eval cases.jsonl --jobs 4": Case(shows="2/2 cases passed"),
    "hermes-local eval tests/data/eval/starter.jsonl --model hermes-2-pro-llama-3-8b:Q5_K_M --repeat 3": Case(
        exit=2, at_root=True, shows="hermes-local models download hermes-2-pro-llama-3-8b:Q5_K_M"
    ),
}


def _prepare(folder: Path, real: bool) -> dict[str, str]:
    """The files the lines name, a finished three-step session, a killed one and a remembered fact: the IDs."""
    from hermes_local.events import RunStart
    from hermes_local.longterm import LongTermMemory
    from hermes_local.models.registry import embedded_model_path

    work = Path.home() / "work"
    work.mkdir()
    (work / "notes.txt").write_text("Tea at ten. Biscuits at four.\n")
    with sqlite3.connect(folder / "shop.sqlite") as db:
        db.execute("CREATE TABLE orders (customer TEXT, total REAL)")
        db.executemany("INSERT INTO orders VALUES (?, ?)", [("Ada", 30.0), ("Bob", 12.5)])
    (folder / "rules.txt").write_text("Always answer in one sentence.\n")
    write_replay(folder / "run.jsonl", [call("get_current_time"), "Recorded."])
    (folder / "my_tools.py").write_text(MY_TOOLS)
    if real:
        (folder / "my.gguf").symlink_to(embedded_model_path())  # `--model my.gguf`: a GGUF of your own
    cases = [{"id": f"c{i}", "task": f"Say {w}", "checks": {"answer_contains": [w]}} for i, w in enumerate("ab")]
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    for i, word in enumerate("ab"):
        write_replay(folder / "cases" / f"c{i}.jsonl", [f"Said {word}."])
    steps = write_replay(folder / "steps.jsonl", [call("get_current_time"), call("list_dir"), "Done."])
    done = runner.invoke(app, ["run", TASK, "--model", f"replay:{steps}", "--workspace", str(work)])
    assert done.exit_code == 0, done.stderr
    finished = list_sessions()[0].id
    with SessionLog() as killed:
        killed.log(RunStart("What time is it now?", [], "hermes", "hermes"))
    fact = LongTermMemory().add("The user drinks tea at ten.")
    return {"finished": finished, "killed": killed.id, "fact": str(fact)}


def _parts(line: str) -> tuple[str | None, list[list[str]]]:
    """(stdin, the argv of each alternative): `echo "x" | cmd` pipes x; `cmd a | b` is `cmd a`, then `cmd b`."""
    stdin = None
    if line.startswith("echo "):
        piped, line = line.split(" | ", 1)
        stdin = shlex.split(piped)[1] + "\n"
    first, *more = line.split(" | ")
    head = shlex.split(first)
    return stdin, [head, *(head[:2] + shlex.split(m) for m in more)]


def _filled(argv: list[str], ids: dict[str, str], name: str) -> list[str]:
    out = []
    for i, word in enumerate(argv):
        before = argv[i - 1] if i else ""
        if word == "ID":
            word = ids["killed" if before == "--resume" else "fact" if argv[1:2] == ["memory"] else "finished"]
        word = {"TASK": TASK, "NAME": name, "NAME[:QUANT]": f"{name}:Q8_0"}.get(word, word)
        out.append(os.path.expanduser(word) if word.startswith("~") else word)
    return out


def _slug(line: str) -> str:
    return re.sub(r"[^\w.:@~-]+", "-", line.removeprefix("hermes-local ")).strip("-")[:60]


def _params() -> list[object]:
    return [
        pytest.param(line, marks=[pytest.mark.real_model] if case.real else [], id=_slug(line))
        for line, case in CASES.items()
    ]


@pytest.mark.parametrize("line", _params())
def test_the_readme_command_runs_as_written(
    line: str, tmp_path: Path, hermetic_home: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    case = CASES[line]
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    ids = _prepare(folder, case.real)
    if case.mcp:
        write_config(hermetic_home, {"time": TIME_SERVER})
    if case.hub:
        request.getfixturevalue("online")
        start_hub(monkeypatch, request)
    if not case.real:
        model = folder / "cases" if "eval" in line else write_replay(folder / "replies.jsonl", case.replies)
        monkeypatch.setenv("HERMES_LOCAL_MODEL", f"replay:{model}")
    if case.at_root:
        monkeypatch.chdir(ROOT)
    stdin, alternatives = _parts(line)
    for argv in alternatives:
        res = runner.invoke(app, _filled(argv, ids, case.name)[1:], input=case.stdin or stdin)
        shown = res.stdout + res.stderr
        assert "Traceback" not in shown and res.exit_code == case.exit, f"{argv}: exit {res.exit_code}\n{shown}"
    assert case.shows in shown, shown
    if case.check is not None:
        case.check(folder, res)
