"""Sessions: an append-only JSONL log of typed events per run under `$HERMES_LOCAL_HOME/sessions/`.

Each event is one line of ASCII JSON (every non-ASCII character escaped, lone surrogates included),
written with one `write` and flushed, so a crash loses at most the event in flight and any string
round-trips; lines are split on `\\n` only. A failed write (disk full) is rolled back to the last
complete line and stops the run with one line; the next append starts on a fresh line. A session ID
is a name, never a path. A log is locked while a process appends to it, so two processes cannot
resume the same session. Reading skips a torn or malformed line, with a warning line to the caller's
`on_skip` (the CLI prints it). `rate_session` appends the user's verdict (`Rating`) to a finished run's log.
Does not run the agent or print; `describe_event` formats events for people (terminal-safe).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_local.config import home_dir
from hermes_local.errors import UserError
from hermes_local.events import (
    Applied,
    AssistantText,
    BudgetWarning,
    Compaction,
    Delegation,
    Event,
    Guarded,
    LLMCall,
    McpServerFailed,
    Proposal,
    Rating,
    Reasoning,
    RehearsedCall,
    Routed,
    RunEnd,
    RunResumed,
    RunStart,
    StepStart,
    ToolCallStarted,
    ToolFinished,
    event_from_dict,
)
from hermes_local.textsafe import terminal_safe

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def sessions_dir() -> Path:
    return home_dir() / "sessions"


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def check_session_id(session_id: str) -> str:
    """`session_id` if it is a plain name (letters, digits, `.`, `_`, `-`), else a UserError."""
    if not _SESSION_ID.match(session_id) or ".." in session_id:
        raise UserError(f"{terminal_safe(session_id)!r} is not a session ID; see `hermes-local sessions list`")
    return session_id


class SessionLog:
    """Appends events to `<sessions>/<id>.jsonl` (locked while open); usable as an agent event sink."""

    def __init__(self, session_id: str | None = None) -> None:
        self.id = check_session_id(session_id) if session_id else new_session_id()
        directory = sessions_dir()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(
                directory / f"{self.id}.jsonl", os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600
            )
        except OSError as exc:
            raise UserError(
                f"cannot open the session log in {directory}: {exc.strerror}; check HERMES_LOCAL_HOME"
            ) from exc
        self.path = directory / f"{self.id}.jsonl"
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._fd)
            raise UserError(
                f"session {self.id} is in use by another hermes-local process; wait for it to finish"
            ) from exc
        self._needs_newline = self._ends_mid_line()

    def _ends_mid_line(self) -> bool:
        size = os.fstat(self._fd).st_size
        return size > 0 and os.pread(self._fd, 1, size - 1) != b"\n"

    def log(self, event: Event) -> None:
        if not event.logged:
            return
        data = {"ts": round(time.time(), 3), **event.to_dict()}
        line = json.dumps(data, ensure_ascii=True, default=str).encode("ascii") + b"\n"
        if self._needs_newline:
            line = b"\n" + line
        size = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)  # never leave a torn line behind
            self._needs_newline = self._ends_mid_line()
            raise UserError(
                f"cannot write the session log {self.path} ({exc.strerror or exc}); free disk space, then "
                f"continue with `hermes-local run --resume {self.id}`"
            ) from exc
        self._needs_newline = False

    __call__ = log

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SessionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class SessionInfo:
    """One line of `sessions list`."""

    id: str
    path: Path
    goal: str
    events: int
    stopped: str | None
    modified: float = 0.0  # the log's mtime (0.0 when it cannot be read)
    end: dict[str, Any] | None = None  # the last run_end's result (outcome, answer, usage), None if unfinished
    workspace: str = ""  # the folder it ran in ("" in older logs)


def session_path(session_id: str) -> Path:
    path = sessions_dir() / f"{check_session_id(session_id)}.jsonl"
    if not path.is_file():
        raise UserError(f"no session {session_id!r}; see `hermes-local sessions list`")
    return path


def read_events(path: Path, *, on_skip: Callable[[str], None] | None = None) -> list[Event]:
    """All events of a log; a torn or malformed line is skipped, with a one-line warning to `on_skip`."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read session log {path}: {exc.strerror}") from exc
    events: list[Event] = []
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line.decode("utf-8", errors="surrogateescape"))
            if not isinstance(data, dict):
                raise ValueError("not an object")
            events.append(event_from_dict(data))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            if on_skip is not None:
                on_skip(f"warning: skipped corrupt line {lineno} of {path.name} ({exc})"[:300])
    return events


def read_records(path: Path, *, on_skip: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The events of a log as plain dicts (for `sessions show --json`, export and tests)."""
    return [e.to_dict() for e in read_events(path, on_skip=on_skip)]


def events_to_resume(session_id: str, *, on_skip: Callable[[str], None] | None = None) -> list[Event]:
    """The events of a session that can be continued; one line naming the problem otherwise."""
    events = read_events(session_path(session_id), on_skip=on_skip)
    starts = [i for i, e in enumerate(events) if isinstance(e, RunStart | RunResumed)]
    if not starts or not any(isinstance(e, RunStart) for e in events):
        raise UserError(f"session {session_id} has no recorded start; it cannot be resumed")
    end = next((e for e in events[starts[-1] :] if isinstance(e, RunEnd)), None)
    if end is not None:
        raise UserError(
            f"session {session_id} already ended (stopped: {end.stopped}); see `hermes-local sessions show "
            f"{session_id}` or start a new run"
        )
    return events


def events_to_continue(session_id: str, *, on_skip: Callable[[str], None] | None = None) -> list[Event]:
    """The events of a finished session that a new message may follow (`run --continue ID`)."""
    events = read_events(session_path(session_id), on_skip=on_skip)
    if not any(isinstance(e, RunStart) for e in events):
        raise UserError(f"session {session_id} has no recorded start; it cannot be continued")
    last = next((e for e in reversed(events) if isinstance(e, RunStart | RunResumed | RunEnd)), None)
    if not isinstance(last, RunEnd):
        raise UserError(f"session {session_id} has not ended; finish it with: hermes-local run --resume {session_id}")
    return events


VERDICTS = ("good", "bad")


def rate_session(session_id: str, verdict: str, note: str = "") -> Rating:
    """Append the user's verdict on a finished run to its log (`sessions rate`); the last one counts."""
    if verdict not in VERDICTS:
        raise UserError(f"rate a run good or bad, not {terminal_safe(verdict)!r}: hermes-local sessions rate ID bad")
    if not any(isinstance(e, RunEnd) for e in read_events(session_path(session_id))):
        raise UserError(f"session {session_id} has not finished; rate it once it has (`hermes-local sessions list`)")
    rating = Rating(verdict, " ".join(note.split())[:2000])
    with SessionLog(session_id) as log:
        log.log(rating)
    return rating


def last_rating(events: list[Event]) -> Rating | None:
    """The user's verdict on a run (the last `sessions rate`), None when it was never rated."""
    return next((e for e in reversed(events) if isinstance(e, Rating)), None)


def recorded_dialect(events: list[Event]) -> str | None:
    """The dialect a logged run was started in (None for logs written before it was recorded)."""
    start = next((e for e in events if isinstance(e, RunStart)), None)
    return start.dialect or None if start is not None else None


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def list_sessions(last: int | None = None, only: Collection[str] | None = None) -> list[SessionInfo]:
    """The sessions by id (ids begin with their start time); with `last`, the `last` most recently written ones,
    oldest first; with `only`, just those ids."""
    paths = sorted(p for p in sessions_dir().glob("*.jsonl") if only is None or p.stem in only)
    modified = {p: _modified(p) for p in paths}
    if last:
        paths = sorted(paths, key=modified.__getitem__)[-last:]
    out = []
    for path in paths:
        try:
            events = read_events(path)
        except UserError:
            continue
        start = next((e for e in events if isinstance(e, RunStart)), None)
        end = next((e for e in reversed(events) if isinstance(e, RunEnd)), None)
        goal, where = (start.goal, start.workspace) if start else ("", "")
        stopped, result = (end.stopped, end.result) if end else (None, None)
        out.append(SessionInfo(path.stem, path, goal, len(events), stopped, modified[path], result, where))
    return out


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
SHOWN_LIVE += (BudgetWarning, Compaction, Routed, Delegation)


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
        return f"     {'✓' if e.outcome.ok else '✗'} {_one_line(e.outcome.summary)}{cached}"
    if isinstance(e, AssistantText):
        return describe_reply(e)
    if isinstance(e, Reasoning):
        return f"   thought: {_one_line(e.text)}"
    if isinstance(e, RehearsedCall):
        args = _one_line(json.dumps(e.arguments, ensure_ascii=False, default=str))
        return f"   (not run: {_one_line(e.name, 80)}({args}) was only written inside the thought)"
    if isinstance(e, Guarded):
        if what := {"empty": "an empty reply", "echoed": "a reply of only a made-up tool result"}.get(e.reason):
            return f"   (dropped: {what} was sent back" + (f"; asked for {_one_line(e.tool, 80)})" if e.tool else ")")
        why = {"no_success": "no call had succeeded", "figures": "figures in no tool result", "repeated": "a repeat"}
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
    if isinstance(e, Proposal):
        args = _one_line(json.dumps(e.arguments, ensure_ascii=False, default=str))
        return f"   (proposed, not run: {_one_line(e.name, 80)}({args}); `sessions apply` runs it)"
    if isinstance(e, Applied) and e.outcome is not None:
        mark = "✓" if e.outcome.get("ok") is True else "✗"
        return f"applied proposal {e.index}: {mark} {_one_line(e.outcome.get('summary', ''))}"
    if isinstance(e, Rating):
        return f"rated {_one_line(e.verdict, 10)}" + (f": {_one_line(e.note)}" if e.note else "")
    if isinstance(e, Routed):
        kept = f" with {_one_line(', '.join(e.toolsets), 200) or 'no toolsets'}" if e.toolsets is not None else ""
        return f"routed ({_one_line(e.router, 12)}) to {_one_line(e.chosen, 40)}{kept}: {_one_line(e.reason)}"
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
        if path is not None and path.stem not in shown and depth < 4 and _SESSION_ID.match(path.stem):
            if path.is_file():
                shown.add(path.stem)
                lines += ["      │ " + child for child in describe_events(read_events(path), depth=depth + 1)[1:]]
    return lines
