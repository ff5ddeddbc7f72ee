"""Guards that keep a small model honest, decided without asking the model.

`needs_tool(goal, tools)` is the no-tool answer guard's detector: it names the tool a goal most
likely needs (the current time, file or folder contents, database figures, web pages, anything a
registered tool's description covers) from keywords in English and Chinese and from the words of the
tools' own names and descriptions, or returns None when the goal can be answered from knowledge.
`bounce_note(tool)` is the corrective note sent back with a bounced answer. `loop_refusal(...)`
is the cycle and no-progress guard: an identical call repeated N times in a row, a repeating cycle
of period 2-4 on its third repetition, or a call whose identical result was already seen twice.
Does not call the model, run tools or hold run state (the agent passes in what happened so far).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hermes_local.events import ToolOutcome
from hermes_local.tools.registry import Tool, arguments_digest

# Keyword floor: (pattern, tools in order of preference). Patterns are matched on the lowercased goal.
KEYWORDS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (
        re.compile(
            r"\b(what time|time is it|the time|current time|today|tonight|tomorrow|yesterday|date|"
            r"day of the week|what day|clock|now)\b|现在|时间|日期|几点|今天|明天|昨天|星期几"
        ),
        ("get_current_time",),
    ),
    (re.compile(r"\b(memo|note it|note down|jot)\b|备忘"), ("append_to_memo",)),
    (
        re.compile(
            r"\b[\w-]+\.(txt|md|csv|json|log|py|toml|yaml|yml|ini|cfg|html|xml|tsv)\b|\b(file|files|read|"
            r"contents?|notes?)\b|文件|读取|内容|笔记"
        ),
        ("read_file", "list_dir"),
    ),
    (re.compile(r"\b(folder|folders|directory|directories|workspace|ls)\b|目录|文件夹|工作区"), ("list_dir",)),
    (
        re.compile(
            r"\b(database|sql|sqlite|table|tables|rows?|customers?|orders?|sales|revenue|records?|"
            r"top \d+)\b|数据库|查询|表格|订单|客户|销售"
        ),
        ("query_database",),
    ),
    (re.compile(r"https?://|\b(web ?page|website|url|download|fetch)\b|网页|网站|链接"), ("http_get",)),
    (re.compile(r"\b(write|save|create)\b.*\b(file|report|\w+\.\w{1,4})\b|写入|保存"), ("write_file",)),
    (re.compile(r"\b(run|execute)\b.*\b(command|script|shell)\b|运行|执行"), ("run_shell",)),
    (re.compile(r"\bremember\b|记住"), ("remember",)),
]
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


def needs_tool(goal: str, tools: Iterable[Tool]) -> str | None:
    """The registered tool this goal most likely needs, or None if it can be answered from knowledge."""
    available = {t.name: t for t in tools if t.name not in ("final_answer", "ask_user")}
    text = goal.lower()
    for pattern, names in KEYWORDS:
        if pattern.search(text):
            for name in names:
                if name in available:
                    return name
    goal_words = _words(goal)
    best, best_score = None, 0
    for t in available.values():
        score = len(goal_words & _tool_words(t))
        if score > best_score:
            best, best_score = t.name, score
    return best


def bounce_note(tool: str) -> str:
    """The corrective note sent back with an answer given without any tool call."""
    return (
        f"You answered without calling any tool, but this goal needs information only a tool can give. "
        f"Do not guess: call {tool} (or another fitting tool) now, then answer from its result."
    )


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
        if name == "final_answer":
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
