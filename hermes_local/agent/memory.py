"""What the agent remembers during a run: the action ledger, the rolling summary and the history.

`Memory.messages()` lays the prompt out for KV-cache reuse: a byte-stable prefix (system + tools,
goal, recalled facts), then the summary of compacted steps, then recent turns appended in order.
The ledger records every tool call with its outcome, so the "what have I done" summary
(`Completed / Current / Todo`) never depends on the model paraphrasing; `<plan>` notes from the
model fill Current/Todo and say what each step was for. A tool turn adds the results and only what
the context does not already hold: the plan when it changed (the model's `<plan>` is not kept in
its own turn). Each call's key finding (`ledger.py`) is written where it replaces something: in a
result cut or summarised by compaction, in the summary of folded steps, and in the periodic goal
reminder (`reminder_note()`), never again a few lines under the result it came from, so each step
costs its result, its call and a few framing tokens. `fit()` compacts history to a token budget; `fit_prompt`
decides that budget for one model call (and refuses a fixed prompt that cannot fit: `ContextTooSmall`).
Does not call the model or run tools; it only lays out text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes_local.agent.ledger import finding, ledger_lines
from hermes_local.calls.parse import ParseResult, ToolCall
from hermes_local.dialects.base import Dialect, result_content
from hermes_local.dialects.hermes import HermesDialect
from hermes_local.events import ToolOutcome
from hermes_local.prompts import Segment, Segments, render

TurnSink = Callable[["Turn"], None]
_PLAN = re.compile(r"<plan>(.*?)(?:</plan>|$)", re.S | re.I)
_PLAN_FIELD = re.compile(r"(current|todo)\s*:\s*(.*?)(?=(?:current|todo)\s*:|$)", re.S | re.I)
RESULT_CAPS = (4000, 1500, 500, 160)  # successive cuts of one oversized tool result (characters)


def extract_plan(text: str) -> tuple[str | None, str | None, str]:
    """(current, todo, text without the <plan> block) from a reply."""
    m = _PLAN.search(text)
    if not m:
        return None, None, text
    body = " ".join(m.group(1).split())
    fields = {k.lower(): v.strip(" ;.") for k, v in _PLAN_FIELD.findall(body)}
    current = fields.get("current") or (body if not fields else None)
    return current, fields.get("todo"), (text[: m.start()] + text[m.end() :]).strip()


@dataclass
class Turn:
    """One message after the fixed prefix. Tool turns keep their responses so they can be shrunk."""

    role: str
    step: int
    content: Segments
    responses: list[dict[str, Any]] | None = None
    cap: int | None = None  # characters of data kept per response after shrinking; None = all
    summarized: bool = False
    note: Segments | None = None  # what closes a tool turn after its results (the changed plan); kept on reshaping

    def to_event(self) -> dict[str, Any]:
        event = {
            "role": self.role,
            "step": self.step,
            "content": [[s.text, s.trusted] for s in self.content],
            "responses": self.responses,
        }
        if self.note is not None:
            event["note"] = [[s.text, s.trusted] for s in self.note]
        return event

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> Turn:
        segs = Segments(Segment(text, bool(trusted)) for text, trusted in event["content"])
        raw_note = event.get("note")
        note = Segments(Segment(text, bool(trusted)) for text, trusted in raw_note) if raw_note else None
        return cls(event["role"], int(event["step"]), segs, event.get("responses"), note=note)


def _render_responses(
    dialect: Dialect, step: int, responses: list[dict[str, Any]], cap: int | None, summarized: bool
) -> Segments:
    """The dialect's results turn; `responses` hold {"name", "content": ToolResult envelope}."""
    shown = []
    for r in responses:
        envelope = r["content"]
        content = result_content(envelope)
        key = r.get("finding")  # the call's key finding, written where the result no longer shows it whole
        if summarized:
            content = f"[compacted] {key or envelope.get('summary')}" if envelope.get("ok") else content
        elif cap is not None and envelope.get("ok"):
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
            if len(text) > cap:
                found = f"; key line: {key}" if key else ""
                notice = f"[... {len(text) - cap} characters cut to fit the context{found} ...]"
                content = f"{text[: cap * 2 // 3]}\n{notice}\n{text[-(cap // 3) :]}"
        shown.append({"name": r["name"], "content": content})
    return dialect.tool_results(step, shown)


@dataclass
class Memory:
    """The history of one run: fixed prefix, ledger, turns and compaction state."""

    system: Segments
    goal: str
    recalled: list[str] = field(default_factory=list)
    ledger: list[ToolOutcome] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    compacted_through_step: int = 0
    plan_current: str = ""
    plan_todo: str = ""
    summary_detail: int = 12  # ledger entries shown with their findings in the summary; older ones shortened
    reminder_detail: int = 3  # ledger entries shown with their findings in the goal reminder; older ones grouped
    purposes: dict[int, str] = field(default_factory=dict)  # step -> what the model said it was for
    on_turn: TurnSink | None = None
    dialect: Dialect = field(default_factory=HermesDialect)
    _plan_shown: tuple[str, str] = ("", "")  # the plan as last written into a tool turn
    _reminded_through: int = 0  # the last step a goal reminder listed

    # -- recording -------------------------------------------------------------------------
    def _append(self, turn: Turn) -> None:
        self.turns.append(turn)
        if self.on_turn:
            self.on_turn(turn)

    def add_assistant(self, step: int, text: str, calls: list[ToolCall]) -> None:
        """Store the reply with its calls in the dialect's canonical form (trusted tags, untrusted JSON)."""
        self._append(Turn("assistant", step, self.dialect.assistant_content(step, text, calls)))

    def add_reply(self, step: int, parsed: ParseResult) -> None:
        """Store a parsed reply: its text and calls, and its thought where the dialect keeps past thoughts."""
        self._append(Turn("assistant", step, self._reply(step, parsed)))

    def _reply(self, step: int, parsed: ParseResult) -> Segments:
        return self.dialect.reply_content(step, parsed.text, parsed.calls, parsed.reasoning, parsed.thought_markers)

    def restore_assistant(self, step: int, parsed: ParseResult) -> None:
        """Put back an assistant turn rebuilt from a session log (no event is emitted)."""
        self.turns.append(Turn("assistant", step, self._reply(step, parsed)))

    def add_tool_results(self, step: int, outcomes: list[ToolOutcome]) -> None:
        """The step's results, then only what the context lacks: the plan, when the model changed it."""
        responses = []
        for o in outcomes:
            responses.append({"name": o.name, "content": o.result.envelope(), "finding": finding(o, self.goal)})
            self.ledger.append(o)
        note = self.plan_note()
        content = _render_responses(self.dialect, step, responses, None, False)
        if note is not None:
            content = content + note
        self._append(Turn("tool", step, content, responses, note=note))

    def add_user_note(self, step: int, content: Segments) -> None:
        self._append(Turn("user", step, content))

    def restore_turn(self, turn: Turn) -> None:
        """Put back a turn read from a session log (no event is emitted)."""
        self.turns.append(turn)

    def plan_note(self) -> Segments | None:
        """The plan, once per change: the reply's `<plan>` is not kept in its turn, so this is its only copy."""
        plan = (self.plan_current, self.plan_todo)
        if not any(plan) or plan == self._plan_shown:
            return None
        self._plan_shown = plan
        return render("progress.jinja", current=self.plan_current, todo=self.plan_todo)

    def note_plan(self, current: str | None, todo: str | None, step: int | None = None) -> None:
        if current:
            self.plan_current = current
            if step is not None:
                self.purposes[step] = current
        if todo:
            self.plan_todo = todo

    # -- layout ----------------------------------------------------------------------------
    def summary_block(self) -> Segments:
        folded = [e for e in self.ledger if e.step <= self.compacted_through_step]
        completed = ledger_lines(folded, self.goal, self.purposes, self.summary_detail, max(4, 2 * self.summary_detail))
        return render(
            "summary.jinja",
            completed=completed,
            current=self.plan_current or "continue toward the goal",
            todo=self.plan_todo or "whatever the goal still needs",
        )

    def reminder_note(self) -> Segments:
        """The periodic goal reminder with the "what have I done" summary: the steps since the previous
        reminder with their findings, and one counted line for the older unfolded ones (an earlier reminder
        lists them in full; the compaction summary covers the folded ones). Its size stays bounded."""
        unfolded = [e for e in self.ledger if e.step > self.compacted_through_step]
        since = sum(1 for e in unfolded if e.step > self._reminded_through)
        self._reminded_through = max((e.step for e in self.ledger), default=self._reminded_through)
        lines = ledger_lines(unfolded, self.goal, self.purposes, since, max_short=0)
        return render(
            "goal_reminder.jinja",
            goal=self.goal,
            progress=self.progress_line(),
            lines=lines,
            current=self.plan_current,
            todo=self.plan_todo,
        )

    def progress_line(self) -> str:
        """How many calls worked so far (the reminder's lines say which)."""
        done = [e for e in self.ledger if e.ok]
        if not done:
            return "no successful tool calls yet"
        return f"{len(done)} successful call(s) of {len(self.ledger)}"

    def messages(self) -> list[dict[str, Any]]:
        """The conversation for the dialect. A user note (recalled facts, summary, reminder, final-answer
        request) joins the turn before it when that is a user turn or a results turn the dialect lets it
        join, so no run of user turns and no user turn between results and the reply is created."""
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": Segments.untrusted(self.goal)},
        ]
        notes = []
        if self.recalled:
            notes.append(render("recalled.jinja", facts=self.recalled))
        if self.compacted_through_step:
            notes.append(self.summary_block())
        notes_turns = [{"role": "user", "content": n} for n in notes]
        visible = [{"role": t.role, "content": t.content} for t in self.turns if t.step > self.compacted_through_step]
        for msg in notes_turns + visible:
            if msg["role"] == "user" and msgs[-1]["role"] in self.dialect.user_joins:
                joined = msgs[-1]["content"] + Segments.untrusted("\n\n") + msg["content"]
                msgs[-1] = {"role": msgs[-1]["role"], "content": joined}
            else:
                msgs.append(msg)
        return msgs

    # -- compaction ------------------------------------------------------------------------
    def _visible(self) -> list[Turn]:
        return [t for t in self.turns if t.step > self.compacted_through_step]

    def _reshape(self, turn: Turn, *, cap: int | None = None, summarized: bool = False) -> bool:
        if turn.responses is None or turn.summarized or (cap is not None and turn.cap is not None and turn.cap <= cap):
            return False
        turn.cap, turn.summarized = cap, summarized
        turn.content = _render_responses(self.dialect, turn.step, turn.responses, cap, summarized)
        if turn.note is not None:  # the plan may be its only copy in the context
            turn.content = turn.content + turn.note
        return True

    def compaction_moves(self, keep_steps: int = 2) -> list[Callable[[], bool]]:
        """Ever stronger ways to shrink the prompt, tried in order by `fit()`.

        Old raw results become one-line summaries first; then oversized recent results are cut to a
        head and tail; then whole old steps fold into the summary; last, the summary itself shrinks.
        """

        def action_steps() -> list[int]:
            return sorted({t.step for t in self._visible() if t.role in ("assistant", "tool")})

        def summarize_old_results() -> bool:
            recent = action_steps()[-keep_steps:]
            return any([self._reshape(t, summarized=True) for t in self._visible() if t.step not in recent])

        def fold(keep: int) -> Callable[[], bool]:
            def move() -> bool:
                steps = action_steps()
                if len(steps) <= keep:
                    return False
                self.compacted_through_step = steps[-keep - 1]
                return True

            return move

        def cut(cap: int) -> Callable[[], bool]:
            return lambda: any([self._reshape(t, cap=cap) for t in self._visible()])

        def shorten_summary() -> bool:
            if self.summary_detail == 0:
                return False
            self.summary_detail //= 2
            return True

        return [
            summarize_old_results,
            *(cut(c) for c in RESULT_CAPS[:2]),
            fold(keep_steps),
            fold(1),
            *(cut(c) for c in RESULT_CAPS[2:]),
            shorten_summary,
        ]

    def fit(self, measure: Callable[[], int], limit: int, target: int) -> int:
        """Compact until `measure()` <= `target` (or nothing is left to do); returns the final size.

        Runs only when the prompt is over `limit`; compacting down to `target` (< limit) leaves room
        for several appended steps before the next compaction, so the KV prefix stays reusable.
        """
        size = measure()
        if size <= limit:
            return size
        for move in self.compaction_moves():
            while size > target and move():
                size = measure()
            if size <= target:
                break
        return size


class ContextTooSmall(Exception):  # noqa: N818 - caught inside the loop; ends the run with stopped="error"
    """The fixed prompt (system, tools, goal) alone does not fit n_ctx."""


def fit_prompt(
    memory: Memory, measure: Callable[[], list[int]], n_ctx: int, max_new: int, budget_fraction: float,
    compact_to_fraction: float, *, last: bool) -> tuple[list[int], int, bool]:  # fmt: skip
    """The prompt's tokens within budget (compacting `memory` if needed), the max_tokens left, and whether it
    compacted. Compaction starts at `budget_fraction` of n_ctx, to leave room for the steps still to come. The
    `last` call of a run (the final answer at the step limit) has none to come: it compacts only what does not
    fit, and keeps the KV prefix of the whole run instead of re-evaluating it."""
    limit = int(n_ctx * budget_fraction) - max_new
    target = int(n_ctx * compact_to_fraction) - max_new
    if last:
        limit = target = n_ctx - max_new - 1
    before = memory.compacted_through_step, [(t.cap, t.summarized) for t in memory.turns]
    measured: list[int] = []

    def measured_now() -> int:
        measured[:] = measure()
        return len(measured)

    memory.fit(measured_now, limit, max(target, 1))  # its last measurement is of the final layout
    compacted = (memory.compacted_through_step, [(t.cap, t.summarized) for t in memory.turns]) != before
    room = n_ctx - len(measured) - 1
    if room < 16:
        raise ContextTooSmall(
            f"the prompt needs {len(measured)} tokens but n_ctx is {n_ctx}; raise --n-ctx or shorten the task"
        )
    return measured, min(max_new, room), compacted
