"""Re-decode (issue 46): a call that does not parse is decoded again under the grammar in the same step.

On the scripted model with `rewinds_kv` (the in-process engine's promise: its KV cache keeps the reply, so a
prompt repeating the reply's first tokens rewinds there). The second scripted output is what the model
writes when asked again from the span, after the dialect's call opener.
"""

from __future__ import annotations

from pathlib import Path

from hermes_local.agent.redecode import span_start
from hermes_local.config import load_settings
from hermes_local.dialects import get_dialect
from hermes_local.events import Event, LLMCall, Redecoded, ToolFinished
from hermes_local.testing import ScriptedLLM, build_agent
from hermes_local.tools import Approver, default_registry

BROKEN = 'Let me check the time.\n{"name": "get_current_time", "arguments": {"tz": UTC}}</tool_call>'
AGAIN = '{"name": "get_current_time", "arguments": {}}\n</tool_call>'


class RewindingLLM(ScriptedLLM):
    rewinds_kv = True


def make_agent(llm: ScriptedLLM, workspace: Path, events: list[Event], **settings: object):
    return build_agent(
        llm,
        load_settings({"answer_guard": False, **settings}),  # step 1 not forced: the lazy grammar is in play
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(interactive=False),
        on_event=events.append,
    )


def test_a_broken_call_is_redecoded_in_the_same_step_instead_of_an_error_turn(workspace: Path) -> None:
    events: list[Event] = []
    llm = RewindingLLM([BROKEN, AGAIN, "It is 10:00."])
    result = make_agent(llm, workspace, events).run("What time is it?")
    llm.assert_all_used()
    redone = [e for e in events if isinstance(e, Redecoded)]
    assert len(redone) == 1 and redone[0].step == 1 and redone[0].ok
    assert redone[0].replaced == BROKEN[BROKEN.index("{") :] and redone[0].text == "<tool_call>\n" + AGAIN
    finished = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [(o.step, o.name, o.ok) for o in finished] == [(1, "get_current_time", True)]  # no invalid_tool_call
    assert result.steps == 2 and result.answer == "It is 10:00."
    first, second = llm.prompts[0], llm.prompts[1]
    kept = llm.tokenize("Let me check the time.\n", special=False)
    assert second[: len(first)] == first and second[len(first) : len(first) + len(kept)] == kept  # rewound there
    assert second[len(first) + len(kept) :] == llm.tokenize("<tool_call>\n", special=True)
    assert llm.calls[1].grammar and llm.calls[1].grammar_trigger is None  # constrained from its first token
    assert sum(isinstance(e, LLMCall) and e.step == 1 for e in events) == 2


def test_a_redecode_that_still_fails_keeps_the_text_before_the_span_not_an_error(workspace: Path) -> None:
    events: list[Event] = []
    llm = RewindingLLM([BROKEN, '{"name": 5}</tool_call>', "Done."])
    make_agent(llm, workspace, events).run("What time is it?")
    redone = [e for e in events if isinstance(e, Redecoded)]
    assert len(redone) == 1 and not redone[0].ok
    assert not [e for e in events if isinstance(e, ToolFinished) and e.outcome.name == "invalid_tool_call"]


def test_without_rewind_or_when_switched_off_the_parser_error_goes_back_as_before(workspace: Path) -> None:
    for llm, settings in (
        (ScriptedLLM([BROKEN, "It is late."]), {}),
        (RewindingLLM([BROKEN, "Late."]), {"redecode": False}),
    ):
        events: list[Event] = []
        make_agent(llm, workspace, events, **settings).run("What time is it?")
        llm.assert_all_used()
        assert not [e for e in events if isinstance(e, Redecoded)]
        assert [e.outcome.name for e in events if isinstance(e, ToolFinished)] == ["invalid_tool_call"]


def test_the_span_starts_at_the_last_opener_before_which_the_reply_parses() -> None:
    hermes = get_dialect("hermes")
    parse = lambda text: hermes.parse(text, ["get_weather"])  # noqa: E731
    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    text = f'Sure. {good} and <tool_call>{{"name": "get_weather", "arguments": {{"city": </tool_call>'
    assert span_start(text, parse) == text.rindex("<tool_call>")
    assert span_start("plain prose, no call", parse) is None


def test_sessions_show_says_what_was_replaced() -> None:
    from hermes_local.session import describe_event

    line = describe_event(Redecoded(1, '{"name": "t", UTC}', '<tool_call>\n{"name": "t", "arguments": {}}', True))
    assert line is not None and 'replaced: {"name": "t", UTC}' in line and "re-decoded as <tool_call>" in line
    failed = describe_event(Redecoded(1, "{bad", "{worse", False))
    assert failed is not None and "kept the text before it" in failed


def test_a_call_in_another_familys_syntax_is_redecoded_in_this_dialects(workspace: Path) -> None:
    events: list[Event] = []
    gemma_style = "Checking.<|tool_call>call:get_current_time{}<tool_call|>"
    llm = RewindingLLM([gemma_style, AGAIN, "It is 10:00."])
    result = make_agent(llm, workspace, events).run("What time is it?")
    llm.assert_all_used()
    redone = [e for e in events if isinstance(e, Redecoded)]
    assert [(e.replaced, e.ok) for e in redone] == [("<|tool_call>call:get_current_time{}<tool_call|>", True)]
    assert [e.outcome.name for e in events if isinstance(e, ToolFinished)] == ["get_current_time"]
    assert result.answer == "It is 10:00."


def test_prose_with_json_is_not_redecoded(workspace: Path) -> None:
    events: list[Event] = []
    llm = RewindingLLM(['Use {"name": "x"} as the config.'])
    make_agent(llm, workspace, events).run("How do I name the config?")
    llm.assert_all_used()
    assert not [e for e in events if isinstance(e, Redecoded)]


def test_a_tag_named_in_prose_or_a_call_rehearsed_in_a_thought_is_not_redecoded(workspace: Path) -> None:
    for reply in ("Calls go between <tool_call> tags.", "<think>maybe <|tool_call>call:get_current_time{}</think>No."):
        events: list[Event] = []
        llm = RewindingLLM([reply])
        make_agent(llm, workspace, events).run("How do calls look?")
        llm.assert_all_used()
        assert not [e for e in events if isinstance(e, Redecoded)], reply
