"""Sessions: an append-only JSONL log of typed events per run under `$HERMES_LOCAL_HOME/sessions/`.

Each event is one line of ASCII JSON (every non-ASCII character escaped, lone surrogates included), written with one
`write` and flushed, so a crash loses at most the event in flight and any string round-trips; lines are split on `\\n`
only. A failed write (disk full) is rolled back to the last complete line and stops the run with one line; the next
append starts on a fresh line. A session ID is a name, never a path. A log is locked while a process appends to it, so
two processes cannot resume the same session. Reading skips a torn or malformed line, with a warning line to the
caller's `on_skip` (the CLI prints it). `rate_session` appends the user's verdict (`Rating`) to a finished run's log.
Does not run the agent or print; `describe.py` formats events for people (terminal-safe).
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
    Event,
    Rating,
    RunEnd,
    RunResumed,
    RunStart,
    event_from_dict,
)
from hermes_local.textsafe import terminal_safe

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def sessions_dir() -> Path:
    return home_dir() / "sessions"


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def valid_session_id(session_id: str) -> bool:
    """Whether `session_id` is a plain name (letters, digits, `.`, `_`, `-`), never a path."""
    return bool(_SESSION_ID.match(session_id)) and ".." not in session_id


def check_session_id(session_id: str) -> str:
    """`session_id` if it is a plain name (letters, digits, `.`, `_`, `-`), else a UserError."""
    if not valid_session_id(session_id):
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
