"""Per-call overhead of the command sandbox: median wall time of `echo` through run_shell's runner.

Runs `echo hi` N times (default 50) the way `run_shell` does (spawn with limits, parent-death signal,
registry, pids cgroup where available, output capture), once with `sandbox = off` and once with bwrap,
and prints the medians and the difference. Also times bare `subprocess.run` of `/bin/sh -c` and of
bwrap for reference. Prints figures only; asserts nothing.

    python scripts/sandbox_overhead.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from hermes_local.sandbox.policy import SandboxPolicy, bwrap_status, sandbox_env, sandboxed_command
from hermes_local.tools.builtin.shell import run_captured


def median_ms(fn: Callable[[], object], n: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    works, why = bwrap_status()
    print(f"bwrap: {why}")
    with tempfile.TemporaryDirectory() as ws:
        env = sandbox_env(["PATH"], sandboxed=False)
        bare = median_ms(lambda: subprocess.run(["/bin/sh", "-c", "echo hi"], env=env, capture_output=True), n)
        print(f"bare subprocess.run sh -c echo      median {bare:7.2f} ms (n={n})")
        off = SandboxPolicy(mode="off")
        t_off = median_ms(lambda: run_captured("echo hi", ws, 10, 4000, 2000, off), n)
        print(f"run_shell runner, sandbox = off      median {t_off:7.2f} ms (n={n})")
        if not works:
            print("bwrap unavailable: no sandboxed figures")
            return
        argv, benv = sandboxed_command(["/bin/sh", "-c", "echo hi"], workspace=ws, env_allow=["PATH"])
        raw = median_ms(lambda: subprocess.run(argv, env=benv, capture_output=True), n)
        print(f"bare subprocess.run bwrap sh -c echo median {raw:7.2f} ms (n={n})")
        on = SandboxPolicy(mode="bwrap")
        t_on = median_ms(lambda: run_captured("echo hi", ws, 10, 4000, 2000, on), n)
        print(f"run_shell runner, sandbox = bwrap    median {t_on:7.2f} ms (n={n})")
        print(f"sandbox overhead per call            {t_on - t_off:+7.2f} ms (median vs median)")


if __name__ == "__main__":
    main()
