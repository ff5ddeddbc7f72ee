"""Run the malformed-call corpus through `parse_tool_calls`: recovery rate, failures, throughput.

Usage (from the repo root): python scripts/parse_corpus.py [--repeat 2000] [--json PATH] [--corpus PATH]
       python scripts/parse_corpus.py --families   (parsed/total per family, each case through its dialect)

A case is recovered when its calls equal `expect_calls` exactly and its error count equals
`expect_errors`. Throughput parses the whole corpus `--repeat` times and reports calls per second
and megabytes (UTF-8) of model output per second. Exit status 1 if any case is not recovered.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hermes_local.calls.parse import parse_tool_calls  # noqa: E402

DEFAULT_CORPUS = ROOT / "tests" / "data" / "malformed_calls.jsonl"


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases whose calls or error count differ from the expectation, with what was got."""
    failures = []
    for case in cases:
        result = parse_tool_calls(case["text"], case["tool_names"])
        got = [asdict(call) for call in result.calls]
        if got != case["expect_calls"] or len(result.errors) != case["expect_errors"]:
            failures.append({"id": case["id"], "source": case["source"], "got_calls": got, "got_errors": result.errors})
    return failures


def throughput(cases: list[dict[str, Any]], repeat: int) -> dict[str, float]:
    inputs = [(case["text"], case["tool_names"]) for case in cases]
    megabytes = sum(len(text.encode("utf-8")) for text, _ in inputs) * repeat / 1e6
    calls = 0
    start = time.perf_counter()
    for _ in range(repeat):
        for text, names in inputs:
            calls += len(parse_tool_calls(text, names).calls)
    seconds = time.perf_counter() - start
    return {
        "repeat": repeat,
        "seconds": round(seconds, 3),
        "replies_per_second": round(len(inputs) * repeat / seconds),
        "calls_per_second": round(calls / seconds),
        "mb_per_second": round(megabytes / seconds, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=2000, help="corpus passes for the throughput figure")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--families", action="store_true", help="the per-family corpora through each dialect")
    args = parser.parse_args(argv)
    if args.families:
        return families()

    cases = load(args.corpus)
    failures = check(cases)
    recovered = len(cases) - len(failures)
    print(f"recovered: {recovered}/{len(cases)} calls")
    for failure in failures:
        print(
            f"  FAIL {failure['id']} ({failure['source']}): calls={failure['got_calls']} errors={failure['got_errors']}"
        )
    speed = throughput(cases, args.repeat) if args.repeat > 0 else {}
    if speed:
        print(
            f"throughput: {speed['calls_per_second']:,} calls/s, {speed['replies_per_second']:,} replies/s, "
            f"{speed['mb_per_second']} MB/s ({args.repeat} passes over {len(cases)} cases in {speed['seconds']} s)"
        )
    if args.json:
        figures = {"cases": len(cases), "recovered": recovered, "failures": failures, **speed}
        args.json.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if failures else 0


def families() -> int:
    """Each case of the family corpora parsed by its family's dialect: parsed/total per family, and the misses."""
    from hermes_local.dialects.families import family_corpus_misses, load_cases

    total_right = total = 0
    for name, (right, count, misses) in family_corpus_misses(load_cases(ROOT / "tests" / "data")).items():
        total_right, total = total_right + right, total + count
        print(f"{name:12} {right}/{count}")
        for miss in misses:
            print(f"  FAIL {miss}")
    print(f"{'all':12} {total_right}/{total}")
    return 0 if total_right == total else 1


if __name__ == "__main__":
    sys.exit(main())
