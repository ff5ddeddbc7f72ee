"""The agent in every dialect (scripted model): calls, results and notes laid out as each family expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_local.agent.memory import Memory
from hermes_local.config import load_settings
from hermes_local.dialects import get_dialect
from hermes_local.events import ToolOutcome
from hermes_local.prompts import Segments
from hermes_local.testing import ScriptedLLM, build_agent
from hermes_local.tools import Approver, ToolResult, default_registry

REPLIES = {
    "hermes": '<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>',
    "qwen": '<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>',
    "llama3": '{"name": "get_current_time", "parameters": {}}',
    "mistral": '[TOOL_CALLS][{"name": "get_current_time", "arguments": {}}]',
    "mistral-v3": '[TOOL_CALLS] [{"name": "get_current_time", "arguments": {}}]',
    "gemma3": "```tool_code\nget_current_time()\n```",
}
RESULT_TURN = {
    "hermes": '<|im_start|>tool\n<tool_response>\n{"name": "get_current_time", "content": ',
    "qwen": '<|im_start|>user\n<tool_response>\n{"name": "get_current_time", "content": ',
    "llama3": '<|start_header_id|>ipython<|end_header_id|>\n\n"',
    "mistral": '[TOOL_RESULTS]{"content": "',
    "mistral-v3": '[TOOL_RESULTS] {"content": "',
    "gemma3": '```<end_of_turn>\n<start_of_turn>user\n```tool_output\n"',
}


def agent_for(dialect: str, llm: ScriptedLLM, workspace: Path, **settings: object):
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(interactive=False),
        dialect=get_dialect(dialect),
    )


@pytest.mark.parametrize("dialect", list(REPLIES))
def test_a_run_in_each_dialect_calls_a_tool_and_answers(dialect: str, workspace: Path) -> None:
    llm = ScriptedLLM([REPLIES[dialect], "It is noon."])
    result = agent_for(dialect, llm, workspace).run("What time is it?").to_json()
    llm.assert_all_used()
    assert result["answer"] == "It is noon." and [c["name"] for c in result["tool_calls"]] == ["get_current_time"]
    second = llm.prompt_texts[1]
    assert RESULT_TURN[dialect] in second
    assert second.startswith(llm.prompt_texts[0])  # append-only: the KV prefix is reused
    assert '"ok"' not in second and '"summary"' not in second  # results without duplicate fields


@pytest.mark.parametrize("dialect", ["hermes", "qwen", "llama3", "gemma3"])
def test_required_tool_choice_prefills_the_dialects_call_opening(dialect: str, workspace: Path) -> None:
    llm = ScriptedLLM([REPLIES[dialect].removeprefix(get_dialect(dialect).required_prefill), "done"])
    agent_for(dialect, llm, workspace, tool_choice="required", max_steps=1).run("t")
    assert llm.prompt_texts[0].endswith(get_dialect(dialect).required_prefill)


def test_failures_go_back_as_the_error_and_its_kind() -> None:
    memory = Memory(system=Segments.untrusted("rules"), goal="g")
    failure = ToolResult.failure("not_found", "no such file x", "s")
    memory.add_tool_results(1, [ToolOutcome(1, "read_file", {"path": "x"}, failure)])
    text = memory.messages()[-1]["content"].text
    assert '{"name": "read_file", "content": {"error": "no such file x", "kind": "not_found"}}' in text


@pytest.mark.parametrize("dialect", list(REPLIES))
def test_notes_never_make_runs_of_user_turns(dialect: str) -> None:
    d = get_dialect(dialect)
    memory = Memory(system=Segments.untrusted("rules"), goal="the goal", recalled=["likes tea"], dialect=d)
    memory.add_assistant(1, "", [])
    memory.add_tool_results(1, [ToolOutcome(1, "get_current_time", {}, ToolResult(True, "noon", "12:00"))])
    memory.add_user_note(2, Segments.untrusted("Reminder - the goal is: the goal"))
    roles = [m["role"] for m in memory.messages()]
    assert all(not (a == "user" and b == "user") for a, b in zip(roles, roles[1:], strict=False)), roles
    if "tool" in d.user_joins:
        assert roles[-1] == "tool" and "Reminder" in memory.messages()[-1]["content"].text
    else:  # Mistral: [INST] after [/TOOL_RESULTS] is the trained shape
        assert roles[-2:] == ["tool", "user"]
    assert "likes tea" in memory.messages()[1]["content"].text  # recalled facts join the goal turn
