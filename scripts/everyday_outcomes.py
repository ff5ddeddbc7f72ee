"""Run the everyday-task table (tests/data/everyday.toml, issue 42) on a model and say, per task, what happened.

    python scripts/everyday_outcomes.py                      # the embedded model (SmolLM2 135M)
    python scripts/everyday_outcomes.py --model hermes-3-llama-3.1-8b --n-gpu-layers -1
    python scripts/everyday_outcomes.py --peer               # also each task with --no-answer-guard: the bounces' cost

Each task runs as a user would (`hermes-local run ... --json`, a fresh workspace with the task's files, one fresh
$HERMES_LOCAL_HOME for the table) and is checked from the workspace and the answer (`evals/everyday.py`), not
from what the run reported. Prints a row per task: whether it did its task (or what is missing), the outcome, the
exit code, steps, bounces, model seconds and the verdict ("honest", "false success": exit 0 without doing it,
"false failure": did it but not reported as a success); then the totals. The goal: 0 false successes, 0 false
failures. With `--peer`, the same runs without the answer guard (no bounces): the extra steps and seconds the
bounces cost, as a ratio measured in the same run. Correctness figures do not depend on the machine's speed;
the seconds do (run it on an idle machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hermes_local.evals.everyday import Task, load_tasks, parse_json, verdict  # noqa: E402


def run_task(task: Task, home: Path, extra: list[str], timeout: int) -> tuple[bool, str, dict[str, Any], int, float]:
    """One task in a fresh workspace: (did it, what is missing, the --json result, exit code, wall seconds)."""
    workspace = Path(tempfile.mkdtemp(prefix=f"everyday-{task.name}-"))
    task.prepare(workspace)
    env = {**os.environ, "HERMES_LOCAL_HOME": str(home), "PYTHONPATH": str(ROOT)}

    def hermes(argv: list[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "hermes_local", *argv, *extra]
        return subprocess.run(command, input=stdin or "", capture_output=True, text=True, env=env, timeout=timeout)

    started = time.perf_counter()
    proc = hermes(task.argv(workspace), task.stdin)
    if task.follow_up and proc.returncode != 2:
        proc = hermes(task.follow_argv(workspace), None)
    seconds = time.perf_counter() - started
    result = parse_json(proc.stdout)
    if not result:
        result = {"outcome": "crash", "evidence": proc.stderr.strip().splitlines()[-1:] or ["no output"]}
    done, missing = task.check(workspace, result)
    return done, missing, result, proc.returncode, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="registry NAME[:QUANT] or a .gguf path (default: the embedded model)")
    parser.add_argument("--n-gpu-layers", default=None)
    parser.add_argument("--max-steps", default="6")
    parser.add_argument("--only", help="comma-separated task names")
    parser.add_argument("--peer", action="store_true", help="also run each task with --no-answer-guard")
    parser.add_argument("--timeout", type=int, default=900)
    args = parser.parse_args()
    tasks = load_tasks(ROOT / "tests" / "data" / "everyday.toml")
    if args.only:
        tasks = [t for t in tasks if t.name in args.only.split(",")]
    extra = ["--max-steps", args.max_steps]
    extra += ["--model", args.model] if args.model else []
    extra += ["--n-gpu-layers", str(args.n_gpu_layers)] if args.n_gpu_layers is not None else []
    rows, costs = [], {"guarded": [], "peer": []}
    home = Path(tempfile.mkdtemp(prefix="everyday-home-"))
    print(
        f"{'task':22} {'did it':7} {'outcome':11} {'exit':>4} {'steps':>5} {'back':>4} {'model s':>7}  verdict  (why)"
    )
    for task in tasks:
        done, missing, result, code, wall = run_task(task, home, extra, args.timeout)
        row_verdict = verdict(done, result, code)
        rows.append((task.name, done, result.get("outcome"), code, row_verdict))
        usage = result.get("usage") or {}
        steps, bounces = int(result.get("steps") or 0), len(result.get("guarded") or [])
        costs["guarded"].append((steps, float(usage.get("seconds") or 0), wall))
        why = missing or ""
        evidence = str(result.get("evidence") or "")[:90]
        print(
            f"{task.name:22} {'yes' if done else 'no':7} {str(result.get('outcome')):11} {code:>4} {steps:>5} "
            f"{bounces:>4} {float(usage.get('seconds') or 0):>7.1f}  {row_verdict}  ({why}{'; ' if why else ''}"
            f"evidence: {evidence})"
        )
        if args.peer:
            peer_home = Path(tempfile.mkdtemp(prefix="everyday-peer-home-"))
            _, _, peer, _, peer_wall = run_task(task, peer_home, [*extra, "--no-answer-guard"], args.timeout)
            peer_usage = peer.get("usage") or {}
            costs["peer"].append((int(peer.get("steps") or 0), float(peer_usage.get("seconds") or 0), peer_wall))
    false_success = sum(r[4] == "false success" for r in rows)
    false_failure = sum(r[4] == "false failure" for r in rows)
    did = sum(r[1] for r in rows)
    print(
        f"\n{len(rows)} tasks: {did} done for real; reported success (exit 0): {sum(r[3] == 0 for r in rows)}; "
        f"false successes: {false_success}; false failures: {false_failure}"
    )
    for label, runs in costs.items():
        if runs:
            steps, model, wall = (statistics.mean(x[i] for x in runs) for i in range(3))
            print(f"{label:8} mean {steps:.2f} steps, {model:.1f} s model time, {wall:.1f} s wall per task")
    if costs["peer"]:
        mine, peer = costs["guarded"], costs["peer"]
        ratio = statistics.mean(x[2] for x in mine) / max(statistics.mean(x[2] for x in peer), 1e-9)
        extra_steps = statistics.mean(x[0] for x in mine) - statistics.mean(x[0] for x in peer)
        print(f"bounces cost: {extra_steps:+.2f} steps per task, wall ratio {ratio:.2f}x (guarded / no guard)")


if __name__ == "__main__":
    main()
