"""One turn's tool calls, run for the loop, and the check that a final answer is not a parroted request.

`execute_turn` runs the calls of one model reply: the loop guard first (in call order), then the
executor through `execution.run_grouped` (consecutive reads concurrently, everything else alone and
in order), one `ToolOutcome` per call in call order, a `ToolCallStarted`/`ToolFinished` event each (and a
`Proposal` before the `ToolFinished` of a plan-only run's proposed call).
`bounce_final_answers` answers a turn of only `final_answer` calls that the answer guard sends back.
`is_parroted(answer, request)` tells a reply that only repeats the loop's own request (the step-limit
"reply now with your final answer" note a small model copies back) from an answer. Does not call the
model or touch the memory (the loop does).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hermes_local.agent.guards import LoopGuard, bounce_note
from hermes_local.agent.result import RunResult
from hermes_local.calls.parse import ToolCall
from hermes_local.events import Event, Guarded, Proposal, ToolCallStarted, ToolFinished, ToolOutcome
from hermes_local.outcome import ToolResult
from hermes_local.tools.execution import Executor, run_grouped
from hermes_local.tools.registry import Tool


def execute_turn(
    executor: Executor,
    loop_guard: LoopGuard,
    on_event: Callable[[Event], None],
    step: int,
    calls: list[ToolCall],
    result: RunResult,
    cut: ToolCall | None = None,
) -> list[ToolOutcome]:
    """Run one turn's calls: guarded in order, reads concurrently, outcomes in call order (also appended to
    `result.tool_calls`).

    `cut` is the call the output limit cut off (closing mode ended it): the executor refuses it
    when it writes, and its outcome is marked truncated.
    """
    refusals: list[str | None] = []
    pending: list[str] = []
    for call in calls:
        refusal = loop_guard.refusal(result.tool_calls, pending, call.name, call.arguments)
        refusals.append(refusal)
        if refusal is None:
            pending.append(ToolOutcome(step, call.name, call.arguments, ToolResult(True, "")).digest)

    def job(i: int) -> Callable[[], ToolResult]:
        refusal, call = refusals[i], calls[i]
        if refusal is not None:
            return lambda: ToolResult.failure("loop", refusal, "refused: looping")
        return lambda: executor.execute(call.name, call.arguments, truncated=call is cut)

    def finish(i: int, res: ToolResult) -> None:
        outcome = ToolOutcome(step, calls[i].name, calls[i].arguments, res, truncated=calls[i] is cut)
        result.tool_calls.append(outcome)
        outcomes.append(outcome)
        if res.approval == "proposed":  # a plan-only run: the call, whole, for `sessions apply`
            on_event(Proposal(step, calls[i].name, calls[i].arguments))
        on_event(ToolFinished(outcome))

    outcomes: list[ToolOutcome] = []
    run_grouped(
        [job(i) for i in range(len(calls))],
        [refusals[i] is None and executor.concurrent(c.name) for i, c in enumerate(calls)],
        before=lambda i: on_event(ToolCallStarted(step, calls[i].name, calls[i].arguments, calls[i] is cut)),
        after=finish,
    )
    return outcomes


def bounce_final_answers(
    step: int,
    calls: list[ToolCall],
    tool: Tool | None,
    result: RunResult,
    on_event: Callable[[Event], None],
    note: str = "",
    reason: str = "no_tool",
) -> list[ToolOutcome]:
    """A turn of only final_answer calls that the answer guard sends back (naming `tool`, with `note`): the
    bounce is listed in `result.guarded`, each call answered with the corrective note (error_kind `guarded`),
    appended to `result.tool_calls` and reported; the outcomes are returned for the loop to put in memory."""
    name = tool.name if tool is not None else ""
    result.guarded.append({"step": step, "reason": reason, "tool": name or None})
    on_event(Guarded(step, name, str(calls[0].arguments.get("answer", "")), reason))
    bounced = ToolResult.failure("guarded", note or bounce_note(tool), "answer bounced: nothing backs it yet")
    outcomes = [ToolOutcome(step, c.name, c.arguments, bounced) for c in calls]
    for outcome in outcomes:
        result.tool_calls.append(outcome)
        on_event(ToolFinished(outcome))
    return outcomes


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def is_parroted(answer: str, request: str) -> bool:
    """Whether `answer` is mostly the words of `request` (the loop's own note, copied back)."""
    said, asked = _words(answer), set(_words(request))
    if not said:
        return True
    copied = sum(1 for w in said if w in asked)
    return copied / len(said) >= 0.7 and copied >= 5
