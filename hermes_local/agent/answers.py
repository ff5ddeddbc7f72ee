"""The answer guard: whether a reply without tool calls may end the run, or goes back to the model once.

`AnswerGuard.tool_needed` is the guard's own test (`guards.tool_needed`: the goal needs a tool and none has
answered yet); the loop also uses it to start step 1 with the call grammar on. `answer_or_bounce` takes a reply
without calls: the answer, or one bounce (`check_answer`: no call made or none succeeded on a goal that needs one,
figures found in no tool result, or a file the goal names that no call used) with a note naming what is missing
(and an empty or made-up-result reply is sent back once; the second ends the run with stopped "empty"). What the
accepted answer still lacks is said by its outcome (`evidence.judge`), never hidden. `bounce_final_answer` does the
same for a `required`-mode turn of only `final_answer` calls. Split from `loop.py`; does not call the model (the
loop does).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from hermes_local.agent.evidence import (
    CANNOT,
    CHANGE_WORDS,
    Need,
    no_success_line,
    real_calls,
    same_answer,
    unsupported_figures,
    unused_files,
)
from hermes_local.agent.guards import bounce_note, candidates, tool_needed
from hermes_local.agent.memory import Memory
from hermes_local.agent.result import ANSWER_BOUNCES, AgentConfig, RunResult
from hermes_local.agent.resume import STOPPED_CALLS
from hermes_local.agent.turn import bounce_final_answers
from hermes_local.calls.parse import ParseResult, ToolCall
from hermes_local.events import Event, Guarded
from hermes_local.prompts import Segments
from hermes_local.tools.builtin.interaction import FINAL_ANSWER
from hermes_local.tools.registry import Tool, ToolRegistry


@dataclass
class AnswerGuard:
    """The agent's answer guard: its settings, the run's tools and where its events go."""

    config: AgentConfig
    registry: Callable[[], ToolRegistry]
    on_event: Callable[[Event], None]
    need: Need = field(default_factory=Need)  # what this run's goal needs (the loop sets it as it starts)

    def answer_or_bounce(self, memory: Memory, step: int, parsed: ParseResult, result: RunResult) -> bool | None:
        """A reply without calls: accept it (None; the run ends), or send it back once (whether the next step
        must call a tool). An empty reply, or one that was only a made-up tool result, is never an answer:
        sent back once, and the second ends the run with stopped="empty"."""
        detail = ""
        if parsed.text.strip():
            reason, tool, detail = self.check_answer(memory, result, parsed.text)
            if reason is None:
                result.answer, result.stopped = parsed.text, "answer"
                return None
        else:
            if result.bounced("empty", "echoed"):
                result.answer, result.stopped = None, "empty"
                result.error = "the model gave an empty reply again after it was asked for an answer"
                return None
            reason = "echoed" if parsed.echoed else "empty"
            tool = self.tool_needed(memory, result, again=True)
        name = tool.name if tool else None
        result.guarded.append({"step": step, "reason": reason, "tool": name})
        result.sent_back.append(parsed.text)
        self.on_event(Guarded(step, name or "", parsed.text, reason))
        memory.add_reply(step, parsed)
        memory.add_user_note(step, Segments.untrusted(bounce_note(tool, reason, detail)))
        return tool is not None and reason not in ("figures", "repeated")

    def check_answer(self, memory: Memory, result: RunResult, text: str) -> tuple[str | None, Tool | None, str]:
        """Whether an answer goes back once: (reason, the tool to name, the missing evidence), or (None, ...) to
        accept it. Sent back: no call succeeded on a goal that needs one ("no_tool" when none was made,
        "no_success" after calls that all failed), figures found in no tool result ("figures"), or a file the goal
        names that no call used ("files"). Only one answer per run goes back; the next is accepted and its outcome
        says what it lacks (`evidence.judge`)."""
        config = self.config
        if not config.answer_guard or config.tool_choice == "none":
            return None, None, ""
        repeated = any(same_answer(text, t) for t in result.sent_back) and not result.bounced("repeated")
        if repeated and any(o.ok for o in real_calls(memory.ledger)):  # said again after a call worked: once more
            return "repeated", None, ""
        if result.bounced(*ANSWER_BOUNCES):
            return None, None, ""
        ledger = memory.ledger
        if any(o.error_kind == "permission_denied" or o.result.error in STOPPED_CALLS for o in ledger):
            return None, None, ""  # a denial is an answer too; a resumed run's call was cut off by a crash
        real = real_calls(ledger)
        if not any(o.ok for o in real):
            tool = tool_needed(memory.goal, self.registry())
            if tool is None and not (config.tool_choice == "required" and not real):
                return None, None, ""
            if CANNOT.search(text) and real:
                return None, None, ""  # it tried and says it could not: an honest failure, ended as one
            return ("no_success" if real else "no_tool"), tool, no_success_line(ledger)
        unsupported = unsupported_figures(text, real, self.need.user_text or memory.goal)
        if unsupported:
            return "figures", None, ", ".join(unsupported[:5])
        unused = unused_files(self.need.user_text or memory.goal, real, change=self.need.change)
        if unused:
            return "files", tool_needed(memory.goal, self.registry()), ", ".join(unused[:3])
        return None, None, ""

    def bounce_final_answer(
        self, memory: Memory, step: int, calls: list[ToolCall], errors: list[str], result: RunResult
    ) -> bool:
        """Under `required`, a turn of only final_answer calls is guarded like an auto-mode answer (also at step
        1 with no real call made: the user asked for tools).

        The calls are listed (error_kind `guarded`) and answered with the corrective note as their
        tool result, so the turn structure stays call -> result; the grammar already forces a call.
        """
        if not calls or errors or any(c.name != FINAL_ANSWER for c in calls):
            return False
        reason, tool, detail = self.check_answer(memory, result, str(calls[0].arguments.get("answer", "")))
        if reason is None:
            return False
        note = bounce_note(tool, reason, detail)
        outcomes = bounce_final_answers(step, calls, tool, result, self.on_event, note, reason)
        result.sent_back.append(str(calls[0].arguments.get("answer", "")))
        memory.add_assistant(step, "", calls)
        memory.add_tool_results(step, outcomes)
        return True

    def need_of(self, goal: str, asked: str = "") -> Need:
        """What `goal` (or a later message, `asked`) needs of this run's tools, decided before the model writes."""
        registry, ask, choice = self.registry(), asked or goal, self.config.tool_choice
        # a follow-up ("And now?") needs what the goal it follows needed, unless it names a need of its own
        tool = tool_needed(ask, registry) or (tool_needed(goal, registry) if asked else None)
        writers = frozenset(t.name for t in registry if t.permission != "read")
        steering = [t for t in registry if not t.traits.steers_run]
        # a change is asked for when a writing tool's cue matches, the goal says to change something and is not a
        # question ("What did I write in journal.md?", "Which files are here? You may try the shell.")
        cued = any(t.name in writers for t in candidates(ask, steering)) and CHANGE_WORDS.search(ask) is not None
        change = choice != "none" and cued and not ask.strip().endswith("?")
        name = tool.name if tool is not None and choice != "none" else None
        sinks = frozenset(t.name for t in registry if t.permission == "write")
        question = re.search(r"\?(?:\s|$)", ask) is not None  # "Where is it? The details are in notes.txt."
        return Need(name, change, choice == "required", f"{goal}\n{asked}", writers, sinks, question)

    def tool_needed(self, memory: Memory, result: RunResult, *, again: bool = False) -> Tool | None:
        """The tool to name when bouncing this tool-less answer, or None to accept it (`again`: even when an
        answer was already bounced once)."""
        if not self.config.answer_guard or self.config.tool_choice == "none" or (result.guarded and not again):
            return None
        if any(o.ok or o.error_kind == "permission_denied" or o.result.error in STOPPED_CALLS for o in memory.ledger):
            # a tool answered (a denial is an answer too: bouncing cannot change it), or a resumed run's
            # call was cut off by a crash or a cancel: the model did reach for the tool
            return None
        return tool_needed(memory.goal, self.registry())
