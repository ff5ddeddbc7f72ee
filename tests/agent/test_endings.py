"""How a run ends on the scripted model (issue 27): no empty or echoed answer is final, step 1 decided
before generating, the step limit said plainly, token budgets, and the CLI's line and exit code."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.agent.result import EXIT_CODES, exit_code_for
from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.events import BudgetWarning, Event, Guarded
from hermes_local.testing import ScriptedLLM, TalkativeLLM, build_agent, tool_call_text, write_replay
from hermes_local.tools import Approver, default_registry

call = tool_call_text
ECHO = '<tool_response>\n{"name": "get_current_time", "content": "10:00"}\n</tool_response>'
runner = CliRunner()


def make_agent(llm: ScriptedLLM, workspace: Path, events: list[Event] | None = None, **settings: object):
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(allow=["append_to_memo", "write_file"], interactive=False),
        on_event=events.append if events is not None else None,
    )


# -- 1. no empty or echoed answer is final ------------------------------------------------------------
def test_a_reply_of_only_a_made_up_tool_result_is_sent_back_once(workspace: Path) -> None:
    events: list[Event] = []
    llm = ScriptedLLM([ECHO, "Hello!"])
    result = make_agent(llm, workspace, events).run("Say hello.")
    llm.assert_all_used()
    assert result.stopped == "answer" and result.answer == "Hello!"
    assert result.to_json()["guarded"] == [{"step": 1, "reason": "echoed", "tool": None}]
    assert "a tool result you wrote yourself" in llm.prompt_texts[1]
    assert "reply with your answer to the goal, in plain words" in llm.prompt_texts[1]
    assert [(e.reason, e.tool) for e in events if isinstance(e, Guarded)] == [("echoed", "")]


def test_text_before_an_echoed_tool_result_is_kept_as_the_answer(workspace: Path) -> None:
    llm = ScriptedLLM(["Hello there!\n" + ECHO])
    result = make_agent(llm, workspace).run("Say hello.")
    assert result.stopped == "answer" and result.answer == "Hello there!" and result.guarded == []


def test_two_empty_replies_end_the_run_with_stopped_empty(workspace: Path) -> None:
    llm = ScriptedLLM(["  \n ", ECHO])
    result = make_agent(llm, workspace).run("Say hello.")
    llm.assert_all_used()
    assert result.stopped == "empty" and result.answer is None and result.steps == 2
    assert exit_code_for(result.stopped) == EXIT_CODES["empty"] == 4
    out = result.to_json()
    assert out["stopped"] == "empty" and out["guarded"] == [{"step": 1, "reason": "empty", "tool": None}]
    assert "Your reply was empty" in llm.prompt_texts[1]
    assert result.ending_line() == (
        "(no answer: the model gave an empty reply, also after it was asked again; it made no tool calls)"
    )


def test_an_empty_reply_after_a_tool_worked_gets_a_free_retry_that_names_no_tool(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), "", "It is noon."])
    result = make_agent(llm, workspace).run("What time is it?")
    llm.assert_all_used()
    assert result.stopped == "answer" and result.answer == "It is noon."
    assert result.guarded == [{"step": 2, "reason": "empty", "tool": None}]
    assert llm.calls[2].grammar_trigger == "<tool_call>"  # a free answer: the tool already answered


def test_an_empty_reply_when_the_goal_needs_a_tool_forces_that_tool_next(workspace: Path) -> None:
    llm = ScriptedLLM(["", call("get_current_time"), "It is noon."])
    result = make_agent(llm, workspace, grammar=False).run("What time is it?")  # no grammar: step 1 is free
    llm.assert_all_used()
    assert result.guarded == [{"step": 1, "reason": "empty", "tool": "get_current_time"}]
    assert "Your reply was empty. Now call get_current_time" in llm.prompt_texts[1]
    assert result.answer == "It is noon." and [c.name for c in result.tool_calls] == ["get_current_time"]


# -- 2. decide before generating ------------------------------------------------------------------------
def test_step_one_starts_with_the_call_grammar_when_the_goal_needs_a_tool(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), call("append_to_memo", content="10:00"), "Noted."])
    result = make_agent(llm, workspace).run("What time is it? Note it in my memo.")
    assert result.answer == "Noted." and result.guarded == []
    assert llm.calls[0].constrained and llm.prompt_texts[0].endswith("<|im_start|>assistant\n<tool_call>\n")
    assert llm.calls[1].grammar_trigger == "<tool_call>"  # later steps are free to answer


def test_a_plain_question_still_gets_a_free_first_step(workspace: Path) -> None:
    llm = ScriptedLLM(["4"])
    assert make_agent(llm, workspace).run("What is 2 + 2?").answer == "4"
    assert llm.calls[0].lazy and not llm.prompt_texts[0].endswith("<tool_call>\n")
    llm = ScriptedLLM(["It is noon."])
    make_agent(llm, workspace, answer_guard=False).run("What time is it?")
    assert llm.calls[0].lazy  # the guard switched off decides nothing either


def step_one_completion_tokens(goal: str, workspace: Path) -> int:
    """Completion tokens of step 1 on `TalkativeLLM` (the scripted path of scripts/step1_tokens.py)."""
    llm = TalkativeLLM([call("get_current_time"), "It is noon."])
    result = make_agent(llm, workspace, max_steps=3).run(goal)
    return result.llm_calls[0].completion_tokens


def test_step_one_generates_no_free_text_to_be_thrown_away(workspace: Path) -> None:
    assert step_one_completion_tokens("What time is it? Note it in my memo.", workspace) < 30  # 480 before issue 27


# -- 7. the step limit --------------------------------------------------------------------------------
def test_the_step_limit_is_said_plainly_and_a_parroted_request_is_no_answer(workspace: Path) -> None:
    parrot = "You have reached the step limit. Reply now with your final answer to the goal."
    llm = ScriptedLLM([call("get_current_time"), call("list_dir", path="."), parrot])
    result = make_agent(llm, workspace, max_steps=2).run("What time is it?")
    llm.assert_all_used()
    assert result.stopped == "max_steps" and result.answer is None and exit_code_for(result.stopped) == 3
    assert "took more steps than allowed (--max-steps 2)" in (result.error or "")
    assert "raise --max-steps" in (result.error or "") and "split it" in (result.error or "")
    assert result.ending_line().startswith("(no answer: the task took more steps than allowed; it called")


def test_a_real_answer_at_the_step_limit_is_kept(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), "It is 10:00."])
    result = make_agent(llm, workspace, max_steps=1).run("What time is it?")
    assert result.stopped == "max_steps" and result.answer == "It is 10:00."


# -- 7. token budgets ---------------------------------------------------------------------------------
def test_a_run_token_budget_warns_at_80_percent_then_ends_the_run(workspace: Path) -> None:
    events: list[Event] = []
    script = [call("get_current_time"), call("list_dir", path="."), "never"]
    probe = make_agent(ScriptedLLM(script), workspace, max_steps=5, memory=False).run("What time is it?")
    first, second = (c.prompt_tokens_evaluated + c.completion_tokens for c in probe.llm_calls[:2])
    assert second <= first / 2
    limit = first + second // 2  # the first call crosses 80 %, the second the limit
    llm = ScriptedLLM(script)
    result = make_agent(llm, workspace, events, max_run_tokens=limit, max_steps=5, memory=False).run("What time is it?")
    assert result.stopped == "budget" and exit_code_for(result.stopped) == 5
    assert "max_run_tokens" in (result.error or "") and llm.remaining == 1
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    assert len(warnings) == 1 and "max_run_tokens" in warnings[0].message


def test_a_day_token_budget_is_shared_by_runs_and_kept_in_the_home(workspace: Path) -> None:
    from hermes_local.config import home_dir

    llm = ScriptedLLM(["Hello."])
    first = make_agent(llm, workspace, max_day_tokens=10).run("Say hello.")
    assert first.stopped == "answer"  # the budget is checked before each call: this one was allowed
    files = list((home_dir() / "usage").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["tokens"] >= 10
    second = make_agent(ScriptedLLM(["Hi."]), workspace, max_day_tokens=10).run("Say hi.")
    assert second.stopped == "budget" and second.llm_calls == [] and "max_day_tokens" in (second.error or "")
    third = make_agent(ScriptedLLM(["Hi."]), workspace).run("Say hi.")  # off by default
    assert third.stopped == "answer"


# -- the CLI: a line, never a blank one, and the exit code ------------------------------------------
def test_cli_prints_a_line_and_exits_4_on_an_empty_ending(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["", ECHO])
    res = runner.invoke(app, ["run", "Say hello.", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 4, res.stderr
    assert res.stdout.strip() == (
        "(no answer: the model gave an empty reply, also after it was asked again; it made no tool calls)"
    )
    args = ["run", "Say hello.", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json"]
    res = runner.invoke(app, args)
    out = json.loads(res.stdout)
    assert res.exit_code == 4 and out["stopped"] == "empty" and out["answer"] is None
    assert out["guarded"] == [{"step": 1, "reason": "empty", "tool": None}]


def test_cli_at_the_step_limit_says_so_and_exits_3(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [call("get_current_time"), ""])
    args = ["run", "What time is it?", "--model", f"replay:{replay}", "--workspace", str(workspace)]
    res = runner.invoke(app, [*args, "--max-steps", "1"])
    assert res.exit_code == 3
    assert res.stdout.startswith("(no answer: the task took more steps than allowed; it called get_current_time (ok)")
    assert "raise --max-steps" in res.stderr
