"""`bench.py --only busy`: the multi-step task on an idle and on a busy machine, for two thread choices.

Issue 28.6: with one competing CPU-bound process on a 2-core machine, all cores busy-waiting on each
other cost 6-8x. For each thread choice, `fixed` (every core, what a peer does) and `auto` (the cores
other programs leave free, engines/threads.py), a fresh model runs the task idle, then again while one
`python -c "while True: pass"` keeps a core busy; the chat-handler peer runs the same way with the
thread count fixed at the choice's start (no peer adapts) unless `--no-busy-peer`. Reports each wall,
busy / idle per system and choice (goal for hermes-local auto: <= 1.5), and the thread line in force.
`one_core`: hermes-local idle on one thread, the floor of any run that has one of the two cores (busy / idle
cannot go below one_core / idle on this machine, whatever the thread choice).
Figures, not assertions; run it on an otherwise idle machine.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

SETTLE_S = 1.0  # the competitor runs this long before a measured run, so /proc/stat shows it


@contextlib.contextmanager
def competitor(on: bool) -> Iterator[None]:
    """One CPU-bound process for the duration (nothing when `on` is false)."""
    if not on:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(SETTLE_S)
        yield
    finally:
        proc.kill()
        proc.wait()


def busy_walls(
    load_llm: Callable[..., Any],
    hermes_run: Callable[..., dict[str, Any]],
    peer_run: Callable[..., dict[str, Any]] | None,
    *,
    steps: int,
    n_ctx: int,
    seed: int = 1,
    model: str | None = None,
) -> dict[str, Any]:
    """{choice: {"idle"|"busy": {"hermes": run, "peer": run}}, "ratios": ...} for fixed and auto threads."""
    report: dict[str, Any] = {"cores": len(os.sched_getaffinity(0)), "steps": steps}
    for choice, threads in (("fixed", len(os.sched_getaffinity(0))), ("auto", None)):
        llm = load_llm(n_ctx, threads, seed, model=model)
        section: dict[str, Any] = {}
        for load in ("idle", "busy"):
            with competitor(load == "busy"):
                row: dict[str, Any] = {"hermes": hermes_run(llm, steps, n_ctx)}
                row["hermes"]["threads_at_end"] = llm.n_threads
                if peer_run is not None:
                    if llm.threads is not None:
                        llm._retune_threads()  # the peer gets the count auto picks now, and keeps it
                    row["peer"] = peer_run(llm, steps) | {"threads": llm.n_threads}
            section[load] = row
            print(f"busy bench: {choice} {load} done", file=sys.stderr)
        for system in section["idle"]:
            idle, busy = section["idle"][system]["wall_s"], section["busy"][system]["wall_s"]
            section[f"{system}_busy_over_idle"] = busy / idle if idle else 0.0
        report[choice] = section
        del llm
    llm = load_llm(n_ctx, 1, seed, model=model)
    report["one_core"] = hermes_run(llm, steps, n_ctx) | {"threads": 1}
    print("busy bench: one core idle done", file=sys.stderr)
    return report


def rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    out = [("busy bench", f"{report['cores']} cores, {report['steps']} steps, one competing CPU-bound process")]
    for choice in ("fixed", "auto"):
        section = report[choice]
        for system in ("hermes", "peer"):
            if system not in section["idle"]:
                continue
            idle, busy = section["idle"][system], section["busy"][system]
            threads = f"threads {idle.get('threads_at_end', idle.get('threads'))} / "
            threads += f"{busy.get('threads_at_end', busy.get('threads'))}"
            goal = "  (goal <= 1.5)" if system == "hermes" and choice == "auto" else ""
            out.append(
                (
                    f"  {system} {choice} wall idle / busy s",
                    f"{idle['wall_s']:.2f} / {busy['wall_s']:.2f} = {section[f'{system}_busy_over_idle']:.2f}x"
                    f"{goal}, {threads}, valid calls {idle['tool_calls_valid']} / {busy['tool_calls_valid']}",
                )
            )
    if "one_core" in report:
        one, idle = report["one_core"]["wall_s"], report["auto"]["idle"]["hermes"]["wall_s"]
        floor = f"{one:.2f} s, so busy / idle >= {one / idle:.2f}x here" if idle else f"{one:.2f} s"
        out.append(("  hermes one thread idle (the floor)", floor))
    return out
