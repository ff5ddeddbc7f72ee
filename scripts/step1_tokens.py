"""Step 1 of everyday goals: whether it started with the call grammar on, its completion tokens and seconds.

Issue 27 ("decide before generating"): a goal that needs a tool starts with the tool-call grammar forced
on, so step 1 is a call instead of a free answer the answer guard throws away. For each goal (the
README's first task, a file summary, a SQL question with a database, report writing, a time question,
a multi-step task, plain questions) this runs only step 1 of a fresh agent and prints whether it was
forced, what it produced (a call or text) and its completion tokens and seconds.

  python scripts/step1_tokens.py                 # the embedded model (real seconds; minutes on a CPU)
  python scripts/step1_tokens.py --scripted      # testing.TalkativeLLM: a long guess whenever left free
  python scripts/step1_tokens.py --model hermes-2-pro-mistral-7b --n-gpu-layers -1 --json step1.json

It measures the hermes_local Python finds first: `PYTHONPATH=CHECKOUT python scripts/step1_tokens.py` for
a given checkout (one from before issue 27 gives the "before" figures).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # last: PYTHONPATH=CHECKOUT picks the code measured (before/after)

from hermes_local.config import load_settings  # noqa: E402
from hermes_local.llm import LLM, CallOptions, Completion, DelegatingLLM  # noqa: E402

GOALS = [
    "What time is it? Note it in my memo.",  # the README's first command
    "Summarise notes.txt into report.md",
    "Which customers ordered most last week?",
    "Write a report of the top 3 customers by revenue from the database into report.md",
    "What is today's date?",
    "Read notes.txt, then note the time of the next meeting in my memo",
    "List the files in my workspace and tell me which one is largest",
    "Write 'hello world' into hello.txt",
    "What is 2 + 2? Answer with the number.",
    "Explain what a linked list is.",
]


class FirstStepOnly(Exception):  # noqa: N818 - control flow of this script, not an error
    """Raised after the first model call: only step 1 is measured."""


class FirstCall(DelegatingLLM):
    """Records the first call's options and completion, then stops the run."""

    options: CallOptions | None = None
    completion: Completion | None = None

    def complete(self, tokens: Any, options: CallOptions, *, on_token: Any = None) -> Completion:
        self.options, self.completion = options, self.inner.complete(tokens, options, on_token=on_token)
        raise FirstStepOnly


def workspace_with_data(root: Path) -> tuple[Path, Path]:
    ws = root / "ws"
    ws.mkdir(parents=True)
    (ws / "notes.txt").write_text("Team notes\nThe next meeting is on Friday at 3 pm.\nBudget review moved.\n")
    db = root / "shop.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE orders (customer TEXT, amount REAL, day TEXT)")
        con.executemany("INSERT INTO orders VALUES (?, ?, ?)", [("Ada", 120.0, "mon"), ("Bo", 80.5, "tue")])
    return ws, db


def step_one(llm: LLM, settings: Any, goal: str, ws: Path, db: Path) -> dict[str, Any]:
    from hermes_local.runtime import build_registry
    from hermes_local.testing import build_agent
    from hermes_local.tools import Approver

    probe = FirstCall(llm)
    agent = build_agent(probe, settings, workspace=ws, registry=build_registry(), db_path=db, approver=Approver())
    try:
        with agent:
            agent.run(goal)
    except FirstStepOnly:
        pass
    assert probe.options is not None and probe.completion is not None
    text = probe.completion.text
    return {
        "goal": goal,
        "forced": probe.options.constrained,
        "output": "call" if probe.options.constrained or "<tool_call>" in text else "text",
        "completion_tokens": probe.completion.usage.completion_tokens,
        "seconds": round(probe.completion.usage.seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default=None, help="model spec (default: the embedded model)")
    parser.add_argument("--n-gpu-layers", type=int, default=None)
    parser.add_argument("--scripted", action="store_true", help="testing.TalkativeLLM instead of a model")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    if args.scripted:  # nothing of this run belongs in the user's home (sessions, long-term memory)
        os.environ["HERMES_LOCAL_HOME"] = tempfile.mkdtemp(prefix="step1-home-")
    settings = load_settings({"model": args.model, "n_gpu_layers": args.n_gpu_layers})
    if args.scripted:
        from hermes_local.testing import ScriptedLLM, tool_call_text

        try:
            from hermes_local.testing import TalkativeLLM
        except ImportError:  # a checkout from before issue 27, for the "before" figures

            class TalkativeLLM(ScriptedLLM):  # type: ignore[no-redef]
                def complete(self, tokens: Any, options: CallOptions, *, on_token: Any = None) -> Completion:
                    if not options.constrained:
                        self.outputs.insert(self._cursor, " ".join(["It is probably ten o'clock."] * 60))
                    return super().complete(tokens, options, on_token=on_token)

        def make() -> LLM:
            return TalkativeLLM([tool_call_text("get_current_time")])
    else:
        from hermes_local.runtime import load_llm

        loaded = load_llm(settings)

        def make() -> LLM:
            return loaded

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, goal in enumerate(GOALS):
            ws, db = workspace_with_data(Path(tmp) / str(i))
            rows.append(step_one(make(), settings, goal, ws, db))
            r = rows[-1]
            print(f"{r['completion_tokens']:5d} tok {r['seconds']:7.2f} s  forced={r['forced']!s:5}  {goal}")
    total = sum(r["completion_tokens"] for r in rows)
    print(f"step 1 completion tokens, all goals: {total}; forced on {sum(r['forced'] for r in rows)}/{len(rows)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
