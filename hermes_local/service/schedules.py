"""Schedules kept under `$HERMES_LOCAL_HOME/schedules/`: what runs when, and what happened last time.

A `Schedule` is a name, a 5-field cron expression (minute hour day-of-month month day-of-week, local
time, read by `croniter`), a task or a workflow file, the workspace, its own allow-list (the only write
and dangerous tools its unattended runs may use) and run options. `add`, `get` and `remove`
keep one JSON file a schedule (`NAME.json`, written whole through a temporary file, mode 0600; a cron line
with no next time, such as 30 February, is refused at `add`); `scan` sorts them into those that run and those
that cannot (a file that does not load or whose cron cannot be computed: `Broken`); the
outcome of its latest run (`last_*` fields) is written to the same file. `due(schedule, now)` says whether
a run is due and whether it was missed (its time passed more than `MISSED_AFTER` seconds ago: the machine
slept or nothing ran): a missed run runs once, whatever number of times were missed. `ScheduleLock` is an
exclusive `flock` on `NAME.lock`, held for a run: two runs of one schedule never overlap, also between
`serve` and `schedule daemon`. The folder lives in the agent's home, out of every tool's reach. Does not
run anything (`scheduler.py` does) or print.

The workspace is kept as its path and the folder's identity (`folder`: device and inode, recorded by `add`), which
each run checks again (`scheduler.py`): a folder swapped since is refused, never redirected.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hermes_local.config import home_dir
from hermes_local.errors import UserError
from hermes_local.sandbox.workspace import PinnedWorkspace

MISSED_AFTER = 90.0  # seconds late after which a due run counts as missed (and says so)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def schedules_dir() -> Path:
    return home_dir() / "schedules"


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name) or ".." in name:
        shown = json.dumps(name[:80])
        raise UserError(f"schedule name {shown} is not a plain name; use letters, digits, '.', '_' or '-' (≤ 64)")
    return name


def check_cron(expression: str) -> str:
    """The expression, if it is a valid 5-field cron line; else one line showing the form."""
    from croniter import croniter

    fields = expression.split()
    if len(fields) != 5 or not croniter.is_valid(" ".join(fields)):
        raise UserError(
            f"--cron {json.dumps(expression[:80])} is not a 5-field cron expression "
            '(minute hour day month weekday), e.g. "0 8 * * 1-5" for 08:00 on weekdays'
        )
    cron = " ".join(fields)
    problem = cron_problem(cron)
    if problem:
        raise UserError(f"--cron {json.dumps(cron)} {problem}")
    return cron


def cron_problem(cron: str, now: float | None = None) -> str:
    """Why `cron` cannot be scheduled from `now` ("" when it can): a day that no named month has."""
    from croniter import CroniterBadDateError

    now = time.time() if now is None else now
    try:
        next_time(cron, now)
        last_time(cron, now)
    except CroniterBadDateError:
        return (
            "never comes round: no month it names has that day (30 February, 31 April, ...); "
            "pick a day every month it names has, e.g. 28 for February"
        )
    except (ValueError, KeyError, OverflowError) as exc:  # a field croniter accepted but cannot compute
        return f"cannot be computed ({type(exc).__name__}); write it again as minute hour day month weekday"
    return ""


def _local(ts: float) -> datetime:
    return datetime.fromtimestamp(ts).astimezone()


def next_time(cron: str, after: float) -> float:
    """The first time the expression names strictly after `after` (local time), as a timestamp."""
    from croniter import croniter

    return float(croniter(cron, _local(after)).get_next(datetime).timestamp())


def last_time(cron: str, until: float) -> float:
    """The latest time the expression names at or before `until`."""
    from croniter import croniter

    return float(croniter(cron, _local(until + 1)).get_prev(datetime).timestamp())


class Schedule(BaseModel):
    """One schedule: its definition (set by `schedule add`) and its latest outcome (set by the scheduler)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    cron: str
    task: str | None = None
    workflow: str | None = None  # an absolute path to the workflow's TOML file
    workspace: str
    folder: dict[str, Any] | None = None  # the workspace's identity when added (`FolderId`; None: an older file)
    allow: list[str] = Field(default_factory=list)
    max_steps: int | None = Field(None, ge=1, le=100)
    tool_choice: Literal["auto", "required", "none"] | None = None
    instructions: str | None = Field(None, max_length=20_000)  # a task's standing rules (after the configured ones)
    db: str | None = None  # a workflow's database
    vars: dict[str, str] = Field(default_factory=dict)  # a workflow's variables (`--var NAME=VALUE`)
    created: float = Field(default_factory=time.time)
    last_due: float | None = None  # the scheduled time most recently handled
    last_started: float | None = None
    last_session: str | None = None
    last_status: str | None = None  # answer, max_steps, error, ok, failed, skipped, ...
    last_note: str | None = None  # e.g. that the run was a missed one, and the calls that were denied

    @property
    def target(self) -> str:
        return self.task if self.task is not None else f"workflow {self.workflow}"

    def listing(self) -> dict[str, Any]:
        """The `schedule list --json` object."""
        nxt = next_time(self.cron, max(time.time(), self.last_due or 0.0))
        return self.model_dump() | {"next": round(nxt, 3)}


def _path(name: str, suffix: str = ".json") -> Path:
    return schedules_dir() / f"{check_name(name)}{suffix}"


def save(schedule: Schedule) -> None:
    folder = schedules_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = folder / f".{schedule.name}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(schedule.model_dump(), indent=1))
        os.replace(temp, _path(schedule.name))
    except OSError as exc:
        problem = f"cannot write schedule {schedule.name} in {folder}: {exc.strerror}"
        raise UserError(f"{problem}; check HERMES_LOCAL_HOME") from exc


def get(name: str) -> Schedule:
    path = _path(name)
    try:
        return Schedule.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise UserError(f"no schedule {name!r}; see `hermes-local schedule list`") from None
    except (OSError, ValidationError, ValueError) as exc:
        problem = f"schedule file {path} is unreadable ({exc.__class__.__name__})"
        raise UserError(f"{problem}; remove it and add it again") from exc


@dataclass(frozen=True)
class Broken:
    """A schedule file that cannot be run: its name, the one-line reason, and the file's state when read
    (`version`: size and change time, so a reader reports it once per change of the file, not at every look)."""

    name: str
    line: str
    version: tuple[int, int]

    def listing(self) -> dict[str, Any]:
        """The `schedule list --json` object of a broken schedule."""
        return {"name": self.name, "broken": self.line}


def scan(now: float | None = None) -> tuple[list[Schedule], list[Broken]]:
    """(every schedule that loads and whose next time can be computed, every one that cannot), by name.

    A broken file never stops the others: the scheduler runs the good ones and reports each broken one."""
    good: list[Schedule] = []
    broken: list[Broken] = []
    folder = schedules_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            st = path.stat()
            version = (st.st_size, st.st_mtime_ns)
        except OSError:
            continue  # removed meanwhile
        try:
            schedule = get(path.stem)
        except UserError as exc:
            broken.append(Broken(path.stem, exc.line, version))
            continue
        problem = cron_problem(schedule.cron, now)
        if problem:
            line = f"schedule {schedule.name}: its cron {json.dumps(schedule.cron)} {problem}"
            broken.append(Broken(schedule.name, f"{line} (schedule add {schedule.name} --replace ...)", version))
        else:
            good.append(schedule)
    return good, broken


def add(schedule: Schedule, *, replace: bool = False) -> None:
    """Save a new schedule (or replace one), recording its workspace folder's identity now: each run checks it."""
    check_name(schedule.name)
    check_cron(schedule.cron)
    if not replace and _path(schedule.name).exists():
        raise UserError(f"schedule {schedule.name!r} exists; remove it first (hermes-local schedule remove NAME)")
    with PinnedWorkspace.open(schedule.workspace) as pin:
        schedule.workspace, schedule.folder = str(pin.path), pin.identity.to_dict()
    save(schedule)


def remove(name: str) -> None:
    path = _path(name)
    if not path.exists():
        raise UserError(f"no schedule {name!r}; see `hermes-local schedule list`")
    path.unlink()
    with contextlib.suppress(OSError):
        _path(name, ".lock").unlink()


def due(schedule: Schedule, now: float) -> tuple[float, float | None] | None:
    """(the scheduled time to run for, the first missed time or None) when a run is due at `now`; else None."""
    start = schedule.last_due if schedule.last_due is not None else schedule.created
    upcoming = next_time(schedule.cron, start)
    if upcoming > now:
        return None
    latest = last_time(schedule.cron, now)  # several missed times: one run, for the latest
    return latest, upcoming if now - upcoming > MISSED_AFTER else None


class ScheduleLock:
    """An exclusive lock on one schedule (`NAME.lock`), taken without waiting: `acquire()` says if it got it."""

    def __init__(self, name: str) -> None:
        self.path = _path(name, ".lock")
        self._fd = -1

    def acquire(self) -> bool:
        schedules_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def check_idle(name: str) -> None:
    """A UserError when a run of schedule `name` is going (in this or another process)."""
    lock = ScheduleLock(name)
    if not lock.acquire():
        raise UserError(f"schedule {name} is running now; wait for that run to finish")
    lock.release()
