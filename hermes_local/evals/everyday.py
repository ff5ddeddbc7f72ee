"""The everyday-task table (`tests/data/everyday.toml`, issue 42): what a new user tries first, and whether a run
really did it.

`load_tasks(path)` reads the table into `Task`s; `Task.prepare(workspace)` writes its files (and its SQLite
database, `db_sql`); `Task.argv(workspace, model)` is the `hermes-local run ... --json` command line (stdin is
`Task.stdin`; a follow-up is `Task.follow_argv`); `Task.check(workspace, result)` says whether the task was
really done, from the workspace and the answer, never from the outcome the run reported; `Task.replay()` is what a
good model does (`good`), as replay outputs. `verdict(task, done, result, code)` names the row: "honest" (done
and a success, or not done and not a success), "false success" (exit 0 without doing it) or "false failure".
Runs nothing itself: `scripts/everyday_outcomes.py` runs the table on a model, `tests/evals/test_everyday.py` on
the replays of a good model.
"""

from __future__ import annotations

import json
import sqlite3
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.engines.replay import tool_call_text

DB_NAME = "shop.sqlite"


@dataclass
class Task:
    name: str
    goal: str
    done: dict[str, Any]
    good: list[dict[str, Any]]
    flags: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    db_sql: str = ""
    stdin: str = ""
    follow_up: str = ""
    good_follow_up: list[dict[str, Any]] = field(default_factory=list)

    def prepare(self, workspace: Path) -> None:
        """Write the task's files (and database) into `workspace`."""
        for name, text in self.files.items():
            (workspace / name).write_text(text, encoding="utf-8")
        if self.db_sql:
            with sqlite3.connect(workspace / DB_NAME) as db:
                db.executescript(self.db_sql)

    def argv(self, workspace: Path, model: str | None = None) -> list[str]:
        """The `run` arguments (after `hermes-local`): the goal (`-` first when the text comes on stdin)."""
        task = ["-", self.goal] if self.stdin else [self.goal]
        return ["run", *task, *self._common(workspace, model)]

    def follow_argv(self, workspace: Path, model: str | None = None) -> list[str]:
        """The follow-up's `run --continue MESSAGE` arguments (this workspace's last run)."""
        return ["run", "--continue", self.follow_up, *self._common(workspace, model)]

    def _common(self, workspace: Path, model: str | None) -> list[str]:
        db = ["--db", str(workspace / DB_NAME)] if self.db_sql else []
        return [*self.flags, *db, "--workspace", str(workspace), "--json", *(["--model", model] if model else [])]

    def replay(self, follow_up: bool = False) -> list[str]:
        """A good model's outputs for this task (or its follow-up), as replay texts."""
        return [_output(step) for step in (self.good_follow_up if follow_up else self.good)]

    def check(self, workspace: Path, result: dict[str, Any]) -> tuple[bool, str]:
        """Whether the task was really done (from the files and the answer), and what was missing."""
        want = self.done
        answer = str(result.get("answer") or "")
        for words in want.get("answer", []):
            if words.lower() not in answer.lower():
                return False, f"the answer lacks {words!r}"
        if "proposed" in want and not any(p.get("name") == want["proposed"] for p in result.get("proposals") or []):
            return False, f"no {want['proposed']} was proposed"
        path = workspace / want["file"] if "file" in want else None
        if path is not None and not path.is_file():
            return False, f"{want['file']} was not written"
        if path is not None and want.get("unchanged") and path.read_text() != self.files.get(want["file"]):
            return False, f"{want['file']} changed in a plan-only run"
        if path is not None and "contains" in want and want["contains"] not in path.read_text(errors="replace"):
            return False, f"{want['file']} lacks {want['contains']!r}"
        if "gone" in want and (workspace / want["gone"]).exists():
            return False, f"{want['gone']} is still there"
        return True, ""


def _output(step: dict[str, Any]) -> str:
    if "call" in step:
        return tool_call_text(str(step["call"]), **dict(step.get("arguments") or {}))
    return str(step["answer"])


def load_tasks(path: Path) -> list[Task]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [Task(**t) for t in data["task"]]


def verdict(done: bool, result: dict[str, Any], code: int) -> str:
    """ "honest", "false success" (reported a success, did not do it) or "false failure" (did it, said it did not)."""
    success = result.get("outcome") in ("done", "answered") and code == 0
    if success and not done:
        return "false success"
    if done and not success:
        return "false failure"
    return "honest"


def parse_json(stdout: str) -> dict[str, Any]:
    """The `--json` object a run printed (its last line), or {} when it printed none."""
    lines = [line for line in stdout.strip().splitlines() if line.startswith("{")]
    try:
        return dict(json.loads(lines[-1])) if lines else {}
    except json.JSONDecodeError:
        return {}
