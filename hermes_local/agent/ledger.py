"""The "what have I done" lines: one per tool call, with what it was for and its key finding.

`finding(outcome, goal)` extracts a call's key finding without the model: for text, the line count
and the line that shares the most words with the goal ("40 lines; meeting moved to 3 pm"); for
query rows, the row count and the first row; for folder listings, the first names; otherwise the
result's summary. `ledger_lines(entries, goal, purposes, detailed)` renders the ledger: the last
`detailed` calls with their findings, every older call as a short line that still says which tool
ran on what and whether it worked (compaction shortens findings, it never drops a step).
`episode_record(...)` is what long-term memory keeps of a finished run, built from the ledger without the
model. Does not lay out the prompt (see `memory.py`) or call the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_local.events import ToolOutcome
from hermes_local.tools.builtin.interaction import FINAL_ANSWER

KEY_ARGUMENTS = ("path", "sql", "url", "command", "question", "fact", "content", "answer")
FINDING_CHARS = 90
SHORT_FINDING_CHARS = 40  # older steps keep a shortened finding
_WORD = re.compile(r"\w{3,}", re.UNICODE)


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def key_argument(o: ToolOutcome) -> str:
    """What the call was about: its path, SQL, URL... (short), or nothing for argument-less tools."""
    for name in KEY_ARGUMENTS:
        value = o.arguments.get(name)
        if isinstance(value, str) and value:
            return _clip(value, 40)
    value = next((v for v in o.arguments.values() if isinstance(v, str | int | float)), None)
    return _clip(str(value), 40) if value is not None else ""


def _best_line(text: str, goal: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("[...")]
    if not lines:
        return ""
    wanted = {w.lower() for w in _WORD.findall(goal)}
    scored = [(len(wanted & {w.lower() for w in _WORD.findall(line)}), -i, line) for i, line in enumerate(lines)]
    best = max(scored)
    return best[2] if best[0] > 0 else lines[0]


def finding(o: ToolOutcome, goal: str = "") -> str:
    """The key finding of one call, in one short line."""
    if not o.ok:
        return _clip(f"failed ({o.error_kind}): {o.error or o.summary}", FINDING_CHARS)
    data: Any = o.data
    if isinstance(data, str):
        count = len([line for line in data.splitlines() if not line.startswith("[...")])
        best = _best_line(data, goal)
        head = f"{count} lines; " if count > 1 else ""
        return _clip(head + best, FINDING_CHARS) if best or head else "done (empty result)"
    if isinstance(data, Mapping):
        if isinstance(data.get("rows"), list):
            rows = data["rows"]
            first = json.dumps(rows[0], ensure_ascii=False, default=str) if rows else "none"
            return _clip(f"{len(rows)} row(s); first {first}", FINDING_CHARS)
        if isinstance(data.get("entries"), list):
            names = ", ".join(str(e.get("name")) for e in data["entries"][:6] if isinstance(e, Mapping))
            return _clip(f"{len(data['entries'])} entries: {names}", FINDING_CHARS)
        return _clip(", ".join(f"{k}={v}" for k, v in data.items()), FINDING_CHARS)
    summary = o.summary.split(" -> ", 1)[-1] if " -> " in o.summary else o.summary
    return _clip(summary or json.dumps(data, ensure_ascii=False, default=str), FINDING_CHARS)


def ledger_line(o: ToolOutcome, goal: str = "", purpose: str = "", *, detailed: bool = True) -> str:
    """`step 3: read_file notes.txt (find the meeting time) → 40 lines; meeting moved to 3 pm`."""
    what = f"{o.name} {key_argument(o)}".strip()
    why = f" ({_clip(purpose, 50)})" if purpose and detailed else ""
    if detailed:
        return f"step {o.step}: {what}{why} → {finding(o, goal)}"
    if not o.ok:
        return f"step {o.step}: {what} failed ({o.error_kind})"
    return f"step {o.step}: {what} ok: {_clip(finding(o, goal), SHORT_FINDING_CHARS)}"


def ledger_lines(
    entries: Sequence[ToolOutcome], goal: str, purposes: Mapping[int, str], detailed: int, max_short: int = 24
) -> list[str]:
    """The ledger: older calls as short lines, the last `detailed` with purpose and finding.

    Past `max_short` short lines, runs of the same tool merge into one line ("steps 5-104: fetch_page
    x100 (0 … 99), 100 ok"), and past that the rest is counted per tool: every step stays accounted for.
    """
    cut = max(0, len(entries) - detailed)
    older = [o for o in entries[:cut] if o.name != "invalid_tool_call"]
    recent = [ledger_line(o, goal, purposes.get(o.step, "")) for o in entries[cut:]]
    if len(older) <= max_short:
        return [ledger_line(o, goal, detailed=False) for o in older] + recent
    runs: list[list[ToolOutcome]] = []
    for o in older:
        if runs and runs[-1][0].name == o.name:
            runs[-1].append(o)
        else:
            runs.append([o])
    if len(runs) > max_short:  # too varied to list: what remains is counted per tool
        keep = runs[len(runs) - max_short // 2 :]
        dropped = [o for run in runs[: len(runs) - len(keep)] for o in run]
        counts: dict[str, list[int]] = {}
        for o in dropped:
            counts.setdefault(o.name, [0, 0])[0 if o.ok else 1] += 1
        groups = ", ".join(f"{name} x{ok + bad} ({ok} ok)" for name, (ok, bad) in counts.items())
        return [f"steps {dropped[0].step}-{dropped[-1].step}: {groups}"] + [_run_line(r) for r in keep] + recent
    return [_run_line(r) for r in runs] + recent


def _run_line(run: Sequence[ToolOutcome]) -> str:
    if len(run) == 1:
        return ledger_line(run[0], detailed=False)
    ok = sum(o.ok for o in run)
    args = f" ({key_argument(run[0])} … {key_argument(run[-1])})" if key_argument(run[0]) else ""
    return f"steps {run[0].step}-{run[-1].step}: {run[0].name} x{len(run)}{args}, {ok} ok"


def episode_record(
    goal: str,
    outcomes: Sequence[ToolOutcome],
    answer: str | None,
    stopped: str,
    writes: Mapping[str, str],
    outcome: str = "",
    evidence: str = "",
) -> dict[str, Any]:
    """The run's episode for long-term memory: goal, answer, how it stopped, its outcome and evidence
    (`evidence.judge`), the key findings (at most 5), the files written (`writes`: tool name -> its path
    argument), the tools used, and whether a write was denied or untrusted content was read (which mark the
    episode failed / untrusted)."""
    real = [o for o in outcomes if o.name not in (FINAL_ANSWER, "invalid_tool_call")]
    written = {o.arguments.get(writes[o.name]) for o in real if o.ok and o.name in writes}
    return {
        "goal": goal,
        "answer": answer,
        "stopped": stopped,
        "outcome": outcome,
        "evidence": evidence,
        "findings": [f"{o.name} {key_argument(o)}: {finding(o, goal)}" for o in real if o.ok][:5],
        "files_written": sorted(p for p in written if isinstance(p, str)),
        "tools": sorted({o.name for o in real}),
        "denied": any(o.error_kind == "permission_denied" for o in real),
        "untrusted": any(o.ok and o.result.provenance == "untrusted" for o in real),
    }
