"""Processes the agent starts: spawn them limited, keep a registry, and kill them all when the agent stops.

`spawn()` starts a program in its own session with, in the child before exec: a parent-death signal
(SIGKILL when the spawning thread dies, so a SIGKILLed agent takes its direct children along), the
resource limits of `sandbox.Limits` (setrlimit), and membership of a fresh pids cgroup when this
process may create one (`cgroup.PidsCage`: caps the process count even for root, whom RLIMIT_NPROC does not
bind, and finds descendants that left the process group with `setsid`). Every live command is in a
registry, tagged with the owner set by `own()` in the spawning thread (the service's run id), so
`kill_owned()` stops one run's commands; `kill_all()` runs from SIGINT/SIGTERM handlers and at exit.
A small reaper process (started on the first spawn, in its own session) holds the other end of a
pipe: when the agent dies in a way no handler sees (SIGKILL, OOM killer), it reads EOF and kills the
process groups and cages that were still live. `kill_tagged` kills the processes whose environment
carries a tag (`new_tag`), daemons that left their group included. Without bwrap (see `policy.py`) and without a pids
cgroup, a grandchild that left the process group (`setsid`) can outlive a SIGKILLed agent: that is
the case the sandbox's PID namespace closes.
Does not decide what runs or where (`policy.py`, `tools/builtin/shell.py`).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import ctypes
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.sandbox.cgroup import PidsCage, cgroup_mounts
from hermes_local.sandbox.policy import Limits, user_process_count

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP, CAP_SYS_ADMIN, CAP_SYS_PTRACE = 24, 21, 19
CLONE_NEWNS, MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 1, 32, 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = getattr(_libc, "prctl", None)  # Linux only; elsewhere no parent-death signal (the reaper still runs)
_unshare = getattr(_libc, "unshare", None)
_mount = getattr(_libc, "mount", None)
_counter = itertools.count(1)

# -- the registry of live commands ----------------------------------------------------------------

_live: dict[int, tuple[Callable[[], None], str | None]] = {}  # token -> (killer, owner)
_lock = threading.RLock()  # re-entrant: kill_all may run in a signal handler on the thread holding it
_owner: contextvars.ContextVar[str | None] = contextvars.ContextVar("hermes_procs_owner", default=None)
_stopped: set[str] = set()  # owners whose commands may no longer start (a cancelled service run)


class OwnerStopped(RuntimeError):
    """`spawn()` under an owner that `stop_owned()` stopped: the command is not started."""


def own(owner: str | None) -> None:
    """Tag the commands this thread (context) spawns from now on with `owner` (e.g. a service run id)."""
    _owner.set(owner)


def register(killer: Callable[[], None]) -> int:
    """Remember how to kill a live command; returns the token for `unregister`."""
    token = next(_counter)
    with _lock:
        _live[token] = (killer, _owner.get())
    return token


def unregister(token: int) -> None:
    with _lock:
        _live.pop(token, None)


def kill_owned(owner: str) -> int:
    """SIGKILL the live commands spawned under `own(owner)`; how many there were."""
    return _kill(lambda who: who == owner)


def stop_owned(owner: str) -> int:
    """Kill the owner's live commands and refuse every later `spawn()` under it; how many were killed.

    Atomic with `spawn()`: a command is either refused or registered (and then killed here), so a
    cancel that races an approval never lets the approved command run on.
    """
    with _lock:
        _stopped.add(owner)
    return kill_owned(owner)


def live_count() -> int:
    return len(_live)


def kill_all() -> None:
    """SIGKILL every live command (and its cage). Safe from signal handlers and atexit."""
    _kill(lambda who: True)


def _kill(chosen: Callable[[str | None], bool]) -> int:
    with _lock:
        killers = [kill for kill, who in _live.values() if chosen(who)]
    for kill in killers:
        with contextlib.suppress(Exception):
            kill()
    return len(killers)


atexit.register(kill_all)


def install_signal_handlers() -> bool:
    """On SIGINT/SIGTERM/SIGHUP first kill every live command, then do what the signal did before.

    Only possible from the main thread (returns False elsewhere). SIGINT still raises KeyboardInterrupt
    and SIGTERM/SIGHUP end the process with SystemExit(128 + signal) unless a handler was installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(signum)
        if getattr(previous, "_hermes_kills_tools", False) or previous == signal.SIG_IGN:
            continue
        signal.signal(signum, _handler(signum, previous))
    return True


def _handler(signum: int, previous: Any) -> Callable[[int, Any], None]:
    def handle(sig: int, frame: Any) -> None:
        kill_all()
        if callable(previous):
            previous(sig, frame)
        else:
            raise SystemExit(128 + signum)

    handle._hermes_kills_tools = True  # type: ignore[attr-defined]
    return handle


# -- the reaper: kills what is left when the agent dies without running any handler (SIGKILL) ------

REAPER = """
import os, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
live = {}
for line in sys.stdin:
    op, _, rest = line.rstrip("\\n").partition(" ")
    pgid, _, cage = rest.partition(" ")
    if op == "+":
        live[pgid] = cage
    else:
        live.pop(pgid, None)
for pgid, cage in live.items():
    try:
        os.killpg(int(pgid), signal.SIGKILL)
    except OSError:
        pass
    for _ in range(100 if cage else 0):
        try:
            pids = open(os.path.join(cage, "cgroup.procs")).read().split()
        except OSError:
            break
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    for _ in range(50 if cage else 0):
        try:
            os.rmdir(cage)
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.02)
"""
_reaper: list[subprocess.Popen] = []


def _tell_reaper(line: str) -> None:
    """Send one line to the reaper process, starting it on first use (best effort: never fails a call)."""
    with _lock:
        try:
            if not _reaper or _reaper[0].poll() is not None:
                _reaper[:] = [
                    subprocess.Popen(
                        [sys.executable, "-I", "-S", "-c", REAPER],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                        close_fds=True,
                        text=True,
                    )
                ]
            stdin = _reaper[0].stdin
            assert stdin is not None
            stdin.write(line + "\n")
            stdin.flush()
        except (OSError, ValueError, AssertionError):
            pass


# -- spawning -------------------------------------------------------------------------------------


def _child_setup(
    rlimits: list[tuple[int, int]], cage_fd: int, parent: int, freeze: Sequence[bytes] = ()
) -> Callable[[], None]:
    """The function run in the child between fork and exec (no allocation-heavy work, no locks).

    `freeze`: cgroup mount points to make read-only in a private mount namespace, for a root command
    outside bwrap, which then also loses CAP_SYS_ADMIN and CAP_SYS_PTRACE (no remount, no /proc/1/root):
    it cannot move itself out of its cage.
    """
    import resource

    def setup() -> None:
        if cage_fd >= 0:
            os.write(cage_fd, b"0")
        if freeze and _unshare is not None and _mount is not None and _unshare(CLONE_NEWNS) == 0:
            _mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
            for point in freeze:
                _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
            if _prctl is not None:
                for cap in (CAP_SYS_ADMIN, CAP_SYS_PTRACE):
                    _prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the agent died before the line above
            os._exit(137)
        for res, value in rlimits:  # never looser than a limit the user already set (ulimit)
            soft, hard = resource.getrlimit(res)
            # CPU: SIGXCPU at the soft limit (reported as such), SIGKILL one second later.
            want = value + 1 if res == resource.RLIMIT_CPU else value
            top = want if hard == resource.RLIM_INFINITY else min(want, hard)
            low = value if soft == resource.RLIM_INFINITY else min(value, soft)
            resource.setrlimit(res, (min(low, top), top))

    return setup


@dataclass
class Running:
    """A spawned command: its Popen, its cage (if any) and its registry token."""

    proc: subprocess.Popen
    cage: PidsCage | None = None
    token: int = 0
    closed: bool = field(default=False)

    def kill(self) -> None:
        """SIGKILL the process group and everything in the cage (idempotent)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.cage is not None:
            self.cage.kill()

    def limit_hit(self) -> bool:
        return self.cage is not None and self.cage.limit_hit()

    def close(self) -> None:
        """Kill everything, reap the process, remove the cage, leave the registry."""
        if self.closed:
            return
        self.kill()
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2.0)
        for _ in range(20):  # a process forked while the group was being killed escaped that killpg
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.002)
        if self.cage is not None:
            self.cage.remove()
        unregister(self.token)
        _tell_reaper(f"- {self.proc.pid}")
        self.closed = True


def spawn(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    env: dict[str, str],
    limits: Limits | None = None,
    confine_root: bool = False,
    **popen: Any,
) -> Running:
    """Start `argv` in its own session with limits, parent-death signal and cage; registered until closed.

    `confine_root`: the command runs outside bwrap; when the agent is root, the cage's cgroup mounts are
    read-only for it and it loses CAP_SYS_ADMIN and CAP_SYS_PTRACE, so it cannot leave its cage.
    """
    limits = limits or Limits(0, 0, 0, 0)
    owner = _owner.get()
    if owner is not None and owner in _stopped:
        raise OwnerStopped(f"not started: run {owner} was cancelled")
    cage = PidsCage.create(limits.processes) if limits.processes else None
    running_procs = 0 if os.geteuid() == 0 or not limits.processes else user_process_count()
    freeze = cgroup_mounts() if confine_root and cage is not None and os.geteuid() == 0 else ()
    setup = _child_setup(limits.rlimits(running_procs), cage.procs_fd if cage else -1, os.getpid(), freeze)
    try:
        with _lock:  # with stop_owned: refused, or registered before it kills
            if owner is not None and owner in _stopped:
                raise OwnerStopped(f"not started: run {owner} was cancelled")
            proc = subprocess.Popen(
                list(argv), cwd=str(cwd), env=env, start_new_session=True, close_fds=True, preexec_fn=setup, **popen
            )
            running = Running(proc, cage)
            running.token = register(running.kill)
    except BaseException:
        if cage is not None:
            cage.remove()
        raise
    _tell_reaper(f"+ {proc.pid} {cage.path if cage else ''}".rstrip())
    return running


TAG_VARIABLE = "HERMES_LOCAL_PROCESS_TAG"


def new_tag() -> str:
    """A fresh value for `TAG_VARIABLE`: set it in a program's environment, then `kill_tagged` finds its descendants."""
    import secrets

    return secrets.token_hex(8)


def kill_tagged(tag: str) -> int:
    """SIGKILL every process of this user whose environment carries `TAG_VARIABLE=tag`; how many were killed.

    Descendants inherit the environment even when they leave the process group (`setsid`, a daemon's double
    fork), so this reaches what a process-group kill misses for programs started outside the sandbox.
    """
    marker = f"{TAG_VARIABLE}={tag}".encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if marker in environ.split(b"\0"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed
