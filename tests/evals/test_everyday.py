"""The everyday-task table (`tests/data/everyday.toml`, issue 42) through the real CLI on replays: a good model's
runs all end `done`/`answered` with exit 0 and really did their task; a small model's non-answers never end as a
success (no "false success"), whatever they claim."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.evals.everyday import Task, load_tasks, parse_json, verdict
from hermes_local.testing import write_replay

TASKS = load_tasks(Path(__file__).resolve().parents[1] / "data" / "everyday.toml")
runner = CliRunner()


def _run(task: Task, tmp_path: Path, outputs: list[str], follow_outputs: list[str]) -> tuple[Path, dict, int]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    task.prepare(workspace)
    model = f"replay:{write_replay(tmp_path / 'run.jsonl', outputs)}"
    res = runner.invoke(app, task.argv(workspace, model), input=task.stdin or None)
    if task.follow_up:
        model = f"replay:{write_replay(tmp_path / 'follow.jsonl', follow_outputs)}"
        res = runner.invoke(app, task.follow_argv(workspace, model))
    return workspace, parse_json(res.stdout), res.exit_code


def test_the_table_has_a_dozen_everyday_tasks() -> None:
    assert len(TASKS) >= 12 and len({t.name for t in TASKS}) == len(TASKS)


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_a_good_model_does_each_task_and_every_done_is_real(task: Task, tmp_path: Path) -> None:
    workspace, result, code = _run(task, tmp_path, task.replay(), task.replay(follow_up=True))
    done, why = task.check(workspace, result)
    assert done, (why, result)
    assert result["outcome"] in ("done", "answered") and code == 0, result
    assert verdict(done, result, code) == "honest"


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_a_non_answer_is_never_reported_as_a_success(task: Task, tmp_path: Path) -> None:
    """What the embedded model did on these tasks: "I'm ready to help." (also after it was sent back)."""
    lazy = ["I'm ready to help. What's your next question?"] * 6
    workspace, result, code = _run(task, tmp_path, lazy, lazy)
    done, _ = task.check(workspace, result)
    assert not done and verdict(done, result, code) == "honest", result
    assert code != 0 and result["outcome"] not in ("done", "answered"), result
