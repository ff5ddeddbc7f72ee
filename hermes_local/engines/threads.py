"""How many threads llama.cpp should use now: the cores this process may run on that others leave free.

All cores busy-waiting on each other costs 6-8x when another program keeps one core busy (issue 28:
a 2-core machine with one CPU-bound process took 250.7 s with 2 threads, 42.8 s with 1), so `auto`
(n_threads unset) counts the usable cores (`os.sched_getaffinity`) and subtracts those kept busy by
other processes, measured from `/proc/stat` (the busy time of those cores) minus this process's own
CPU time over the same interval. A core counts as taken when others use more than half of it.
`ThreadChooser.choose()` is cheap (two small reads): between model calls it uses the interval since
the previous call; when that sample is older than `stale_s` (a new run after a pause) it takes a
fresh `sample_s` one first. The reading is injectable (`read`), so the choice is testable without
load. Where /proc/stat cannot be read (not Linux), it falls back to `os.getloadavg()` (minus this
process's own CPU share). Does not talk to llama.cpp: `engines/inprocess/llamacpp.py` applies
the number.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuReading:
    """Cumulative seconds at one moment: busy time of the usable cores, this process's CPU time, the clock."""

    busy_s: float  # busy (non-idle, non-iowait) seconds of the usable cores since boot
    own_s: float  # CPU seconds of this process (all its threads) so far
    at_s: float  # time.monotonic()
    load: float | None = None  # the load average, where /proc/stat could not be read (then busy_s is unused)


def usable_cores() -> list[int]:
    """The CPUs this process may run on (its affinity mask), else all of them."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def read_proc_stat(cores: Sequence[int], path: str = "/proc/stat") -> CpuReading:
    """One reading of the busy time of `cores` from /proc/stat, with this process's CPU time."""
    wanted = {f"cpu{c}" for c in cores}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = 0.0
    with open(path, encoding="ascii") as fh:
        for line in fh:
            fields = line.split()
            if fields and fields[0] in wanted:
                values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
                busy += sum(values) - values[3] - values[4]
    return CpuReading(busy / tick, time.process_time(), time.monotonic())


def loadavg_reading() -> CpuReading:
    """Without /proc/stat: the 1-minute load average stands for the busy cores (`load` set, `busy_s` unused)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return CpuReading(0.0, time.process_time(), time.monotonic(), load=load)


def busy_by_others(before: CpuReading, after: CpuReading) -> float:
    """Cores kept busy by other processes between two readings (0 when the interval is empty)."""
    wall = after.at_s - before.at_s
    if wall <= 0:
        return 0.0
    own = (after.own_s - before.own_s) / wall
    if after.load is not None:
        return max(0.0, after.load - own)
    return max(0.0, (after.busy_s - before.busy_s) / wall - own)


def threads_for(usable: int, busy_others: float) -> int:
    """The usable cores minus those others keep busy (a core counts when others use more than half of it)."""
    taken = int(busy_others + 0.5)
    return max(1, min(usable, usable - taken))


class ThreadChooser:
    """The `auto` thread count, re-checked cheaply per model call (see the module docstring)."""

    def __init__(
        self,
        cores: Sequence[int] | None = None,
        read: Callable[[], CpuReading] | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        sample_s: float = 0.1,
        stale_s: float = 3.0,
    ) -> None:
        self.cores = list(cores) if cores is not None else usable_cores()
        self._read = read or self._default_reader()
        self._sleep = sleep
        self.sample_s, self.stale_s = sample_s, stale_s
        self._last: CpuReading | None = None
        self.busy_others = 0.0
        self.threads = len(self.cores)

    def _default_reader(self) -> Callable[[], CpuReading]:
        try:
            read_proc_stat(self.cores)
            return lambda: read_proc_stat(self.cores)
        except (OSError, ValueError):
            return loadavg_reading

    def choose(self) -> int:
        """The thread count for the next call: from the interval since the previous check (or a fresh sample)."""
        now = self._read()
        if self._last is None or now.at_s - self._last.at_s > self.stale_s:
            self._sleep(self.sample_s)
            self._last, now = now, self._read()
        self.busy_others = busy_by_others(self._last, now)
        self._last = now
        self.threads = threads_for(len(self.cores), self.busy_others)
        return self.threads

    def describe(self) -> str:
        """`threads auto: 1 of 2 cores (others keep 1.0 busy)`, for doctor and a run's first line."""
        n = len(self.cores)
        cores = f"{n} core{'s' if n != 1 else ''}"
        return f"threads auto: {self.threads} of {cores} (others keep {self.busy_others:.1f} busy)"


def describe_threads(n_threads: int | None, chooser: ThreadChooser | None = None, *, by: str = "n_threads") -> str:
    """The line for an explicit count (`threads 4 (set by n_threads)`, `by` naming who set it: the setting, or
    `models qualify`), or for `auto`: `chooser`'s choice, measured now."""
    if n_threads:
        return f"threads {n_threads} (set by {by})"
    chooser = chooser or ThreadChooser()
    chooser.choose()
    return chooser.describe()
