"""The agent loop on ScriptedLLM: multi-step runs, errors fed back, unknown tools, max_steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.testing import ScriptedLLM, ScriptExhausted, build_agent, tool_call_text
from hermes_local.tools import Approver, ToolRegistry, default_registry, tool

call = tool_call_text


def make_agent(llm: ScriptedLLM, workspace: Path, registry: ToolRegistry | None = None, **settings: object):
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=registry or default_registry(),
        approver=Approver(allow=["append_to_memo"], interactive=False),
    )


def test_two_tool_steps_then_answer(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), call("append_to_memo", content="time noted"), "Done: noted."])
    result = make_agent(llm, workspace).run("What time is it? Note it in my memo.")
    llm.assert_all_used()
    assert result.stopped == "answer" and result.answer == "Done: noted."
    assert [c.name for c in result.tool_calls] == ["get_current_time", "append_to_memo"]
    assert all(c.ok for c in result.tool_calls)
    assert (workspace / "memo.md").read_text() == "- time noted\n"
    # The second prompt carries the first tool's result back in the tool role.
    assert "<|im_start|>tool\n<tool_response>" in llm.prompt_texts[1]
    assert '"name": "get_current_time"' in llm.prompt_texts[1]


def test_prompt_prefix_is_stable_across_steps(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), call("get_current_time"), "ok"])
    make_agent(llm, workspace).run("t")
    first, second, third = llm.prompts
    assert second[: len(first) - 3] == first[: len(first) - 3]
    assert third[: len(second) - 3] == second[: len(second) - 3]


def test_unknown_tool_gets_an_error_result_and_the_loop_continues(workspace: Path) -> None:
    llm = ScriptedLLM([call("launch_rockets", count=3), "Sorry, I cannot do that."])
    result = make_agent(llm, workspace).run("launch")
    assert result.stopped == "answer"
    assert result.tool_calls[0].ok is False and result.tool_calls[0].error_kind == "not_found"
    assert "There is no tool named 'launch_rockets'" in llm.prompt_texts[1]
    assert "get_current_time" in llm.prompt_texts[1].rsplit("<tool_response>", 1)[1]


def test_invalid_arguments_are_fed_back(workspace: Path) -> None:
    llm = ScriptedLLM([call("append_to_memo", text="wrong name"), call("append_to_memo", content="right"), "ok"])
    result = make_agent(llm, workspace).run("memo")
    assert [c.error_kind for c in result.tool_calls] == ["invalid_arguments", None]
    assert "Invalid arguments for append_to_memo" in llm.prompt_texts[1]
    assert (workspace / "memo.md").read_text() == "- right\n"


def test_unparseable_call_is_reported_to_the_model(workspace: Path) -> None:
    llm = ScriptedLLM(["<tool_call>{not json at all</tool_call>", "plain answer"])
    result = make_agent(llm, workspace).run("x")
    assert result.answer == "plain answer" and result.steps == 2
    assert "not valid JSON" in llm.prompt_texts[1]


def test_tool_that_raises_becomes_tool_error(workspace: Path) -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    registry = default_registry()
    registry.register(explode)
    llm = ScriptedLLM([call("explode"), "it failed"])
    result = make_agent(llm, workspace, registry).run("x")
    assert result.tool_calls[0].error_kind == "tool_error"
    assert "RuntimeError: boom" in llm.prompt_texts[1]


def test_max_steps_stops_the_loop_and_asks_once_for_a_final_answer(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time", n=i) for i in range(3)] + ["Best answer so far."])
    result = make_agent(llm, workspace, max_steps=3).run("loop forever")
    llm.assert_all_used()
    assert result.stopped == "max_steps" and result.steps == 3 and result.answer == "Best answer so far."
    assert "reached the step limit" in llm.prompt_texts[-1]
    assert llm.calls[-1].grammar is None  # the final request offers no constrained call


def test_usage_is_summed_and_kv_reuse_is_visible(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), "ok"])
    result = make_agent(llm, workspace).run("t")
    first, second = result.llm_calls
    assert result.usage.prompt_tokens == first.prompt_tokens + second.prompt_tokens
    assert second.prompt_tokens_evaluated < second.prompt_tokens
    assert second.prompt_tokens_new == second.prompt_tokens_evaluated


def test_scripted_llm_fails_on_extra_and_unused_outputs(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time")])
    with pytest.raises(ScriptExhausted):
        make_agent(llm, workspace).run("t")
    unused = ScriptedLLM(["answer", "never used"])
    make_agent(unused, workspace).run("t")
    with pytest.raises(AssertionError, match="never requested"):
        unused.assert_all_used()


def test_tool_choice_required_prefills_and_constrains(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), call("get_current_time"), "final"])
    result = make_agent(llm, workspace, tool_choice="required", max_steps=2).run("t")
    assert result.answer == "final"
    assert llm.prompt_texts[0].endswith("<|im_start|>assistant\n<tool_call>\n")
    assert llm.calls[0].grammar and llm.calls[0].grammar_trigger is None
    assert [c.ok for c in result.tool_calls] == [True, True]


def test_tool_choice_auto_uses_a_lazy_grammar_and_none_offers_no_tools(workspace: Path) -> None:
    llm = ScriptedLLM(["hello"])
    make_agent(llm, workspace).run("t")
    assert llm.calls[0].grammar_trigger == "<tool_call>"
    llm = ScriptedLLM([call("get_current_time"), "It is noon."])  # a call is no answer: sent back once (issue 27)
    result = make_agent(llm, workspace, tool_choice="none").run("t")
    assert "<tools>" not in llm.prompt_texts[0] and llm.calls[0].grammar is None
    assert result.tool_calls == [] and result.stopped == "answer" and result.answer == "It is noon."
