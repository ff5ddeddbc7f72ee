"""Guards that keep a small model honest, decided without asking the model.

`needs_tool(goal, tools)` is the no-tool answer guard's detector (and what decides that step 1 starts
with the call grammar on): it names the tool a goal most likely needs from the cues each tool declares
(`Traits.cues`, on its own definition: a built-in's goal words by verb and object, English and Chinese),
tried in their rank order — a source first (a database with its words, a URL, the clock when it is asked for,
a folder to list, a file to read unless the goal brings its text along), else a sink (a file to write or
report into, the memo, long-term memory) — then other registered tools by the words of their names and
descriptions, then a last-resort cue (the clock for "tomorrow"); or returns None when the goal can be answered
from knowledge. A tool that steers the run (`Traits.steers_run`: asking the person, ending the run, opening a
toolset) is never named. `bounce_note(tool, reason)` is the corrective note sent back with a bounced reply (no
tool called, an empty reply, a made-up tool result), telling the model how to call the tool (`Traits.call_hint`).
`LoopGuard` is the cycle and no-progress guard: an identical call repeated N times in a row, a repeating cycle
of period 2-4 on its third repetition, or a call whose identical result was already seen twice.
Does not call the model, run tools or hold run state (the agent passes in what happened so far).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hermes_local.events import ToolOutcome
from hermes_local.outcome import arguments_digest
from hermes_local.tools.builtin.interaction import FINAL_ANSWER
from hermes_local.tools.registry import Tool
from hermes_local.tools.traits import FILE_IN_GOAL

# Knowledge questions about a general thing ("Explain what SQL is") name no source of this user's.
KNOWLEDGE = re.compile(r"^(please )?(explain|define|describe|tell me about|what is an? |what are |what does \S+ mean)")
SPECIFIC = re.compile(rf"{FILE_IN_GOAL}|https?://|\b(my|our|this|these|the database|workspace)\b")
# Words too common to say anything about which tool a goal needs.
STOPWORDS = frozenset(
    """a an and are as at be by can do does for from get give has have how i in is it its me my of on or
    please put set show tell that the their them then there this to up use what when where which who
    why will with you your one all any each text user users given new list local run returns return
    result results""".split()
)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in STOPWORDS}


def _tool_words(t: Tool) -> set[str]:
    return _words(t.name.replace("_", " ") + " " + t.description.split("(")[0])


def candidates(goal: str, tools: Iterable[Tool]) -> list[Tool]:
    """The tools whose cues the goal matches, best first (by cue rank, then registry order): sources, then sinks."""
    text = goal.lower().strip()
    if KNOWLEDGE.match(text) and not SPECIFIC.search(text):
        return []
    cued = [(c.rank, i, t) for i, t in enumerate(tools) for c in t.traits.cues if not c.last_resort and c.matches(text)]
    return [t for _, _, t in sorted(cued, key=lambda x: (x[0], x[1]))]


def tool_needed(goal: str, tools: Iterable[Tool]) -> Tool | None:
    """The registered tool this goal most likely needs, or None if it can be answered from knowledge."""
    available = [t for t in tools if not t.traits.steers_run]
    cued = candidates(goal, available)
    if cued:
        return cued[0]
    goal_words = _words(goal)
    best, best_score = None, 0
    for t in available:
        score = len(goal_words & _tool_words(t)) if not t.traits.cues else 0
        if score > best_score:
            best, best_score = t, score
    if best is None:  # "what is on tomorrow?" when no other tool fits: the clock
        text = goal.lower().strip()
        return next((t for t in available for c in t.traits.cues if c.last_resort and c.matches(text)), None)
    return best


def needs_tool(goal: str, tools: Iterable[Tool]) -> str | None:
    """The name of the registered tool this goal most likely needs (`tool_needed`), or None."""
    t = tool_needed(goal, tools)
    return t.name if t is not None else None


def how_to_call(t: Tool) -> str:
    """What a guard's note tells the model to do with `t`: its own `call_hint`, else "call NAME"."""
    return t.traits.call_hint or f"call {t.name}"


def bounce_note(tool: Tool | None, reason: str = "no_tool", detail: str = "") -> str:
    """The corrective note sent back with a bounced reply: what was wrong and exactly what to do now (`detail`:
    the evidence that was missing, for "no_success", "figures" and "files")."""
    what = how_to_call(tool) if tool else "call a fitting tool"
    if reason == "no_success":
        return (
            f"You answered, but {detail}. Nothing backs that answer. Do not guess: {what} with arguments that "
            "work (check the file or table name), then answer from its result; if it cannot be done, say so."
        )
    if reason == "repeated":
        return (
            "You repeated, word for word, an answer that was already sent back. Do not repeat it: answer the goal "
            "from what the tool results above say, or call a tool to find out; if it cannot be done, say so."
        )
    if reason == "figures":
        return (
            f"These figures in your answer appear in no tool result: {detail}. Do not make up numbers: answer only "
            "with what the tool results say, or call a tool that gives the figure."
        )
    if reason == "files":
        return (
            f"You answered, but no tool call used {detail}, which the goal names. Nothing backs that answer. "
            f"Do not guess: {what} on it, then answer from its result; if it cannot be done, say so."
        )
    if reason == "no_tool":
        return (
            f"You answered without calling any tool, but this goal needs information only a tool can give. "
            f"Do not guess: {what}{' (or another fitting tool)' if tool else ''} now, then answer from its result."
        )
    wrong = (
        "Your reply was empty."
        if reason == "empty"
        else "Your reply was only a tool result you wrote yourself; results come only from real tool calls."
    )
    if tool:
        return f"{wrong} Now {what}, then answer the goal from its result."
    return f"{wrong} Now reply with your answer to the goal, in plain words."


def first_step_note(tool: Tool) -> str:
    """The note after the goal when step 1 is forced to a call: which tool fits, as a bounce would say."""
    return f"Start with a tool call: {how_to_call(tool)} (or another fitting tool), then answer from its result."


LOOP_ADVICE = "Change strategy (another tool or other arguments) or give the final answer from what you have."


@dataclass
class LoopGuard:
    """The cycle and no-progress guard's limits."""

    max_identical: int = 3  # refuse the Nth identical call in a row
    periods: tuple[int, ...] = (2, 3, 4)
    max_same_result: int = 2  # refuse a call whose identical result was already seen this many times

    def refusal(self, history: Sequence[ToolOutcome], pending: Sequence[str], name: str, arguments: dict) -> str | None:
        """Why this call must not run (a message for the model), or None.

        `history` is this run's earlier outcomes (refused ones are ignored); `pending` the digests of
        calls of the current turn that are accepted but not run yet.
        """
        if name == FINAL_ANSWER:
            return None
        ran = [o for o in history if o.error_kind != "loop" and o.name != "invalid_tool_call"]
        digest = arguments_digest(name, arguments)
        seq = [o.digest for o in ran] + list(pending) + [digest]
        n = self.max_identical
        if n > 1 and len(seq) >= n and len(set(seq[-n:])) == 1:
            return f"You called {name} with the same arguments {n} times in a row; it was not run again. {LOOP_ADVICE}"
        for p in self.periods:
            block = seq[-p:]
            if len(seq) >= 3 * p and len(set(block)) > 1 and seq[-3 * p :] == block * 3:
                names = ", ".join(_name_of(d, ran, name, digest) for d in block)
                return (
                    f"You are repeating the same cycle of {p} calls ({names}) for the third time; this call was "
                    f"not run. {LOOP_ADVICE}"
                )
        seen = [_result_key(o) for o in ran if o.digest == digest and o.ok]
        if len(seen) >= self.max_same_result and len(set(seen)) == 1:
            return (
                f"You already called {name} with these arguments {len(seen)} times and got the same result each "
                f"time; it was not run again. {LOOP_ADVICE}"
            )
        return None


def _name_of(digest: str, ran: Sequence[ToolOutcome], name: str, current: str) -> str:
    if digest == current:
        return name
    return next((o.name for o in ran if o.digest == digest), "?")


def _result_key(o: ToolOutcome) -> str:
    return json.dumps(o.data, sort_keys=True, default=str, ensure_ascii=True)
