"""A run's outcome, decided once from evidence (what the tools did), never from the model's words.

`judge(...)` gives the `Verdict` of a finished run: its outcome (`OUTCOMES`) and one line of evidence. `done`: the
goal needed tools and a call behind the answer succeeded (a goal that asked for a change has that change in the
workspace's checkpoints); `answered`: a goal that needs no tool, answered without one; `unverified`: an answer with
no successful call behind it on a goal that needs one, only writes on a goal that asks a question, figures in the
answer (or, on a goal that asks for information, names) that appear in no tool result and no user text, a file
the goal names that no call used (`unused_files`), an information answer of four words or more that shares none
with any result (`says_nothing_read`), a change asked for and nothing changed, or an answer repeated word for word
after it was sent back; `failed`: no answer (the step limit, the failure cap, an empty reply, an error, a reply
that only offers help), or an answer that says it could not do the task; `denied`: the calls it needed were
refused. `Need` is what the goal needs (taken once, from the goal and the run's tools, before the model writes
anything). `unsupported_figures` and `no_success_line` are also the answer guard's reasons for sending an answer
back once (`answers.py`). Does not call the model, run tools or print anything; `result.py` maps an outcome to its
exit code.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hermes_local.outcome import ToolOutcome
from hermes_local.tools.traits import FILE_IN_GOAL

Outcome = Literal["done", "answered", "unverified", "failed", "denied"]
OUTCOMES: tuple[Outcome, ...] = ("done", "answered", "unverified", "failed", "denied")
SUCCESS: frozenset[str] = frozenset({"done", "answered"})  # what `stats` counts as success; exit 0
NOT_CALLS = frozenset({"final_answer", "invalid_tool_call"})

# An answer that says the task could not be done (an honest failure, not a claim of success).
CANNOT = re.compile(
    r"\b(i (?:can ?not|can't|cannot|am unable to|was unable to|couldn't|could not)|unable to (?:access|read|find|"
    r"open|complete|do)|i don't have access|i do not have access)\b",
    re.IGNORECASE,
)
# A reply that answers nothing: an offer to help, a question back ("I'm ready to help. What's your next question?").
NON_ANSWER = re.compile(
    r"^\W*(?:<[^<>\s]{1,40}>\W*)?(?:hello|hi)?\W*(?:i'?m|i am) (?:ready|here|happy|glad) to (?:help|assist)|"
    r"\b(?:how can i (?:help|assist)|what(?:'s| is) your (?:next )?question|what would you like (?:me )?to do)\b",
    re.IGNORECASE,
)
# Words of a goal that asks for a change (with a writing tool's cue matched: `Need.change`).
CHANGE_WORDS = re.compile(
    r"\b(rename|move|delete|remove|create|write|save|add|append|update|edit|replace|put|note|copy|make|store|"
    r"record|export|into)\b",
    re.IGNORECASE,
)
# A figure worth checking: two or more digits, or a decimal (single digits are counts a model may derive).
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
# A name worth checking: a capitalised word inside a sentence (not its first word), e.g. "the top customer is Ann".
NAME = re.compile(r"(?<=[\w,;)\]] )[A-Z][a-z]{2,}\b")
# Capitalised words a date or a sentence brings without naming anything a tool must have said.
CALENDAR = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july august september "
    "october november december mon tue wed thu fri sat sun monday tuesday wednesday thursday friday saturday "
    "sunday utc gmt".split()
)

# A word an answer may share with a tool result, compared by its first five letters ("matched" ~ "matches");
# common words and digits aside.
WORD = re.compile(r"[^\W\d_]{4,}")
COMMON = frozenset(
    w[:5]
    for w in "that this with from have there their they them then than what when which your about would could "
    "should will were been into only also here some does just more most very like each other these those where "
    "while".split()
)

# Words an answer needs before "shares none with the results" means anything ("Yes.", "Done.", "It has 3 lines."
# may rightly share none).
SAYS_SOMETHING = 4
FILE_NAMED = re.compile(FILE_IN_GOAL)


@dataclass(frozen=True)
class Need:
    """What the goal needs, decided before the run: a tool (`tool`: the one the guard names), a change to the
    workspace (`change`: a writing tool's cue matched the goal), or tools at all (`required`: --tool-choice
    required, the user's own demand); `user_text` is the user's words (the goal, later messages)."""

    tool: str | None = None
    change: bool = False
    required: bool = False
    user_text: str = ""
    writers: frozenset[str] = frozenset()  # the run's tools that change something (write or dangerous)
    sinks: frozenset[str] = frozenset()  # ...of which those that only write (nothing they return is information)
    question: bool = False  # the goal asks a question (ends with "?"): writes alone do not answer it

    @property
    def tools(self) -> bool:
        return self.tool is not None or self.change or self.required


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    evidence: str


def real_calls(calls: Iterable[ToolOutcome]) -> list[ToolOutcome]:
    """The calls that did the goal's work (not final_answer, not an unreadable call)."""
    return [c for c in calls if c.name not in NOT_CALLS]


def tally(calls: Sequence[ToolOutcome]) -> str:
    """`read_file not_found ×2, run_shell tool_error`: the failed calls by tool and kind."""
    counts = Counter(f"{c.name} {c.error_kind or 'failed'}" for c in calls if not c.ok)
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in counts.items())


def no_success_line(calls: Sequence[ToolOutcome]) -> str:
    """Why nothing backs an answer: "no tool call succeeded: read_file not_found ×2", or "no tool was called"."""
    real = real_calls(calls)
    if not real:
        return "no tool was called"
    last = next((c for c in reversed(real) if not c.ok), None)
    said = " ".join(str(last.error or last.summary).split()) if last else ""
    error = f"; the last error was: {said if len(said) <= 160 else said[:159].rstrip() + '…'}" if last else ""
    return f"no tool call succeeded: {tally(real)}{error}"


def same_answer(a: str, b: str) -> bool:
    """Whether two answers are the same words (case, spacing, punctuation and markup such as a prefilled
    `<tool_call>` aside)."""

    def words(text: str) -> list[str]:
        return re.findall(r"\w+", re.sub(r"<[^<>\s]{1,40}>", " ", text).lower())

    return bool(words(a)) and words(a) == words(b)


def _figure(text: str) -> str:
    """A figure normalised: no thousands commas, no leading zeros, no trailing `.0`."""
    value = text.replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return value.lstrip("0") or "0"


def figures(text: str) -> set[str]:
    return {_figure(m.group(0).rstrip(",")) for m in FIGURE.finditer(text)}


def _result_text(c: ToolOutcome) -> str:
    data: Any = c.data
    blob = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    return f"{blob} {c.summary}"


def unsupported_figures(answer: str, calls: Iterable[ToolOutcome], user_text: str) -> list[str]:
    """The figures of the answer (two digits or more, or decimals) found in no successful tool result and not in
    the user's words, in order of appearance."""
    seen = figures(user_text)
    for c in calls:
        if c.ok:
            seen |= figures(_result_text(c))
    found = [_figure(m.group(0).rstrip(",")) for m in FIGURE.finditer(answer)]
    wanted = [f for f in found if (len(f.replace(".", "")) >= 2 or "." in f) and f not in seen]
    return list(dict.fromkeys(wanted))


def unsupported_names(answer: str, calls: Iterable[ToolOutcome], user_text: str) -> list[str]:
    """The names of the answer (capitalised words inside a sentence, calendar words aside) found in no successful
    tool result and not in the user's words (case aside), in order of appearance."""
    seen = " ".join([user_text, *(_result_text(c) for c in calls if c.ok)]).lower()
    found = [m.group(0) for m in NAME.finditer(answer)]
    return list(dict.fromkeys(n for n in found if n.lower() not in CALENDAR and n.lower() not in seen))


def unused_files(user_text: str, calls: Iterable[ToolOutcome], *, change: bool = False) -> list[str]:
    """The files the user's words name ("notes.txt", "data/sales.csv") that no call named in its arguments, by
    file name, in order. On a question a call that failed counts ("not found" is evidence too); on a goal that asks
    for a change only one that worked does (a write cut off by a crash did not write out.txt). A listing that
    merely shows the name does not count (`ls -la` is not counting the lines of todo.txt). Database files are left
    out: the database tool's calls do not name the file they query."""
    used = [c for c in real_calls(calls) if c.ok or not change]
    touched = " ".join(json.dumps(c.arguments, ensure_ascii=False, default=str) for c in used).lower()
    named = [m.group(0).rstrip(".").rsplit("/", 1)[-1] for m in FILE_NAMED.finditer(user_text)]
    files = [n for n in named if not n.lower().endswith((".db", ".sqlite"))]
    return list(dict.fromkeys(n for n in files if n.lower() not in touched))


def _stems(text: str) -> set[str]:
    return {w.lower()[:5] for w in WORD.findall(text)} - COMMON


def says_nothing_read(answer: str, calls: Iterable[ToolOutcome]) -> bool:
    """Whether an answer without a digit shares no word (by its first five letters, common words aside) with any
    successful call's result: nothing in it depends on what the tools returned ("This tool is not available in the
    current time." after the clock said 12:26). An answer with a digit is the figure rule's."""
    ok = [c for c in calls if c.ok]
    if any(ch.isdigit() for ch in answer) or not ok or any(_empty(c.data) for c in ok):  # "The folder is empty."
        return False
    said = _stems(answer)
    read = set().union(*(_stems(_result_text(c).replace(c.name, " ")) for c in ok))  # not the tool's own name
    return len(said) >= SAYS_SOMETHING and not said & read


def _empty(data: Any) -> bool:
    """A result that found nothing (an empty text, list or field): an answer may say so in words of its own."""
    values = data.values() if isinstance(data, dict) else [data]
    return not data or any(v in ("", None) or (isinstance(v, (list, dict)) and not v) for v in values)


def judge(
    answer: str | None,
    stopped: str,
    calls: Sequence[ToolOutcome],
    need: Need,
    *,
    repeated: bool = False,
    why: str = "",
    changed: set[str] | None = None,
    earlier: Sequence[ToolOutcome] = (),
) -> Verdict:
    """The outcome of a finished run and its evidence (see the module docstring); `repeated`: the accepted answer
    is word for word one that was sent back; `why`: why a run without an answer stopped; `changed`: the workspace
    paths the run's checkpoints recorded as changed (None: not recorded; then a write call that worked counts);
    `earlier`: the session's calls before this turn (a file an earlier message named may have been used then)."""
    real = real_calls(calls)
    ok = [c for c in real if c.ok]
    if stopped != "answer" or not (answer or "").strip():
        return Verdict("failed", f"{why or stopped}; " + (no_success_line(calls) if not ok else _ok_line(ok)))
    text = answer or ""
    if NON_ANSWER.search(text):
        return Verdict("failed", f"the reply answers nothing ({' '.join(text.split())[:60]!r})")
    if not ok and CANNOT.search(text):
        return Verdict("failed", f"the model said it could not do it; {no_success_line(calls)}")
    if not need.tools and not real:
        return Verdict("answered", "no tool was needed")
    if not ok:
        denied = [c for c in real if c.error_kind == "permission_denied"]
        if denied:
            return Verdict("denied", f"the call(s) it needed were refused: {tally(denied)}")
        return Verdict("unverified", no_success_line(calls))
    if need.change and not (changed if changed is not None else any(c.name in need.writers for c in ok)):
        return Verdict("unverified", "the goal asks for a change and nothing in the workspace changed; " + _ok_line(ok))
    only_writes = all(c.name in need.sinks for c in ok)  # on a question, not on a change
    if need.question and need.tool is not None and need.tool not in need.writers and not need.change and only_writes:
        return Verdict("unverified", "the goal needs information and only writes succeeded; " + _ok_line(ok))
    unused = unused_files(need.user_text, [*earlier, *real], change=need.change)
    if unused:
        return Verdict(
            "unverified", f"the goal names {', '.join(unused[:3])} and no tool call used it; " + _ok_line(ok)
        )
    unsupported = unsupported_figures(text, ok, need.user_text)
    if unsupported:
        return Verdict("unverified", f"figures in the answer appear in no tool result: {', '.join(unsupported[:5])}")
    names = [] if need.change else unsupported_names(text, ok, need.user_text)  # a change's evidence is the change
    if names:
        return Verdict("unverified", f"names in the answer appear in no tool result: {', '.join(names[:5])}")
    if not need.change and says_nothing_read(text, [c for c in ok if c.name not in need.writers]):  # what it read
        return Verdict("unverified", "the answer says nothing that any tool result says; " + _ok_line(ok))
    if repeated:
        return Verdict("unverified", "the answer repeats, word for word, one that was sent back")
    return Verdict("done", _ok_line(ok))


def _ok_line(ok: Sequence[ToolOutcome]) -> str:
    names = Counter(c.name for c in ok)
    return "succeeded: " + ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in names.items())
