"""Issue 29, the newcomer's path: names that resolve or suggest, exit codes a script can rely on, the
`hermes-local "task"` shortcut, stdin and follow-up runs, help texts that keep their brackets."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.agent.result import EXIT_CODES
from hermes_local.cli.app import app
from hermes_local.errors import UserError
from hermes_local.models.registry import close_names, lookup, resolve_model
from hermes_local.session import list_sessions, read_records, session_path
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("hermes-2-pro-llama3-8b", "hermes-2-pro-llama-3-8b:Q4_K_M"),
        ("hermes-2-pro-llama-3-8:Q5_K_M", "hermes-2-pro-llama-3-8b:Q5_K_M"),
        ("hermes-3-lama-3.1-8b", "hermes-3-llama-3.1-8b:Q4_K_M"),
    ],
)
def test_an_unknown_model_name_suggests_the_closest_registry_name(typed: str, suggested: str) -> None:
    assert close_names(typed)[0] == suggested
    with pytest.raises(UserError, match=f"did you mean {suggested}"):
        resolve_model(typed)


def test_the_name_a_user_types_for_hermes_2_pro_llama_3_resolves() -> None:
    choice = lookup("hermes-2-pro-llama-3:Q5_K_M")
    assert choice is not None and choice.label == "hermes-2-pro-llama-3-8b:Q5_K_M"


def test_run_with_a_misspelt_model_says_did_you_mean_in_one_line(workspace: Path) -> None:
    res = runner.invoke(app, ["run", "x", "--model", "hermes-2-pro-lama-3-8b", "--workspace", str(workspace)])
    assert res.exit_code == 2 and "did you mean hermes-2-pro-llama-3-8b:Q4_K_M?" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


# -- exit codes a script can rely on; paths checked before the model and before any output ----------------------
def test_a_run_that_hits_the_step_limit_exits_3(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [call("get_current_time"), "It is some time."])
    res = runner.invoke(
        app,
        ["run", "What time is it?", "--model", f"replay:{replay}", "--workspace", str(workspace), "--max-steps", "1"],
    )
    assert res.exit_code == EXIT_CODES["max_steps"] == 3, res.stderr


def test_an_answered_run_exits_0(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["Hello."])
    res = runner.invoke(app, ["run", "Say hello", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 0 and res.stdout.strip() == "Hello."


def _sqlite(path: Path) -> Path:
    sqlite3.connect(path).close()
    return path


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--db", "{tmp}/missing.sqlite"], "--db {tmp}/missing.sqlite: cannot open it"),
        (["--db", "{tmp}/notes.txt"], "is not an SQLite database"),
        (["--workspace", "{tmp}/nowhere"], "workspace {tmp}/nowhere is not a directory"),
        (["--tools-module", "{tmp}/my_tools.py"], "--tools-module {tmp}/my_tools.py does not exist"),
        (["--tools-module", "no_such_module_here"], "neither a .py file nor an importable module"),
        (["--instructions", "@{tmp}/rules.txt"], "--instructions @{tmp}/rules.txt: cannot read"),
    ],
)
def test_paths_on_the_command_line_are_checked_before_the_model_and_any_output(
    tmp_path: Path, workspace: Path, flags: list[str], message: str
) -> None:
    (tmp_path / "notes.txt").write_text("not a database, just some notes\n")
    args = [f.format(tmp=tmp_path) for f in flags]
    base = ["--model", "no-such-model", "--workspace", str(workspace)]  # the model would fail next: it must not
    for command in (["run", "x"], ["chat"]):
        res = runner.invoke(app, [*command, *base, *args])
        assert res.exit_code == 2, res.stderr
        assert res.stdout == "" and res.stderr.startswith("error: ") and len(res.stderr.splitlines()) == 1
        assert message.format(tmp=tmp_path) in res.stderr


def test_workflow_run_checks_db_before_any_step(tmp_path: Path, workspace: Path) -> None:
    res = runner.invoke(
        app, ["workflow", "run", str(ROOT / "scripts/examples/daily_report.toml"), "--db", str(tmp_path / "no.sqlite")]
    )
    assert res.exit_code == 2 and "does not exist; create it first" in res.stderr and res.stdout == ""


def test_a_real_sqlite_db_passes_the_check(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["No rows needed."])
    db = _sqlite(tmp_path / "shop.sqlite")
    res = runner.invoke(
        app, ["run", "x", "--model", f"replay:{replay}", "--workspace", str(workspace), "--db", str(db)]
    )
    assert res.exit_code == 0, res.stderr


def test_mcp_list_exits_1_when_a_configured_server_fails(hermetic_home: Path) -> None:
    home = hermetic_home / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[mcp.servers.gone]\ncommand = "no-such-mcp-server-binary"\n')
    for extra in ([], ["--json"]):
        res = runner.invoke(app, ["mcp", "list", *extra])
        assert res.exit_code == 1, res.stdout + res.stderr
        assert "gone" in res.stdout and "failed" in res.stdout


# -- the `hermes-local "task"` shortcut, `run -`, `run --continue ID`, eval reports ----------------------------
@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("sesions", "did you mean `hermes-local sessions`?"),
        ("modles", "did you mean `hermes-local models`?"),
        ("history", "no command 'history' (see hermes-local --help)"),  # (`stats` is a command now)
    ],
)
def test_a_single_word_that_could_be_a_command_is_refused(word: str, message: str, workspace: Path) -> None:
    res = runner.invoke(app, [word, "--workspace", str(workspace)])
    assert res.exit_code == 2 and message in res.stderr and res.stdout == ""
    assert f"hermes-local run {word}" in res.stderr  # how to mean it as a task after all


def test_the_shortcut_still_takes_a_task_of_several_words(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["Hello."])
    res = runner.invoke(app, ["Say hello please", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 0 and res.stdout.strip() == "Hello.", res.stderr


def test_run_dash_reads_the_task_from_stdin(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["Piped."])
    args = ["run", "-", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json", "--no-answer-guard"]
    res = runner.invoke(app, args, input="Summarise this: the piped text\n")
    assert res.exit_code == 0, res.stderr
    sid = json.loads(res.stdout)["session_id"]
    start = read_records(session_path(sid))[0]
    assert start["kind"] == "run_start" and start["goal"] == "Summarise this: the piped text"
    empty = runner.invoke(app, args, input="")
    assert empty.exit_code == 2 and "stdin was empty" in empty.stderr


def test_run_continue_follows_a_finished_session_with_a_new_message(tmp_path: Path, workspace: Path) -> None:
    first = write_replay(tmp_path / "a.jsonl", [call("get_current_time"), "It is ten."])
    res = runner.invoke(app, ["run", "What time is it?", "--model", f"replay:{first}", "--workspace", str(workspace)])
    assert res.exit_code == 0, res.stderr
    sid = list_sessions()[0].id
    second = write_replay(tmp_path / "b.jsonl", ["In the morning."])
    args = ["run", "--continue", sid, "Morning or evening?", "--model", f"replay:{second}", "--json"]
    res = runner.invoke(app, [*args, "--workspace", str(workspace)])
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["answer"] == "In the morning." and out["session_id"] == sid
    kinds = [r["kind"] for r in read_records(session_path(sid))]
    assert kinds.count("run_start") == 1 and kinds.count("run_end") == 2 and "run_resumed" in kinds
    again = runner.invoke(app, ["run", "--continue", sid, "--model", f"replay:{second}"])
    assert again.exit_code == 2 and "needs the new message" in again.stderr


def test_a_follow_up_counts_the_files_its_earlier_turns_used(tmp_path: Path, workspace: Path) -> None:
    """The goal named notes.txt and turn 1 read it; turn 2 writes summary.md: notes.txt is not "unused"."""
    (workspace / "notes.txt").write_text("Tea at ten.\n")
    first = write_replay(tmp_path / "a.jsonl", [call("read_file", path="notes.txt"), "It says: tea at ten."])
    res = runner.invoke(app, ["run", "Read notes.txt", "--model", f"replay:{first}", "--workspace", str(workspace)])
    assert res.exit_code == 0, res.stderr
    sid = list_sessions()[0].id
    second = write_replay(tmp_path / "b.jsonl", [call("write_file", path="summary.md", content="Tea at ten."), "Done."])
    args = ["run", "--continue", sid, "Write that to summary.md", "--model", f"replay:{second}", "--json", "--yes"]
    res = runner.invoke(app, [*args, "--workspace", str(workspace)])
    out = json.loads(res.stdout)
    assert res.exit_code == 0 and out["outcome"] == "done", out["evidence"]
    assert (workspace / "summary.md").read_text() == "Tea at ten."


def test_run_continue_refuses_a_session_that_has_not_ended(workspace: Path) -> None:
    from hermes_local.events import RunStart
    from hermes_local.session import SessionLog

    with SessionLog() as log:
        log.log(RunStart("t", [], "hermes", "hermes"))
    res = runner.invoke(app, ["run", "--continue", log.id, "more", "--workspace", str(workspace)])
    assert res.exit_code == 2 and f"hermes-local run --resume {log.id}" in res.stderr


# -- help texts keep every literal bracket --------------------------------------------------------------------
def _commands(command, path: tuple[str, ...] = ()):
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_text_renders_its_literal_brackets() -> None:
    import re

    import typer

    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        texts = [command.help, command.epilog, *(getattr(p, "help", None) for p in command.params)]
        wanted = {m for text in texts if text for m in re.findall(r"\[[^\]\s]+\]", text)}
        if not wanted:
            continue
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"}).stdout
        assert {w for w in wanted if w not in shown} == set(), path
        checked += 1
    assert checked >= 3  # mcp ([mcp.servers.NAME]), models info/download (NAME[:QUANT]), doctor


# -- what the model wrote: sessions show, run --verbose, prompt ------------------------------------------------
PLANNED = "<think>The user wants the time.</think><plan>current: get the time; todo: answer</plan>\n" + call(
    "get_current_time"
)


def test_sessions_show_prints_each_step_with_what_the_model_wrote(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [PLANNED, "It is ten o'clock."])
    # --no-answer-guard: step 1 free (not forced to a call), so the recorded reply keeps its thought and plan
    args = ["run", "What time is it?", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json"]
    args.append("--no-answer-guard")
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stderr
    sid = json.loads(res.stdout)["session_id"]
    shown = runner.invoke(app, ["sessions", "show", sid]).stdout
    assert "   thought: The user wants the time." in shown
    assert "   plan: current: get the time; todo: answer" in shown
    assert '   call: {"name": "get_current_time", "arguments": {}}' in shown
    assert "prompt tokens" in shown and "     ✓ " in shown  # tokens of each call, the tool result's summary
    assert "   text: It is ten o'clock." in shown
    raw = runner.invoke(app, ["sessions", "show", sid, "--json"]).stdout.splitlines()
    kinds = [json.loads(line)["kind"] for line in raw]
    assert kinds[0] == "run_start" and "assistant" in kinds and kinds[-1] == "run_end"
    assistant = next(json.loads(line) for line in raw if json.loads(line)["kind"] == "assistant")
    assert assistant["text"] == PLANNED  # the raw reply, its <plan> too


def test_run_verbose_streams_what_the_model_wrote(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [PLANNED, "It is ten o'clock."])
    base = ["run", "What time is it?", "--model", f"replay:{replay}", "--workspace", str(workspace)]
    base.append("--no-answer-guard")  # step 1 free: the recorded reply keeps its plan
    res = runner.invoke(app, [*base, "--verbose"])
    assert res.exit_code == 0, res.stderr
    assert "   plan: current: get the time; todo: answer" in res.stderr and "   call: " in res.stderr
    quiet = runner.invoke(app, base)
    assert "   plan: " not in quiet.stderr


def test_prompt_reads_an_instructions_file_as_run_does(tmp_path: Path) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text("Always answer in French.\n")
    res = runner.invoke(app, ["prompt", "What time is it?", "--instructions", f"@{rules}", "--json"])
    assert res.exit_code == 0, res.stderr
    text = json.loads(res.stdout)["text"]
    assert "Always answer in French." in text and f"@{rules}" not in text


ECHOING = call("get_current_time") + '\n<tool_response>{"content": "09:00"}</tool_response>\nIt is nine.<|im_end|>'


def test_sessions_show_and_run_verbose_mark_every_dropped_part(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [ECHOING, "It is ten o'clock."])
    args = ["run", "What time is it?", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json"]
    res = runner.invoke(app, [*args, "--no-answer-guard"])
    assert res.exit_code == 0 and json.loads(res.stdout)["answer"] == "It is ten o'clock.", res.stderr
    shown = runner.invoke(app, ["sessions", "show", json.loads(res.stdout)["session_id"]]).stdout
    made_up = '   dropped (a tool result or turn the model wrote itself): <tool_response>{"content": "09:00"}'
    assert made_up in shown and "</tool_response> It is nine." in shown
    assert "   text: It is nine." not in shown  # a dropped part is never shown as the model's text
    assert shown.count("   call: ") == 1 and "   text: It is ten o'clock." in shown
    verbose = runner.invoke(app, [*args[:-1], "--no-answer-guard", "--verbose"])
    assert verbose.exit_code == 0 and made_up in verbose.stderr, verbose.stderr


def test_a_parroted_final_answer_is_shown_as_dropped(tmp_path: Path, workspace: Path) -> None:
    from hermes_local.agent.loop import FINAL_ANSWER_REQUEST

    replay = write_replay(tmp_path / "r.jsonl", [call("get_current_time"), FINAL_ANSWER_REQUEST])
    args = ["run", "What time is it?", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json"]
    res = runner.invoke(app, [*args, "--max-steps", "1"])
    assert res.exit_code == 3 and json.loads(res.stdout)["answer"] is None, res.stdout + res.stderr
    shown = runner.invoke(app, ["sessions", "show", json.loads(res.stdout)["session_id"]]).stdout
    assert "   dropped (it repeated the request for an answer): " in shown and "   final answer: " not in shown


def test_sessions_show_reads_a_reply_as_the_parser_does_each_thought_once(tmp_path: Path, workspace: Path) -> None:
    """Hermes 2 Pro's own thought markers: the thought is a thought (once), not the model's text."""
    hermes_2_pro = "<|startofthought|>I need the clock.<|endofthought|>" + call("get_current_time")
    replay = write_replay(tmp_path / "r.jsonl", [hermes_2_pro, "It is ten o'clock."])
    args = ["run", "What time is it?", "--model", f"replay:{replay}", "--workspace", str(workspace)]
    res = runner.invoke(app, [*args, "--json", "--no-answer-guard"])
    assert res.exit_code == 0, res.stderr
    shown = runner.invoke(app, ["sessions", "show", json.loads(res.stdout)["session_id"]]).stdout
    assert shown.count("   thought: I need the clock.") == 1 and "startofthought" not in shown
    assert '   call: {"name": "get_current_time", "arguments": {}}' in shown
    verbose = runner.invoke(app, [*args, "--no-answer-guard", "--verbose"]).stderr
    assert verbose.count("   thought: I need the clock.") == 1 and "startofthought" not in verbose


@pytest.mark.parametrize("dropped", [5, "x", [["only why"]], [[1, 2, 3]]])
def test_a_tampered_dropped_field_shows_the_reply_without_it(dropped: object) -> None:
    from hermes_local.events import AssistantText, event_from_dict
    from hermes_local.session import describe_reply

    event = event_from_dict({"kind": "assistant", "step": 1, "text": "Hi.", "dropped": dropped})
    assert isinstance(event, AssistantText) and describe_reply(event) == "   text: Hi."


def test_run_dash_with_an_instruction_puts_it_before_the_piped_text(tmp_path: Path, workspace: Path) -> None:
    """Issue 42: `cat notes.txt | hermes-local run - "summarise this"` (as `llm` does)."""
    replay = write_replay(tmp_path / "r.jsonl", ["The launch is on Friday."])
    args = ["run", "-", "When is the launch?", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json"]
    res = runner.invoke(app, args, input="The launch is on Friday at 10.\n")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    start = read_records(session_path(out["session_id"]))[0]
    assert start["goal"] == "When is the launch?\n\nThe launch is on Friday at 10." and out["outcome"] == "answered"
    wrong = runner.invoke(app, ["run", "one", "two", "--workspace", str(workspace)])
    assert wrong.exit_code == 2 and "one quoted argument" in wrong.stderr


def test_run_continue_without_an_id_follows_this_workspaces_last_run(tmp_path: Path, workspace: Path) -> None:
    first = write_replay(tmp_path / "a.jsonl", [call("get_current_time"), "It is ten."])
    res = runner.invoke(app, ["run", "What time is it?", "--model", f"replay:{first}", "--workspace", str(workspace)])
    assert res.exit_code == 0, res.stderr
    sid = list_sessions()[0].id
    second = write_replay(tmp_path / "b.jsonl", ["In the morning."])
    args = ["run", "--continue", "Morning or evening?", "--model", f"replay:{second}", "--json"]
    res = runner.invoke(app, [*args, "--workspace", str(workspace)])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["session_id"] == sid
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = runner.invoke(app, [*args, "--workspace", str(elsewhere)])
    assert res.exit_code == 2 and "no finished run in" in res.stderr


def test_models_list_marks_the_default_model() -> None:
    lines = runner.invoke(app, ["models", "list"]).stdout.splitlines()
    marked = [line for line in lines if "the default model" in line]
    assert len(marked) == 1 and marked[0].lstrip("* ").startswith("smollm2:")
