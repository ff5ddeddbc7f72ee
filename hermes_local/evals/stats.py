"""How the agent has been doing: figures over the session logs (`hermes-local stats`, `GET /v1/stats`).

`gather(since=SECONDS)` reads every session log under `$HERMES_LOCAL_HOME/sessions/` (the logs are the one
store: nothing is kept elsewhere) and counts, for each run that started in the window (a resumed or continued
run is one more run of its session): how it ended (answer, max_steps, error, empty, budget, or unfinished when
the log has no end: a crash, a cancel, a run going on), its outcome from evidence (`results`: done, answered,
unverified, failed, denied), the success rate ((done + answered) / runs: an answer nothing backs is no success),
each tool's calls,
failures (the tool ran and failed) and refusals (not approved), tokens and seconds per run (wall time from
the run's start line to its end line; model time from its usage), and approvals: asked (a person was asked),
denied (they said no), timed out (nobody answered), and refused unasked (policy, no terminal, untrusted
content), and each hook's decisions (allow, block, ask, error). `parse_since("7d")` reads the window. Lines that
do not parse are skipped (like `sessions show`).
Does not print, and reads no workflow sessions (they have no model runs).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.errors import UserError
from hermes_local.events import Event, HookRan, RunEnd, RunResumed, RunStart, ToolFinished, event_from_dict
from hermes_local.session import sessions_dir

OUTCOMES = ("answer", "max_steps", "error", "empty", "budget", "unfinished")  # how runs stopped
# What the evidence said of each run; "unjudged": a log written before outcomes were recorded (never a success).
RESULTS = ("done", "answered", "unverified", "failed", "denied", "unjudged", "unfinished")
ASKED = frozenset({"user", "timeout"})  # how a call was decided when a person was asked
_SINCE = re.compile(r"([0-9]{1,6})([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str) -> float:
    """Seconds in `30m`, `12h`, `7d`, `2w` (a number and s/m/h/d/w), else a UserError naming the form."""
    found = _SINCE.fullmatch(text.strip().lower())
    if not found or int(found.group(1)) == 0:
        raise UserError(f"--since {text[:40]!r} is not a duration; write a number and a unit, e.g. 12h, 7d or 2w")
    return float(int(found.group(1)) * _UNIT[found.group(2)])


@dataclass
class _Run:
    """One run read from a log: its start and end times, its end event and its tool outcomes."""

    started: float
    ended: float | None = None
    end: RunEnd | None = None
    tools: list[ToolFinished] = field(default_factory=list)
    hooks: list[HookRan] = field(default_factory=list)  # the user's hooks' decisions (a session_end's after the end)


def _timed_events(path: Path) -> list[tuple[float, Event]]:
    """(time, event) for each line of a log that parses; the others are skipped."""
    out: list[tuple[float, Event]] = []
    try:
        raw = path.read_bytes()
    except OSError:
        return out
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            data = json.loads(line.decode("utf-8", errors="surrogateescape"))
            ts = data.get("ts") if isinstance(data, dict) else None
            if isinstance(ts, int | float) and not isinstance(ts, bool):
                out.append((float(ts), event_from_dict(data)))
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
    return out


def _runs(path: Path) -> list[_Run]:
    runs: list[_Run] = []
    for ts, event in _timed_events(path):
        if isinstance(event, RunStart | RunResumed):
            runs.append(_Run(ts))
        elif runs and isinstance(event, HookRan):
            runs[-1].hooks.append(event)
        elif runs and runs[-1].end is None:
            if isinstance(event, ToolFinished):
                runs[-1].tools.append(event)
            elif isinstance(event, RunEnd):
                runs[-1].end, runs[-1].ended = event, ts
    return runs


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "total": 0.0}
    return {
        "mean": round(statistics.fmean(values), 3),
        "median": round(statistics.median(values), 3),
        "total": round(sum(values), 3),
    }


def _failure_rate(counts: dict[str, int]) -> float | None:
    """Failed / calls that ran (refused calls never ran); None when none ran."""
    ran = counts["calls"] - counts["refused"]
    return round(counts["failed"] / ran, 4) if ran else None


def gather(
    since: float | None = None, now: float | None = None, folder: Path | None = None, only: set[str] | None = None
) -> dict[str, Any]:
    """The figures of the runs started in the last `since` seconds (None: all), as a JSON-ready dict; `only`: of
    these sessions alone (a serve token's own runs)."""
    now = time.time() if now is None else now
    cutoff = now - since if since is not None else None
    folder = sessions_dir() if folder is None else folder
    runs: list[_Run] = []
    sessions = 0
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        if only is not None and path.stem not in only:
            continue
        try:
            if cutoff is not None and path.stat().st_mtime < cutoff:
                continue  # last written before the window opened: none of its runs started inside it
        except OSError:
            continue
        found = [r for r in _runs(path) if cutoff is None or r.started >= cutoff]
        sessions += bool(found)
        runs += found
    outcomes = dict.fromkeys(OUTCOMES, 0)
    results = dict.fromkeys(RESULTS, 0)
    tools: dict[str, dict[str, int]] = {}
    approvals = {"asked": 0, "allowed": 0, "denied": 0, "timed_out": 0, "refused_unasked": 0}
    prompt, completion, wall, model = [], [], [], []
    hooks: dict[str, dict[str, int]] = {}  # hook name -> decision -> count
    for run in runs:
        for hook in run.hooks:
            counts = hooks.setdefault(hook.hook, {})
            counts[hook.decision] = counts.get(hook.decision, 0) + 1
        stopped = str(run.end.stopped) if run.end is not None else "unfinished"
        outcomes[stopped if stopped in outcomes else "error"] += 1
        judged = str(run.end.result.get("outcome") or "unjudged") if run.end is not None else "unfinished"
        results[judged if judged in results else "unjudged"] += 1
        if run.end is not None:
            logged = run.end.result.get("usage")
            usage: dict[str, Any] = logged if isinstance(logged, dict) else {}
            prompt.append(_number(usage.get("prompt_tokens")))
            completion.append(_number(usage.get("completion_tokens")))
            model.append(_number(usage.get("seconds")))
            wall.append(max(0.0, (run.ended or run.started) - run.started))
        for tool_event in run.tools:
            outcome = tool_event.outcome
            counts = tools.setdefault(outcome.name, {"calls": 0, "failed": 0, "refused": 0})
            counts["calls"] += 1
            denied = outcome.error_kind == "permission_denied"
            counts["refused" if denied else "failed"] += 0 if outcome.ok else 1
            how = outcome.approval
            if how in ASKED:
                approvals["asked"] += 1
                key = "timed_out" if how == "timeout" else "denied" if denied else "allowed"
                approvals[key] += 1
            elif denied:
                approvals["refused_unasked"] += 1
    total = len(runs)
    finished = total - outcomes["unfinished"]
    succeeded = results["done"] + results["answered"]
    return {
        "since_seconds": since,
        "sessions": sessions,
        "runs": total,
        "outcomes": outcomes,
        "results": results,  # the outcome the evidence gave each run (`agent/evidence.py`)
        "success_rate": round(succeeded / total, 4) if total else None,  # done or answered, never a bare claim
        "success_rate_finished": round(succeeded / finished, 4) if finished else None,
        "tools": {name: c | {"failure_rate": _failure_rate(c)} for name, c in sorted(tools.items())},
        "tokens_per_run": {"prompt": _spread(prompt), "completion": _spread(completion)},
        "seconds_per_run": {"wall": _spread(wall), "model": _spread(model)},
        "approvals": approvals,
        "hooks": dict(sorted(hooks.items())),
    }
