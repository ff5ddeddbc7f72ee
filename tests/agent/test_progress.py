"""The "what have I done" ledger: findings per step, the plan, compaction, KV reuse; temperatures; ask_user."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_local.config import load_settings
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, ToolContext, default_registry, tool
from hermes_local.tools.builtin.interaction import NO_USER, ask_user

call = tool_call_text
NOTES = "\n".join(["Weekly notes"] + [f"item {i}: nothing new" for i in range(38)] + ["The meeting moved to 3 pm."])


@tool
def page(n: int) -> str:
    """Return a numbered page.

    Args:
        n: Page number.
    """
    return f"page {n}: total {n * 10}"


def make_agent(llm: ScriptedLLM, workspace: Path, **settings: object):
    registry = default_registry()
    registry.register(page)
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=registry,
        approver=Approver(allow=["append_to_memo"], interactive=False),
    )


def tool_messages(prompt: str) -> list[str]:
    return [m.split("<|im_end|>", 1)[0] for m in prompt.split("<|im_start|>tool\n")[1:]]


def test_every_finding_and_the_plan_stay_readable_and_nothing_is_repeated(workspace: Path) -> None:
    """Issue 28: a tool message adds its results and only what the context lacks (the changed plan); it
    used to close with a "Done so far" block repeating the findings printed just above it."""
    (workspace / "notes.txt").write_text(NOTES + "\n", encoding="utf-8")
    outputs = ["<plan>current: find the meeting time; todo: note it</plan>" + call("read_file", path="notes.txt")]
    outputs += [call("page", n=i) for i in range(1, 10)] + ["The meeting is at 3 pm."]
    llm = ScriptedLLM(outputs, n_ctx=20000)
    result = make_agent(llm, workspace, max_steps=12, reminder_every=0).run("When is the meeting?")
    assert result.answer == "The meeting is at 3 pm." and result.steps == 11
    last = llm.prompt_texts[-1]
    assert last.count("The meeting moved to 3 pm.") == 1  # step 1's finding: in its result, nowhere else
    for n in range(1, 10):
        assert last.count(f"page {n}: total {n * 10}") == 1  # every finding readable, once
    assert last.count("Current: find the meeting time") == 1 and last.count("Todo: note it") == 1
    messages = tool_messages(last)
    assert len(messages) == 10 and "Todo: note it" in messages[0]
    for message in messages[1:]:  # the plan did not change: the later results stand alone
        assert message.strip().startswith("<tool_response>") and message.strip().endswith("</tool_response>")


def test_the_goal_reminder_carries_the_summary_with_findings_and_plan(workspace: Path) -> None:
    (workspace / "notes.txt").write_text(NOTES + "\n", encoding="utf-8")
    outputs = ["<plan>current: find the meeting time; todo: note it</plan>" + call("read_file", path="notes.txt")]
    outputs += [call("page", n=i) for i in range(1, 10)] + ["The meeting is at 3 pm."]
    llm = ScriptedLLM(outputs, n_ctx=20000)
    make_agent(llm, workspace, max_steps=12, reminder_every=3).run("When is the meeting?")
    reminder = llm.prompt_texts[3].rsplit("Reminder - the goal is:", 1)[1]
    assert "step 1: read_file notes.txt (find the meeting time) → 40 lines; The meeting moved to 3 pm." in reminder
    assert "Current: find the meeting time" in reminder and "Todo: note it" in reminder
    block = llm.prompt_texts[-1].rsplit("Reminder - the goal is:", 1)[1]
    named: set[int] = set()
    for a, b in re.findall(r"steps? (\d+)(?:-(\d+))?:", block):
        named |= set(range(int(a), int(b or a) + 1))
    assert named == set(range(1, 10))  # every step is accounted for; older ones grouped to keep it short
    assert "page 8 → page 8: total 80" in block  # a recent step keeps its finding


def test_compaction_keeps_every_step_and_what_it_was_for(workspace: Path) -> None:
    (workspace / "notes.txt").write_text(NOTES + "\n" + "filler line\n" * 300, encoding="utf-8")
    outputs = [call("read_file", path="notes.txt")] + [call("page", n=i) for i in range(1, 12)] + ["done"]
    llm = ScriptedLLM(outputs, n_ctx=3000)
    result = make_agent(llm, workspace, max_steps=14, n_ctx=3000, max_tokens=128, reminder_every=0).run(
        "When is the meeting?"
    )
    assert result.compactions >= 1 and result.answer == "done"
    last = llm.prompt_texts[-1]
    summary = last.split("What I have done so far", 1)[1].split("<|im_end|>", 1)[0]
    assert "step 1: read_file notes.txt" in summary
    named: set[int] = set()
    for a, b in re.findall(r"steps? (\d+)(?:-(\d+))?:", summary):
        named |= set(range(int(a), int(b or a) + 1))
    # No step is dropped, however much is compacted: a folded step is in the summary, the others are
    # still in the context as their results (in full or as their key finding).
    shown = {n + 1 for n in range(1, 12) if f"page {n}: total {n * 10}" in last.split(summary, 1)[1]}
    assert named | shown >= set(range(1, 13)) and named


def test_progress_block_does_not_break_prefix_reuse(workspace: Path) -> None:
    outputs = [call("page", n=i) for i in range(1, 6)] + ["done"]
    llm = ScriptedLLM(outputs, n_ctx=20000)
    result = make_agent(llm, workspace, max_steps=8, reminder_every=0).run("Add up pages 1 to 5.")
    for before, after in zip(llm.prompts, llm.prompts[1:], strict=False):
        assert after[: len(before) - 3] == before[: len(before) - 3]  # only the open assistant turn differs
    evaluated = sum(c.prompt_tokens_evaluated for c in result.llm_calls)
    new = sum(c.prompt_tokens_new for c in result.llm_calls)
    assert evaluated / new <= 1.05


def test_tool_steps_use_temperature_and_the_final_answer_answer_temperature(workspace: Path) -> None:
    llm = ScriptedLLM([call("page", n=1), call("page", n=2), "final words"])
    result = make_agent(llm, workspace, max_steps=2, temperature=0.1, answer_temperature=0.9).run("pages")
    assert result.stopped == "max_steps" and result.answer == "final words"
    assert [c.temperature for c in llm.calls] == [0.1, 0.1, 0.9]


def test_answer_temperature_defaults_and_env(workspace: Path, monkeypatch) -> None:
    assert load_settings().answer_temperature == 0.7 and load_settings().temperature == 0.2
    monkeypatch.setenv("HERMES_LOCAL_ANSWER_TEMPERATURE", "0.5")
    assert load_settings().answer_temperature == 0.5


def test_ask_user_without_a_terminal_proceeds_on_an_assumption(workspace: Path) -> None:
    result = ask_user.function(question="Which month?", ctx=ToolContext(workspace=workspace))
    assert result.ok and result.data == NO_USER


def test_ask_user_on_a_terminal_returns_the_reply(workspace: Path) -> None:
    asked: list[str] = []
    ctx = ToolContext(workspace=workspace, ask_user=lambda q: (asked.append(q), "March")[1])
    result = ask_user.function(question="Which month?", ctx=ctx)
    assert result.ok and result.data == "March" and asked == ["Which month?"]


def test_ask_user_in_a_run_without_terminal(workspace: Path) -> None:
    llm = ScriptedLLM([call("ask_user", question="Which file?"), "I assumed notes.txt."])
    result = make_agent(llm, workspace, answer_guard=False).run("Summarise the file")
    # nobody to ask: ask_user is not offered (issue 27), and a call to it says why
    assert '"name": "ask_user"' not in llm.prompt_texts[0] and result.tool_calls[0].error_kind == "not_found"
    assert "ask_user is not available in this run: it needs someone to ask" in llm.prompt_texts[1]


def test_ask_user_in_a_run_asks_the_person_the_caller_gave(workspace: Path) -> None:
    asked: list[str] = []
    llm = ScriptedLLM([call("ask_user", question="Which file?"), "Summarised notes.txt."])
    agent = build_agent(
        llm,
        load_settings(),
        workspace=workspace,
        approver=Approver(interactive=False),
        ask_user=lambda question: (asked.append(question), "notes.txt")[1],
    )
    result = agent.run("Summarise the file")
    assert result.tool_calls[0].ok and asked == ["Which file?"] and "notes.txt" in llm.prompt_texts[1]
