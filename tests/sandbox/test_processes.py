"""Stopping the agent stops its commands: SIGKILL, SIGTERM and SIGINT of a real agent process.

The agent runs as a subprocess (`python -m hermes_local run --model replay:FILE --allow run_shell`)
whose replayed model calls `run_shell` with long sleeps, some escaping the process group (`setsid`,
double fork). The test waits until they run, signals the agent, and then looks in /proc: nothing
may be left. Also: the live-command registry and the reaper, driven directly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_local.engines.replay import tool_call_text, write_replay
from hermes_local.sandbox import cgroup, procs
from hermes_local.sandbox.policy import Limits, bwrap_status

REPO = Path(__file__).resolve().parents[2]
BWRAP_WORKS, BWRAP_WHY = bwrap_status()
needs_bwrap = pytest.mark.skipif(not BWRAP_WORKS, reason=f"bwrap sandbox unavailable here: {BWRAP_WHY}")
HAS_CAGE = cgroup.cage_root() is not None


def alive(marker: str, pids: bool = False) -> list[str]:
    """Command lines (or pids) of live, non-zombie processes whose command line contains `marker`."""
    found = []
    for pid in Path("/proc").iterdir():
        if pid.name.isdigit():
            try:
                cmdline = (pid / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = next(line for line in (pid / "status").read_text().splitlines() if line.startswith("State"))
            except (OSError, StopIteration):
                continue
            if marker in cmdline and "zombie" not in state:
                found.append(pid.name if pids else cmdline)
    return found


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def start_agent(tmp_path: Path, command: str, mode: str) -> subprocess.Popen:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    replay = write_replay(tmp_path / "replay.jsonl", [tool_call_text("run_shell", command=command), "Done."])
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "HERMES_LOCAL_TOOL_TIMEOUT": "60",
    }
    argv = [sys.executable, "-m", "hermes_local", "run", "task", "--model", f"replay:{replay}"]
    argv += ["--workspace", str(ws), "--allow", "run_shell", "--sandbox", mode, "--json"]
    return subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        # A job started with `&` by a non-interactive shell inherits SIGINT ignored, and the agent rightly
        # keeps an ignored SIGINT ignored (nohup): give it the terminal's default, whatever ran pytest.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def commands_for(mode: str, m: str) -> tuple[str, list[str]]:
    """A command with sleeps marked `m`, and the markers that must die with the agent in this mode."""
    plain = f"sleep {m}1 & sleep {m}2; touch finished"  # background child + foreground child of sh
    escapes = f"setsid sleep {m}3 & (sh -c 'sleep {m}4 &' &); "  # own session; double fork
    if mode == "auto" or HAS_CAGE:
        return escapes + plain, [f"sleep {m}{i}" for i in range(1, 5)]
    return plain, [f"sleep {m}1", f"sleep {m}2"]


MODES = [pytest.param("auto", marks=needs_bwrap), "off"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["KILL", "TERM", "INT"])
def test_stopping_the_agent_kills_every_command_it_started(tmp_path: Path, mode: str, signum: int) -> None:
    marker = f"5{signum}.{os.getpid() % 1000:03d}"
    command, markers = commands_for(mode, marker)
    agent = start_agent(tmp_path, command, mode)
    try:
        running = wait_for(lambda: all(alive(m) for m in markers), 20)
        assert running, (markers, agent.poll(), agent.stderr.read().decode() if agent.poll() is not None else "")
        agent.send_signal(signum)
        agent.wait(timeout=10)
        assert wait_for(lambda: not any(alive(m) for m in markers), 5), [alive(m) for m in markers]
        assert not (tmp_path / "ws" / "finished").exists()
        if signum == signal.SIGTERM:
            assert agent.returncode == 128 + signal.SIGTERM
        elif signum == signal.SIGINT:
            assert agent.returncode == 130 and b"interrupted" in agent.stderr.read()
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.wait()
        for m in markers:  # never leave sleeps behind, even when the test fails
            for pid in alive(m, pids=True):
                os.kill(int(pid), signal.SIGKILL)


def test_registry_kill_all_and_reaper_cover_every_live_command(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    a = procs.spawn(["/bin/sh", "-c", "sleep 48.11 & sleep 48.12"], cwd=tmp_path, env=env, limits=Limits())
    b = procs.spawn(["/bin/sh", "-c", "sleep 48.13"], cwd=tmp_path, env=env, limits=Limits())
    try:
        assert wait_for(lambda: all(alive(f"sleep 48.1{i}") for i in (1, 2, 3)), 5)
        assert procs.live_count() >= 2
        procs.kill_all()
        assert wait_for(lambda: not any(alive(f"sleep 48.1{i}") for i in (1, 2, 3)), 5)
    finally:
        a.close()
        b.close()
    assert procs.live_count() == 0


def test_a_stopped_owner_starts_no_command_and_loses_the_live_one(tmp_path: Path) -> None:
    import contextvars
    import threading

    env = {"PATH": "/usr/bin:/bin"}
    outcome: dict[str, object] = {}

    def a_run(owner: str) -> None:  # a service run's worker thread: its commands are tagged with its id
        procs.own(owner)
        live = procs.spawn(["/bin/sh", "-c", "sleep 48.21"], cwd=tmp_path, env=env, limits=Limits())
        outcome["live"] = live
        assert wait_for(lambda: bool(alive("sleep 48.21")), 5)
        procs.stop_owned(owner)  # the run is cancelled
        assert wait_for(lambda: not alive("sleep 48.21"), 5)
        live.close()
        try:
            procs.spawn(["/bin/sh", "-c", "touch late.txt"], cwd=tmp_path, env=env, limits=Limits())
        except procs.OwnerStopped as exc:
            outcome["refused"] = str(exc)

    worker = threading.Thread(target=contextvars.Context().run, args=(a_run, "run-x"))
    worker.start()
    worker.join(30)
    assert "run-x was cancelled" in str(outcome.get("refused")) and not (tmp_path / "late.txt").exists()
    other = procs.spawn(["/bin/true"], cwd=tmp_path, env=env, limits=Limits())  # other owners are not stopped
    other.proc.wait(5)
    other.close()


def test_limits_apply_to_spawned_programs_without_the_sandbox(tmp_path: Path) -> None:
    code = "import resource as r; print(*(r.getrlimit(x)[0] for x in (r.RLIMIT_AS, r.RLIMIT_CPU, r.RLIMIT_FSIZE)))"
    limits = Limits(processes=10, memory_mb=700, cpu_seconds=9, file_size_mb=3)
    running = procs.spawn(
        [sys.executable, "-c", code], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, limits=limits, stdout=subprocess.PIPE
    )
    try:
        out = running.proc.stdout.read().decode()  # type: ignore[union-attr]
        running.proc.wait(timeout=10)
    finally:
        running.close()
    assert out.split() == [str(700 * 1024 * 1024), "9", str(3 * 1024 * 1024)]
