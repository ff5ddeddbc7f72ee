"""Rebuild a run's memory from its session log, so `Agent.resume` can continue where it stopped.

Turns come back from the logged `turn_added` events (assistant turns, calls and answers, from the logged text), the
ledger from the logged tool outcomes, and a step cut off by a crash gets its tool turn: the logged
results, then `interrupted` for a call that had started and `not run` for the rest. Completed calls
are handed to the executor so they are never run again; a write or dangerous call that timed out or
was cut off by the crash is handed over as "started, outcome unknown", so it is never re-run by itself
(the executor asks, or stops the run), and its tool turn tells the model the outcome is unknown. What the run's
team children did (their own logs) is handed over the same way (`remember_children`). This module does not run
anything, call the model or write the log.
"""

from __future__ import annotations

from hermes_local.agent.memory import Memory, Turn, TurnSink, extract_plan
from hermes_local.dialects import Dialect
from hermes_local.events import (
    AssistantText,
    Delegation,
    Event,
    RunStart,
    ToolCallStarted,
    ToolFinished,
    ToolOutcome,
    TurnAdded,
)
from hermes_local.outcome import ToolResult, abbreviate_arguments, arguments_digest
from hermes_local.prompts import Segments
from hermes_local.session import read_events, sessions_dir, valid_session_id
from hermes_local.tools.execution import Executor

INTERRUPTED = (
    "interrupted: the previous run was killed while this call was running; started, outcome unknown: "
    "check its effect before retrying"
)
NOT_STARTED = "not run: the previous run was killed before this call started; call it again if it is still needed"
STOPPED_CALLS = frozenset({INTERRUPTED, NOT_STARTED})
MAX_TEAM_DEPTH = 8  # nested delegations followed when a resumed run learns what its children did


def rebuild_memory(
    events: list[Event], start: RunStart, system: Segments, dialect: Dialect, executor: Executor, on_turn: TurnSink
) -> Memory:
    """The memory of the logged run, with every logged step answered (see the module docstring).

    Restored turns are not reported; the crashed step's new tool turn goes to `on_turn` (the log).
    """
    memory = Memory(system=system, goal=start.goal, recalled=list(start.recalled), dialect=dialect)
    tool_names = executor.registry.names()
    for e in events:
        if isinstance(e, TurnAdded):
            memory.restore_turn(Turn.from_event(e.to_dict()))
        elif isinstance(e, AssistantText):  # calls, and answers (guarded ones, a finished run's, a chat turn's)
            parsed = dialect.parse(extract_plan(e.text)[2], tool_names)
            if parsed.calls or parsed.errors or parsed.text:
                memory.restore_assistant(e.step, parsed)
    tool_steps = {t.step for t in memory.turns if t.role == "tool"}
    for e in events:
        if not isinstance(e, ToolFinished) or e.outcome.name == "invalid_tool_call":
            continue
        if e.outcome.step in tool_steps:
            memory.ledger.append(e.outcome)
        if e.outcome.ok:
            executor.remember_done(e.outcome.digest, e.outcome.result)
        elif e.outcome.error_kind == "timeout" and _writes(executor, e.outcome.name):
            executor.remember_unknown(e.outcome.digest)  # it may have done its work before the limit
    remember_children(events, executor)
    memory.on_turn = on_turn
    if memory.turns and memory.turns[-1].role == "assistant":
        _settle_interrupted_step(memory, memory.turns[-1].step, events, dialect, executor)
    return memory


def remember_children(events: list[Event], executor: Executor, depth: int = 0) -> None:
    """Hand the executor what the run's team children did (their logs, through the `Delegation`s, nested): a
    finished call is done, and a call a child started but never finished (a kill) or that timed out is "started,
    outcome unknown". So a write a specialist finished is never repeated by the resumed run, whichever agent of it
    asks again (the executors of a team share them: `Executor.join`)."""
    seen: set[str] = set()
    for link in (e for e in events if isinstance(e, Delegation)):
        path = sessions_dir() / f"{link.child}.jsonl"
        if link.child in seen or depth >= MAX_TEAM_DEPTH or not valid_session_id(link.child) or not path.is_file():
            continue
        seen.add(link.child)
        child = read_events(path)
        finished = {e.outcome.digest for e in child if isinstance(e, ToolFinished)}
        for e in child:
            if isinstance(e, ToolFinished) and e.outcome.ok:
                executor.remember_done(e.outcome.digest, e.outcome.result)
            elif isinstance(e, ToolFinished) and e.outcome.error_kind == "timeout":
                executor.remember_unknown(e.outcome.digest)
            elif isinstance(e, ToolCallStarted) and abbreviate_arguments(e.arguments) == e.arguments:
                digest = arguments_digest(e.name, e.arguments)
                if digest not in finished:
                    executor.remember_unknown(digest)  # cut off by the kill: it may have done its work
        remember_children(child, executor, depth + 1)


def _writes(executor: Executor, name: str) -> bool:
    t = executor.registry.get(name)
    return t is not None and t.permission != "read"


def _settle_interrupted_step(
    memory: Memory, step: int, events: list[Event], dialect: Dialect, executor: Executor
) -> None:
    """Give the last logged step its tool turn: logged results, or interrupted/not-started errors."""
    text = next(e.text for e in reversed(events) if isinstance(e, AssistantText) and e.step == step)
    parsed = dialect.parse(extract_plan(text)[2], executor.registry.names())
    if not parsed.calls and not parsed.errors:
        return  # an answer (a chat turn, or a continued run's): nothing was interrupted
    started = [e for e in events if isinstance(e, ToolCallStarted) and e.step == step]
    finished = [e.outcome for e in events if isinstance(e, ToolFinished) and e.outcome.step == step]
    outcomes: list[ToolOutcome] = []
    for i, call in enumerate(parsed.calls):
        if i < len(finished):
            res = finished[i].result
        elif i < len(started):
            res = ToolResult.failure("tool_error", INTERRUPTED, "started, outcome unknown: interrupted by a crash")
            if _writes(executor, call.name):
                executor.remember_unknown(ToolOutcome(step, call.name, call.arguments, res).digest)
        else:
            res = ToolResult.failure("tool_error", NOT_STARTED, "not run (crash)")
        outcomes.append(ToolOutcome(step, call.name, call.arguments, res))
    memory.add_tool_results(step, outcomes)


def memory_at_step(
    events: list[Event], step: int, system: Segments, dialect: Dialect, executor: Executor
) -> Memory | None:
    """The memory as the loop held it when it asked the model at `step` (for `prompt --session ID --step N`):
    every logged turn up to that step's reply, its own notes (a goal reminder) included. None when the log
    has no model reply at `step`. Runs and logs nothing (the executor only learns which calls were done)."""
    start = next((e for e in events if isinstance(e, RunStart)), None)
    cut = next((i for i, e in enumerate(events) if isinstance(e, AssistantText) and e.step == step), None)
    if start is None or cut is None:
        return None
    memory = rebuild_memory(events[:cut], start, system, dialect, executor, lambda turn: None)
    memory.on_turn = None
    return memory
