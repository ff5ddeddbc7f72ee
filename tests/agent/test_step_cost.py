"""What a step costs in prompt tokens (issue 28), measured by scripts/step_cost.py on a scripted run.

Tokens, not time: the script runs the replay model, so these bounds hold on any machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def step_cost(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "step_cost.py"), "--json", "-", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout)


def test_a_step_adds_at_most_25_tokens_beyond_its_result_and_call_and_keeps_the_prefix() -> None:
    """It used to add ~130-150 (a "Done so far" block repeating the findings printed just above it)."""
    report = step_cost("--tokenizer", "words", "--steps", "20")
    plain, reminded = report["series"]
    assert plain["stopped"] == "max_steps" and plain["tool_calls"] == 20
    steps = [r for r in plain["rows"] if r["kind"] == "step"]
    assert len(steps) == 19 and all(r["result"] > 0 and r["call_tokens"] > 0 for r in steps)
    assert max(r["overhead"] for r in steps) <= 25
    for series in (plain, reminded):
        assert series["reevaluating_calls"] == [] and series["prefix_breaks"] == []
        assert series["evaluated_over_new"] <= 1.05
    # With a reminder every 3 steps, only the reminder steps carry the summary.
    kinds = {r["kind"] for r in reminded["rows"] if r["overhead"] > 25}
    assert kinds <= {"first", "reminder", "final"}
