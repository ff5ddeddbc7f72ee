"""Guards that keep a small model honest, decided without asking the model.

`needs_tool(goal, tools)` is the no-tool answer guard's detector (and what decides that step 1 starts
with the call grammar on): it names the tool a goal most likely needs by verb and object, English and
Chinese — a source first (a database with its words, a URL, the clock when it is asked for, a folder to
list, a file to read unless the goal brings its text along), else a sink (a file to write or report
into, the memo, long-term memory) — and other registered tools by the words of their names and
descriptions, or returns None when the goal can be answered from knowledge. `bounce_note(tool, reason)`
is the corrective note sent back with a bounced reply (no tool called, an empty reply, a made-up tool
result). `loop_refusal(...)`
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
from hermes_local.outcome import arguments_digest
from hermes_local.tools.registry import Tool

# The goal -> tool rule, by verb and object. A goal that names where the facts come from (a database with
# its words, a URL, the clock asked for, a folder to list, a file to read) needs that source first; one that
# only says where something goes (a file to write, the memo, long-term memory) needs that sink. Patterns
# are matched on the lowercased goal, English and Chinese.
_FILE = r"[\w./-]*[\w-]\.(?:txt|md|csv|json|log|py|toml|yaml|yml|ini|cfg|html|xml|tsv|sqlite|db)\b"
FILE_NAME = re.compile(_FILE)
WRITE_VERB = re.compile(r"\b(write|save|create|put|store|export|append|record|copy|make)\b|写入|写进|保存|创建")
# A file name right after "into/to/as/called/named" (or a write verb) is where the result goes, not a source.
TARGET = re.compile(
    rf"(?:\b(?:into|to|as|called|named|onto|write|save|create)\s+|写入|写进|保存到|存到|保存)\s*"
    rf"(?:a\s+|the\s+|my\s+|file\s+)*({_FILE})"
)
DB_STRONG = re.compile(r"\b(database|sql|sqlite|db|query|queries|tables?|schema)\b|数据库|查询")
DB_WEAK = re.compile(
    r"\b(rows?|customers?|orders?|sales|revenue|records?|invoices?|products?|top \d+)\b|订单|客户|销售|表格"
)
WEB = re.compile(r"https?://|\b(web ?page|website|url|download|fetch)\b|网页|网站|链接")
# The clock asked for; "the time of the meeting" or "the date in notes.txt" is not a clock question.
CLOCK = re.compile(
    r"\b(what time|time is it|the time now|current (?:time|date)|time right now|today'?s date|what date|"
    r"what day|day of the week|the date today|date and time)\b|现在|几点|时间|日期|今天|明天|昨天|星期几"
)
CLOCK_WEAK = re.compile(r"\b(the time|today|tonight|tomorrow|yesterday|date|clock|now)\b(?! of)")
LIST = re.compile(
    r"\b(list|show|what'?s in|what is in|contents of)\b.*\b(files|folders?|director(?:y|ies)|workspace)\b|"
    r"\b(folders?|director(?:y|ies)|ls)\b|目录|文件夹|工作区"
)
READ = re.compile(r"\b(read|contents?|summari[sz]e|summary of|open|look at|check)\b|文件|读取|内容|笔记")
# A goal that brings its own text ("Summarise this: ...", text piped in on further lines) reads no file for it.
INLINE_TEXT = re.compile(r"\b(this|these|the following|below|text|it)\s*:\s*\S|\n\s*\S|(这段|以下)[^:：]*[:：]")
SHELL = re.compile(r"\b(run|execute)\b.*\b(command|script|shell)\b|\bshell\b|运行命令|执行")
MEMO = re.compile(r"\b(memo|note it|note down|jot)\b|备忘")
REMEMBER = re.compile(r"\bremember\b|记住")
# Knowledge questions about a general thing ("Explain what SQL is") name no source of this user's.
KNOWLEDGE = re.compile(r"^(please )?(explain|define|describe|tell me about|what is an? |what are |what does \S+ mean)")
SPECIFIC = re.compile(rf"{_FILE}|https?://|\b(my|our|this|these|the database|workspace)\b")
# Tools the rules above know; any other registered tool is found by the words of its name and description.
RULED = frozenset(
    "get_current_time read_file list_dir write_file append_to_memo query_database http_get run_shell remember".split()
)
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


def _source_files(text: str) -> list[str]:
    """File names the goal reads from: every named file that is not where a result is written."""
    targets = {m.group(1) for m in TARGET.finditer(text)} if WRITE_VERB.search(text) else set()
    return [name for name in FILE_NAME.findall(text) if name not in targets]


def candidates(goal: str) -> list[str]:
    """The tools the goal points at, best first: sources (where facts come from), then sinks."""
    text = goal.lower().strip()
    if KNOWLEDGE.match(text) and not SPECIFIC.search(text):
        return []
    rules: list[tuple[bool, str]] = [
        (bool(DB_STRONG.search(text)), "query_database"),
        (bool(WEB.search(text)), "http_get"),
        (bool(SHELL.search(text)), "run_shell"),
        (bool(CLOCK.search(text)), "get_current_time"),
        (bool(LIST.search(text)), "list_dir"),
        (bool(_source_files(text)) or (bool(READ.search(text)) and not INLINE_TEXT.search(text)), "read_file"),
        (bool(DB_WEAK.search(text)), "query_database"),
        (bool(MEMO.search(text)), "append_to_memo"),
        (bool(REMEMBER.search(text)), "remember"),
        (bool(WRITE_VERB.search(text)) and bool(FILE_NAME.search(text) or re.search(r"\bfile\b", text)), "write_file"),
    ]
    return [name for hit, name in rules if hit]


def needs_tool(goal: str, tools: Iterable[Tool]) -> str | None:
    """The registered tool this goal most likely needs, or None if it can be answered from knowledge."""
    available = {t.name: t for t in tools if t.name not in ("final_answer", "ask_user", "open_toolset")}
    for name in candidates(goal):
        if name in available:
            return name
    goal_words = _words(goal)
    best, best_score = None, 0
    for t in available.values():
        score = len(goal_words & _tool_words(t)) if t.name not in RULED else 0
        if score > best_score:
            best, best_score = t.name, score
    if best is None and CLOCK_WEAK.search(goal.lower()) and "get_current_time" in available:
        return "get_current_time"  # "what is on tomorrow?" when no other tool fits
    return best


HOW_TO_CALL = {
    "write_file": "call write_file with the path and the full content",
    "append_to_memo": "call append_to_memo with the line to note",
    "query_database": "call query_database with one SELECT statement",
    "read_file": "call read_file with the file's path",
    "http_get": "call http_get with the URL",
}


def bounce_note(tool: str | None, reason: str = "no_tool") -> str:
    """The corrective note sent back with a bounced reply: what was wrong and exactly what to do now."""
    what = HOW_TO_CALL.get(tool or "", f"call {tool}") if tool else ""
    if reason == "no_tool":
        return (
            f"You answered without calling any tool, but this goal needs information only a tool can give. "
            f"Do not guess: {what} (or another fitting tool) now, then answer from its result."
        )
    wrong = (
        "Your reply was empty."
        if reason == "empty"
        else "Your reply was only a tool result you wrote yourself; results come only from real tool calls."
    )
    if tool:
        return f"{wrong} Now {what}, then answer the goal from its result."
    return f"{wrong} Now reply with your answer to the goal, in plain words."


def first_step_note(tool: str) -> str:
    """The note after the goal when step 1 is forced to a call: which tool fits, as a bounce would say."""
    what = HOW_TO_CALL.get(tool, f"call {tool}")
    return f"Start with a tool call: {what} (or another fitting tool), then answer from its result."


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
