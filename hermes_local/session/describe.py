"""How a session's events read to a person: `describe_event` (one terminal-safe line per event, as a terminal shows
them live: `SHOWN_LIVE`), `describe_reply` (what the model wrote at a step, part by part, as the call parser reads
it) and `describe_events` (`sessions show`: a team run's child sessions as a tree). Reads logs through `log.py`;
writes nothing and prints nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hermes_local.events import (
    Applied,
    AssistantText,
    BudgetWarning,
    Compaction,
    Delegation,
    Event,
    Guarded,
    HookRan,
    LLMCall,
    McpServerFailed,
    Proposal,
    Rating,
    Reasoning,
    Redecoded,
    RehearsedCall,
    Routed,
    RunEnd,
    RunResumed,
    RunStart,
    StepStart,
    ToolCallStarted,
    ToolFinished,
)
from hermes_local.session.log import read_events, sessions_dir, valid_session_id
from hermes_local.textsafe import terminal_safe


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return terminal_safe(flat if len(flat) <= limit else flat[:limit] + "…")


_PLAN = re.compile(r"<plan>(.*?)(?:</plan>|$)", re.S | re.I)


def _dropped_parts(e: AssistantText) -> list[tuple[str, str]]:
    """The reply's dropped parts as (why, text); a tampered log's odd entries are left out."""
    pairs = e.dropped if isinstance(e.dropped, list) else []
    return [(str(p[0]), str(p[1])) for p in pairs if isinstance(p, list | tuple) and len(p) == 2]


def describe_reply(e: AssistantText) -> str:
    """What the model wrote at a step, part by part as the call parser reads it (every family's thought markers
    and call syntaxes): thought, plan, each call, the text left for the user, and each dropped part (a made-up
    tool result, stray markup, a parroted answer, ...) marked as dropped, never shown as text or call."""
    from hermes_local.calls.parse import parse_tool_calls

    parsed = parse_tool_calls(_PLAN.sub(" ", e.text))
    dropped = _dropped_parts(e) or parsed.dropped  # logs from before `dropped` was recorded: the parser's
    lines = [f"   thought: {_one_line(parsed.reasoning, 2000)}"] if parsed.reasoning else []
    lines += [f"   plan: {_one_line(m.group(1), 2000)}" for m in _PLAN.finditer(e.text)]
    for c in parsed.calls:
        call = json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False, default=str)
        lines.append(f"   call: {_one_line(call, 2000)}")
    if parsed.text and all(part != parsed.text for _, part in dropped):
        lines.append(f"   {'final answer' if e.final else 'text'}: {_one_line(parsed.text, 2000)}")
    lines += [f"   dropped ({_one_line(why, 80)}): {_one_line(part, 2000)}" for why, part in dropped]
    return "\n".join(lines) if lines else "   (the model wrote nothing)"


# The kinds a terminal shows as they happen (`describe_event` lines), a team run's routing and delegations included.
SHOWN_LIVE: tuple[type[Event], ...] = (StepStart, LLMCall, ToolCallStarted, ToolFinished, RehearsedCall, Guarded)
SHOWN_LIVE += (BudgetWarning, Compaction, Routed, Delegation, HookRan, Redecoded)


def describe_event(e: Event) -> str | None:
    """One terminal-safe line for an event (None for kinds not worth showing, such as tokens)."""
    if isinstance(e, RunStart):
        calls = f", {_one_line(e.tool_call_format, 20)} calls" if e.tool_call_format else ""
        fmt = f"  (dialect {_one_line(e.dialect, 40)}{calls})" if e.dialect else ""
        recalled = "".join(f"\n   recalled (long-term memory, into the prompt): {_one_line(r)}" for r in e.recalled)
        return f"goal: {_one_line(e.goal)}{fmt}{recalled}"
    if isinstance(e, RunResumed):
        return f"resumed: {_one_line(e.goal)}"
    if isinstance(e, StepStart):
        return f"── step {e.step}"
    if isinstance(e, LLMCall):
        return (
            f"   model: {e.prompt_tokens} prompt tokens ({e.prompt_tokens_evaluated} evaluated), "
            f"{e.completion_tokens} generated, {float(e.seconds):.2f}s"
        )
    if isinstance(e, ToolCallStarted):
        return f"   → {_one_line(e.name, 80)}({_one_line(json.dumps(e.arguments, ensure_ascii=False, default=str))})"
    if isinstance(e, ToolFinished):
        cached = " (cached)" if e.outcome.result.cached else ""
        rule = f"  [{_one_line(e.outcome.result.rule, 200)}]" if e.outcome.result.rule else ""
        return f"     {'✓' if e.outcome.ok else '✗'} {_one_line(e.outcome.summary)}{cached}{rule}"
    if isinstance(e, AssistantText):
        return describe_reply(e)
    if isinstance(e, Reasoning):
        return f"   thought: {_one_line(e.text)}"
    if isinstance(e, RehearsedCall):
        args = _one_line(json.dumps(e.arguments, ensure_ascii=False, default=str))
        return f"   (not run: {_one_line(e.name, 80)}({args}) was only written inside the thought)"
    if isinstance(e, Redecoded):
        then = f"re-decoded as {_one_line(e.text, 2000)}" if e.ok else "no valid call again: kept the text before it"
        return f"   (unreadable call replaced: {_one_line(e.replaced, 2000)} — {then})"
    if isinstance(e, Guarded):
        if what := {"empty": "an empty reply", "echoed": "a reply of only a made-up tool result"}.get(e.reason):
            return f"   (dropped: {what} was sent back" + (f"; asked for {_one_line(e.tool, 80)})" if e.tool else ")")
        why = {
            "no_success": "no call had succeeded",
            "figures": "figures in no tool result",
            "files": "a file no call used",
            "repeated": "a repeat",
        }
        needs = f"the goal needs a tool such as {_one_line(e.tool, 80)}"
        return f"   (dropped: the answer above was sent back: {why.get(e.reason, needs)})"
    if isinstance(e, BudgetWarning):
        return f"   (warning: {_one_line(e.message)})"
    if isinstance(e, Compaction):
        return f"   (memory compacted through step {e.through_step})"
    if isinstance(e, McpServerFailed):
        error = e.error if e.server in e.error else f"MCP server {e.server}: {e.error}"
        return f"   ({_one_line(error)}; the run went on without its tools)"
    if isinstance(e, RunEnd):
        evidence = f" ({_one_line(e.result['evidence'])})" if e.result.get("evidence") else ""
        outcome = f"outcome: {_one_line(e.result['outcome'], 20)}{evidence}; " if e.result.get("outcome") else ""
        return f"{outcome}stopped: {_one_line(e.stopped)}; answer: {_one_line(e.answer, 2000)}"
    if isinstance(e, Proposal):  # a specialist's, in its caller's log, is labelled
        args, who = _one_line(json.dumps(e.arguments, ensure_ascii=False, default=str)), _one_line(e.agent, 40)
        who = f"[{who}] " if who else ""
        return f"   ({who}proposed, not run: {_one_line(e.name, 80)}({args}); `sessions apply` runs it)"
    if isinstance(e, Applied) and e.outcome is not None:
        mark = "✓" if e.outcome.get("ok") is True else "✗"
        return f"applied proposal {e.index}: {mark} {_one_line(e.outcome.get('summary', ''))}"
    if isinstance(e, Rating):
        return f"rated {_one_line(e.verdict, 10)}" + (f": {_one_line(e.note)}" if e.note else "")
    if isinstance(e, Routed):
        kept = f" with {_one_line(', '.join(e.toolsets), 200) or 'no toolsets'}" if e.toolsets is not None else ""
        return f"routed ({_one_line(e.router, 12)}) to {_one_line(e.chosen, 40)}{kept}: {_one_line(e.reason)}"
    if isinstance(e, HookRan):
        reason = f": {_one_line(e.reason, 300)}" if e.reason else ""
        on = f" {_one_line(e.tool, 80)}" if e.tool else ""
        return f"   hook {_one_line(e.hook, 60)} ({_one_line(e.event, 20)}{on}): {_one_line(e.decision, 10)}{reason}"
    if isinstance(e, Delegation):
        who, task = _one_line(e.agent, 40), _one_line(e.task, 200)
        if e.status:
            return f"   ⇠ {who} ended: {_one_line(e.status, 20)}  (session {_one_line(e.child, 120)})"
        return f"   ⇢ delegated to {who}: {task}  (session {_one_line(e.child, 120)})"
    return None


def delegations(path: Path) -> list[dict[str, Any]]:
    """The ended delegations a session's log records (agent, task, child session, status), for `run --json`."""
    ended = [e for e in read_events(path) if isinstance(e, Delegation) and e.status and e.parent == path.stem]
    return [{"agent": e.agent, "task": e.task, "child": e.child, "status": e.status} for e in ended]


def describe_events(events: list[Event], *, depth: int = 0) -> list[str]:
    """Human-readable lines for `sessions show` (a step's thought once: its reply's lines already show it); a team
    run's child sessions as a tree, each child's lines indented under the delegation that started it (`depth`:
    how deep this log is in the tree)."""
    replied: set[int] = set()
    lines: list[str] = []
    shown: set[str] = set()  # a resumed delegation starts its child again: show the child once
    for e in events:
        if isinstance(e, AssistantText):
            replied.add(e.step)
        elif isinstance(e, Reasoning) and e.step in replied:
            continue
        if isinstance(e, Delegation) and depth and e.parent and not e.status and not lines:
            lines.append(f"child of session {_one_line(e.parent, 120)} ({_one_line(e.agent, 40)})")
            continue
        if (line := describe_event(e)) is not None:
            lines.append(line)
        path = sessions_dir() / f"{e.child}.jsonl" if isinstance(e, Delegation) and not e.status else None
        if path is not None and path.stem not in shown and depth < 4 and valid_session_id(path.stem):
            if path.is_file():
                shown.add(path.stem)
                lines += ["      │ " + child for child in describe_events(read_events(path), depth=depth + 1)[1:]]
    return lines
