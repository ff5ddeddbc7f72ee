"""Memory under pressure: compaction within n_ctx, goal anchor, plans, loop guards, long-term store."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_local.agent.memory import extract_plan
from hermes_local.config import load_settings
from hermes_local.longterm import LongTermMemory
from hermes_local.runtime import build_registry, memory_scope
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, ToolRegistry, tool

call = tool_call_text


@tool
def fetch_page(page: int) -> str:
    """Return a large page of log text.

    Args:
        page: Page number.
    """
    return "\n".join(f"page {page} line {i}: status=ok latency={i * 7 % 100}ms user=u{i % 13}" for i in range(400))


def make_agent(llm, workspace: Path, registry: ToolRegistry | None = None, **settings: object):
    registry = registry or build_registry()
    registry.register(fetch_page)
    loaded = load_settings({"max_tools_in_prompt": 50, **settings})  # flat prompt: these budgets assume it
    approver = Approver(allow=loaded.allow_tools, interactive=False)
    return build_agent(llm, loaded, workspace=workspace, registry=registry, approver=approver)


GOAL = "Scan every log page and report the slowest user. GOAL-MARKER-1234"


def assert_goal_in_every_prompt(llm: ScriptedLLM) -> None:
    for text in llm.prompt_texts:
        assert GOAL in text


@pytest.mark.real_model
def test_long_run_overflowing_n_ctx_many_times_on_the_real_tokenizer(workspace: Path, embedded_model_path) -> None:
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams

    tokenizer = LlamaCppLLM(embedded_model_path, LlamaParams(vocab_only=True))
    steps = 12
    outputs = [call("fetch_page", page=i) for i in range(steps)] + ["u7 is the slowest user."]
    # 3072: the trained Hermes tool block and the progress note leave a 2048 window too little room for history.
    llm = ScriptedLLM(outputs, n_ctx=3072, tokenizer=tokenizer)
    result = make_agent(llm, workspace, max_steps=steps + 1, n_ctx=3072, max_tokens=128).run(GOAL)
    llm.assert_all_used()
    assert result.stopped == "answer" and result.error is None
    # Each page alone is ~6x larger than the whole window: every prompt still fits.
    page_tokens = len(tokenizer.tokenize(fetch_page.function(page=0), special=False))
    assert page_tokens * steps > 20 * 2048
    assert all(p + 128 < 3072 for p in (c.prompt_tokens for c in result.llm_calls))
    assert result.compactions >= 1
    assert_goal_in_every_prompt(llm)
    assert "characters cut to fit the context" in llm.prompt_texts[1]
    assert "What I have done so far" in llm.prompt_texts[-1]


def test_compaction_keeps_recent_turns_and_summarizes_old_ones(workspace: Path) -> None:
    outputs = [call("fetch_page", page=i) for i in range(6)] + ["done"]
    llm = ScriptedLLM(outputs, n_ctx=6000)
    result = make_agent(llm, workspace, max_steps=8, n_ctx=6000, max_tokens=256).run(GOAL)
    assert result.stopped == "answer" and result.compactions >= 1
    last = llm.prompt_texts[-1]
    assert_goal_in_every_prompt(llm)
    assert "Completed:" in last and "step 1: fetch_page 0 → " in last
    # The most recent page is still verbatim; the oldest is only a summary line.
    assert "page 5 line 5:" in last and "page 0 line 5:" not in last


def test_two_hundred_step_soak_never_overflows(workspace: Path) -> None:
    outputs = [call("fetch_page", page=i) for i in range(200)] + ["final"]
    llm = ScriptedLLM(outputs, n_ctx=4096)
    result = make_agent(llm, workspace, max_steps=200, n_ctx=4096, max_tokens=256, reminder_every=0).run(GOAL)
    assert result.stopped == "max_steps" and result.answer == "final" and "--max-steps" in (result.error or "")
    assert max(c.prompt_tokens for c in result.llm_calls) + 256 <= 4096
    assert_goal_in_every_prompt(llm)


def test_goal_reminder_every_three_steps(workspace: Path) -> None:
    outputs = [call("get_current_time")] * 2 + [call("fetch_page", page=1)] * 2 + ["done"]
    llm = ScriptedLLM(outputs)
    make_agent(llm, workspace, max_steps=6).run(GOAL)
    reminder = "Reminder - the goal is: " + GOAL
    assert reminder not in llm.prompt_texts[2]
    assert llm.prompt_texts[3].count(reminder) == 1
    assert "3 successful call(s)" in llm.prompt_texts[3].split(reminder)[1]


def test_plan_tags_fill_the_summary_and_leave_the_answer(workspace: Path) -> None:
    assert extract_plan("<plan>Current: read logs; Todo: write report</plan>Answer") == (
        "read logs",
        "write report",
        "Answer",
    )
    outputs = [
        "<plan>Current: fetch pages; Todo: compare latencies</plan>" + call("fetch_page", page=i) for i in range(4)
    ]
    llm = ScriptedLLM([*outputs, "<plan>Current: done</plan>u3"], n_ctx=5000)
    result = make_agent(llm, workspace, max_steps=6, n_ctx=5000, max_tokens=200).run(GOAL)
    assert result.answer == "u3"
    summarized = [t for t in llm.prompt_texts if "What I have done so far" in t]
    assert summarized and "Current: fetch pages" in summarized[-1] and "Todo: compare latencies" in summarized[-1]


def test_third_identical_call_in_a_row_is_refused(workspace: Path) -> None:
    llm = ScriptedLLM([call("fetch_page", page=1)] * 3 + ["ok"])
    result = make_agent(llm, workspace).run(GOAL)
    assert [c.ok for c in result.tool_calls] == [True, True, False]
    assert "same arguments 3 times in a row" in llm.prompt_texts[3]


def test_consecutive_failures_stop_the_run_with_a_final_answer(workspace: Path) -> None:
    llm = ScriptedLLM([call("no_such_tool", i=i) for i in range(5)] + ["I could not do it."])
    result = make_agent(llm, workspace, max_steps=10).run(GOAL)
    llm.assert_all_used()
    assert result.stopped == "error" and "5 steps in a row" in (result.error or "")
    assert result.answer == "I could not do it."


def test_prompt_too_small_for_the_fixed_prefix_is_an_error_not_a_crash(workspace: Path) -> None:
    llm = ScriptedLLM(["never"], n_ctx=300)
    result = make_agent(llm, workspace, n_ctx=300, max_tokens=64).run(GOAL)
    assert result.stopped == "error" and "raise --n-ctx" in (result.error or "")


def test_long_term_memory_is_recalled_once_as_a_frozen_block(workspace: Path) -> None:
    first = ScriptedLLM([call("remember", fact="The user's reports go in reports/ as Markdown"), "noted"])
    make_agent(first, workspace, allow_tools=["remember"]).run("Remember where my reports go")
    store = LongTermMemory(scope=memory_scope(load_settings({}), workspace=workspace))  # this run's owner and folder
    assert [f.text for f in store.all()] == ["The user's reports go in reports/ as Markdown"]
    assert store.all()[0].trust == "untrusted"  # pre-approved `remember`: the user never said it
    assert store.search("write the reports in markdown") and not store.search("zebra")

    second = ScriptedLLM([call("get_current_time"), "ok"])
    make_agent(second, workspace).run("Write the weekly reports in Markdown")
    for text in second.prompt_texts:
        assert text.count("reports go in reports/ as Markdown") == 1
    assert second.prompts[1][: len(second.prompts[0]) - 4] == second.prompts[0][: len(second.prompts[0]) - 4]


def test_the_final_answer_at_the_step_limit_does_not_compact_what_fits(workspace: Path) -> None:
    """Compaction starts at 75% of n_ctx to leave room for steps to come. The final call at the step limit
    has none to come: it keeps the run's KV prefix when the prompt fits (it used to compact right before
    the last call and re-evaluate most of the run)."""
    llm = ScriptedLLM([call("fetch_page", page=0), call("fetch_page", page=1), "final"], n_ctx=8000)
    result = make_agent(llm, workspace, max_steps=2, n_ctx=8000, max_tokens=64, reminder_every=0).run(GOAL)
    assert result.stopped == "max_steps" and result.answer == "final"
    final = result.llm_calls[-1].prompt_tokens
    assert 0.75 * 8000 < final + 64 < 8000  # over the compaction budget, within n_ctx
    assert result.compactions == 0
    assert llm.prompt_texts[2].startswith(llm.prompt_texts[1])  # the run's prefix, not a compacted prompt
