"""Token budgets: `max_run_tokens` for one run and `max_day_tokens` for all runs of one day.

A run's tokens are the prompt tokens the engine evaluated plus the tokens it generated (what a model
call costs; prompt tokens served from the KV cache are free). `TokenBudget.charge` counts one call into
the run and, with a day limit, into today's total, kept in `$HERMES_LOCAL_HOME/usage/YYYY-MM-DD.json`
(read and written under a file lock, so runs of one machine share it). `warning()` says once per limit
when 80 % is used; `exhausted()` says why the next model call must not start. Both limits are off
(None) by default. Does not call the model or decide how the loop ends (the loop does, with
stopped="budget").
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
from pathlib import Path

WARN_FRACTION = 0.8


class DayUsage:
    """Today's token total on disk, shared by every run of this home."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self) -> Path:
        return self.folder / f"{datetime.date.today().isoformat()}.json"

    def add(self, tokens: int) -> int:
        """Add `tokens` to today's total and return the new total."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path(), os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            total = _read_total(fh.read()) + tokens
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({"tokens": total}))
        return total

    def total(self) -> int:
        try:
            return _read_total(self._path().read_text(encoding="utf-8"))
        except OSError:
            return 0


def _read_total(text: str) -> int:
    try:
        return int(json.loads(text or "{}").get("tokens", 0))
    except (ValueError, AttributeError, TypeError):
        return 0  # a damaged file counts as a fresh day rather than blocking every run


class TokenBudget:
    """The run's and the day's token limits (None: no limit) and what has been used against them."""

    def __init__(self, max_run: int | None, max_day: int | None, day: DayUsage | None) -> None:
        self.max_run, self.max_day, self.day = max_run, max_day, day
        self.run_used = 0
        self.day_used = day.total() if (day is not None and max_day) else 0
        self._warned: set[str] = set()

    def charge(self, tokens: int) -> None:
        self.run_used += tokens
        if self.day is not None and self.max_day:
            self.day_used = self.day.add(tokens)

    def _limits(self) -> list[tuple[str, int, int, str]]:
        out = []
        if self.max_run:
            out.append(("run", self.run_used, self.max_run, "max_run_tokens"))
        if self.max_day:
            out.append(("day", self.day_used, self.max_day, "max_day_tokens"))
        return out

    def warning(self) -> str | None:
        """A one-time line when a limit is 80 % used (None otherwise)."""
        for scope, used, limit, name in self._limits():
            if used >= WARN_FRACTION * limit and scope not in self._warned and used < limit:
                self._warned.add(scope)
                return f"this {scope} has used {used} of its {limit} tokens ({name}); the run stops at the limit"
        return None

    def exhausted(self) -> str | None:
        """Why no further model call may start (a limit reached), or None."""
        for scope, used, limit, name in self._limits():
            if used >= limit:
                where = "in config.toml or HERMES_LOCAL_" + name.upper()
                return f"the {scope}'s token budget is spent ({used} of {name} = {limit}); raise {name} {where}"
        return None
