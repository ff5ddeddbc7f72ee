"""Re-decode before/after (issue 46): the starter eval in auto mode on a real model, redecode off then on.

Runs `hermes-local eval tests/data/eval/starter.jsonl --tool-choice auto` (default model: the embedded
SmolLM2) with HERMES_LOCAL_REDECODE=false and =true, alternating, `--rounds` times each, each in its own
temporary home, and prints per setting: cases passed, mean model steps per run, mean wall seconds per run,
tool calls and how many were valid, replies re-decoded, calls that went back as an unreadable-call error
turn, and the after/before ratios. Timings only mean something on an idle
machine (both settings run in the same process tree, interleaved, so drift hits both alike).

Usage (repo root): PYTHONPATH=$PWD python scripts/redecode_eval.py [--model smollm2] [--rounds 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "eval" / "starter.jsonl"


def one_eval(model: str, redecode: bool, cases: Path) -> dict[str, Any]:
    """One eval run's summary (fresh home, the given redecode setting)."""
    with tempfile.TemporaryDirectory() as home:
        out = Path(home) / "report.json"
        env = {**os.environ, "HERMES_LOCAL_HOME": home, "HERMES_LOCAL_REDECODE": str(redecode).lower()}
        cmd = [sys.executable, "-m", "hermes_local", "eval", str(cases), "--model", model, "--tool-choice", "auto"]
        subprocess.run([*cmd, "--out", str(out)], env=env, cwd=ROOT, capture_output=True, text=True, check=False)
        if not out.is_file():
            raise SystemExit(f"the eval wrote no report (redecode={redecode}); try: {' '.join(cmd)}")
        summary: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))["summary"]
        return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--rounds", type=int, default=2, help="eval runs per setting (interleaved)")
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for setting in (False, True):
            runs[setting].append(one_eval(args.model, setting, args.cases))

    def mean(setting: bool, key: str) -> float:
        values = [r[key] or 0 for r in runs[setting]]
        return sum(values) / len(values)

    rows = {}
    for setting, label in ((False, "before (redecode off)"), (True, "after (redecode on)")):
        rows[label] = {
            "passed": mean(setting, "passed"),
            "cases": mean(setting, "cases"),
            "mean_steps": round(mean(setting, "mean_steps"), 3),
            "mean_seconds": round(mean(setting, "mean_seconds"), 3),
            "tool_calls": mean(setting, "tool_calls"),
            "valid_rate": round(mean(setting, "tool_call_validity_rate"), 4),
            "redecoded": mean(setting, "redecoded"),
            "unreadable": mean(setting, "unreadable_calls"),
        }
    print(
        f"{'':24} {'passed':>8} {'steps/run':>10} {'s/run':>8} {'calls':>7} {'valid':>7} "
        f"{'redecoded':>10} {'unreadable':>10}"
    )
    for label, row in rows.items():
        print(
            f"{label:24} {row['passed']:>5.1f}/{row['cases']:<2.0f} {row['mean_steps']:>10.3f} "
            f"{row['mean_seconds']:>8.2f} {row['tool_calls']:>7.1f} {row['valid_rate']:>7.3f} "
            f"{row['redecoded']:>10.1f} {row['unreadable']:>10.1f}"
        )
    before, after = rows["before (redecode off)"], rows["after (redecode on)"]
    ratios = {k: round(after[k] / before[k], 3) if before[k] else None for k in ("mean_steps", "mean_seconds")}
    print(f"after/before: steps {ratios['mean_steps']}, wall time {ratios['mean_seconds']}  ({args.rounds} round(s))")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratios": ratios}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
