"""Pids cgroups ("cages") for the commands the agent starts: cap their process count and find them all.

A cage caps the processes of one command even for root, whom RLIMIT_NPROC does not bind, and lists every
descendant, also those that left the process group with `setsid`, so killing a command kills all of it.
Cages exist only where this process may create a pids cgroup (cgroup v1 `pids`, or v2 with pids
delegated); elsewhere `PidsCage.create` returns None and callers go on without. Empty cages of finished
commands are removed (`sweep_cages`, and at exit). Does not spawn or track commands (`procs.py` does).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_counter = itertools.count(1)


def _pids_cgroup_root() -> Path | None:
    """The agent's own pids cgroup directory when it is writable (cgroup v1 `pids`, or v2 with pids)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for mount in mounts:
            left, _, right = mount.partition(" - ")
            fstype, _, options = (right.split(" ") + ["", "", ""])[:3]
            point = left.split(" ")[4]
            if controllers == "pids" and fstype == "cgroup" and "pids" in options.split(","):
                base = Path(point) / path.lstrip("/")
            elif controllers == "" and fstype == "cgroup2":
                base = Path(point) / path.lstrip("/")
                try:
                    if "pids" not in (base / "cgroup.subtree_control").read_text().split():
                        continue
                except OSError:
                    continue
            else:
                continue
            if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
                return base
    return None


_cage_root: list[Path | None] = []


def cgroup_mounts() -> list[bytes]:
    """Mount points of every cgroup (v1 or v2) filesystem this process sees, as bytes (for mount(2))."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ")[0] in ("cgroup", "cgroup2"):
            points.append(os.fsencode(left.split(" ")[4].replace("\\040", " ")))
    return points


def cage_root() -> Path | None:
    if not _cage_root:
        _cage_root.append(_pids_cgroup_root())
    return _cage_root[0]


@dataclass
class PidsCage:
    """A pids cgroup for one command: caps how many processes it has and finds every one of them."""

    path: Path
    procs_fd: int = -1

    @classmethod
    def create(cls, max_processes: int) -> PidsCage | None:
        root = cage_root()
        if root is None:
            return None
        path = root / f"hermes-local-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
            if max_processes:
                (path / "pids.max").write_text(str(max_processes))
            fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path, fd)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def limit_hit(self) -> bool:
        """Whether a fork was refused because the cage was full."""
        try:
            for line in (self.path / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max" and int(value) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def kill(self) -> None:
        """SIGKILL every process in the cage, again while new ones appear (a fork bomb refills it meanwhile).

        A killed process cannot fork any more, so once a read of the cage after a short pause shows
        no process that was not already killed, nothing is left that can run; the dying ones may
        still be listed for a while (namespace teardown) and are not waited for.
        """
        kill_file = self.path / "cgroup.kill"
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        killed: set[int] = set()
        for _ in range(500):
            fresh = [pid for pid in self.pids() if pid not in killed]
            if not fresh:
                time.sleep(0.001)
                if not [pid for pid in self.pids() if pid not in killed]:
                    return
                continue
            for pid in fresh:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            killed.update(fresh)

    def remove(self) -> None:
        """Kill everything and remove the cgroup; if dying processes still hold it, retry on a later call."""
        self.kill()
        if self.procs_fd >= 0:
            os.close(self.procs_fd)
            self.procs_fd = -1
        _leftover_cages.append(self.path)
        sweep_cages()


_leftover_cages: list[Path] = []


def sweep_cages() -> None:
    """Remove the cgroups of finished commands that are empty by now (cheap; never waits)."""
    for path in list(_leftover_cages):
        try:
            path.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        with contextlib.suppress(ValueError):
            _leftover_cages.remove(path)


def _sweep_at_exit() -> None:
    for _ in range(50):
        sweep_cages()
        if not _leftover_cages:
            return
        time.sleep(0.02)


atexit.register(_sweep_at_exit)
