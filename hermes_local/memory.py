"""What the agent remembers during a run: the action ledger, the rolling summary and the history.

`Memory.messages()` lays the prompt out for KV-cache reuse: a byte-stable prefix (system + tools,
goal, recalled facts), then the summary of compacted steps, then recent turns appended in order.
The ledger records every tool call with its outcome, so the "what have I done" summary never
depends on the model paraphrasing. Does not call the model or run tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hermes_local.parsing import ToolCall
from hermes_local.prompts import Segment, Segments, render
from hermes_local.tools.registry import ToolResult


@dataclass
class LedgerEntry:
    step: int
    name: str
    arguments: dict[str, Any]
    ok: bool
    summary: str
    error_kind: str | None = None

    def line(self) -> str:
        args = json.dumps(self.arguments, ensure_ascii=False, default=str)
        if len(args) > 80:
            args = args[:80] + "…"
        status = "ok" if self.ok else f"failed ({self.error_kind})"
        return f"step {self.step}: {self.name}({args}) {status}: {self.summary}"


@dataclass
class Turn:
    """One message after the fixed prefix. `summary_only` content replaces `content` after compaction."""

    role: str
    content: Segments
    step: int
    compact_content: Segments | None = None


@dataclass
class Memory:
    system: Segments
    goal: str
    recalled: list[str] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    compacted_through_step: int = 0
    plan_current: str = ""
    plan_todo: str = ""

    # -- recording -------------------------------------------------------------------------
    def add_assistant(self, step: int, text: str, calls: list[ToolCall]) -> None:
        """Store the reply with calls in canonical form (trusted tags, untrusted JSON)."""
        segs: list[Segment] = []
        if text:
            segs.append(Segment(text + ("\n" if calls else ""), False))
        for i, call in enumerate(calls):
            body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
            segs += [Segment("<tool_call>\n", True), Segment(body, False), Segment("\n</tool_call>", True)]
            if i < len(calls) - 1:
                segs.append(Segment("\n", True))
        self.turns.append(Turn("assistant", Segments(segs), step))

    def add_tool_results(self, step: int, results: list[tuple[str, dict[str, Any], ToolResult]]) -> None:
        responses = []
        compact = []
        for name, arguments, result in results:
            responses.append({"name": name, "content": result.envelope()})
            compact.append({"name": name, "content": {"ok": result.ok, "summary": result.summary}})
            self.ledger.append(LedgerEntry(step, name, arguments, result.ok, result.summary, result.error_kind))
        self.turns.append(
            Turn(
                "tool",
                render("tool_response.jinja", responses=responses),
                step,
                compact_content=render("tool_response.jinja", responses=compact),
            )
        )

    def add_user_note(self, step: int, content: Segments) -> None:
        self.turns.append(Turn("user", content, step))

    # -- layout ----------------------------------------------------------------------------
    def summary_block(self) -> Segments:
        completed = [e.line() for e in self.ledger if e.step <= self.compacted_through_step]
        return render(
            "summary.jinja",
            completed=completed,
            current=self.plan_current or "continue toward the goal",
            todo=self.plan_todo or "whatever the goal still needs",
        )

    def progress_line(self) -> str:
        done = [e for e in self.ledger if e.ok]
        if not done:
            return "no successful tool calls yet"
        return "; ".join(f"{e.name} ok" for e in done[-6:])

    def messages(self) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": Segments.untrusted(self.goal)},
        ]
        if self.recalled:
            msgs.append({"role": "user", "content": render("recalled.jinja", facts=self.recalled)})
        if self.compacted_through_step:
            msgs.append({"role": "user", "content": self.summary_block()})
        for turn in self.turns:
            if turn.step <= self.compacted_through_step:
                continue
            msgs.append({"role": turn.role, "content": turn.content})
        return msgs
