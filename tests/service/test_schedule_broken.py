"""Issue 43 item 4: a schedule that cannot be computed never breaks the scheduler. A cron with no next time is
refused at `schedule add`; a broken schedule file is listed as broken, reported once per change by a real
`schedule daemon`, and every other schedule still runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import write_replay
from hermes_local.service import schedules
from hermes_local.service.schedules import Schedule

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4 *"])
def test_a_cron_with_no_next_time_is_refused_at_add_before_anything_is_saved(workspace: Path, cron: str) -> None:
    res = CliRunner().invoke(app, ["schedule", "add", "x", "--cron", cron, "Say hi", "--workspace", str(workspace)])
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.output
    assert f'--cron "{cron}" never comes round' in res.stderr and "pick a day every month" in res.stderr
    assert not (schedules.schedules_dir() / "x.json").exists()


def _broken_files() -> None:
    """What an older version saved (30 February), and a file that does not parse at all."""
    folder = schedules.schedules_dir()
    folder.mkdir(parents=True, exist_ok=True)
    feb30 = Schedule(name="feb30", cron="0 0 30 2 *", task="Never", workspace=str(folder))
    (folder / "feb30.json").write_text(json.dumps(feb30.model_dump()))
    (folder / "garbled.json").write_text("{not json")


def test_list_shows_broken_schedules_and_the_daemon_runs_the_others(workspace: Path, tmp_path: Path) -> None:
    schedules.add(
        Schedule(
            name="greet", cron="0 3 * * *", task="Say hello", workspace=str(workspace), last_due=time.time() - 86400
        )
    )
    _broken_files()
    res = CliRunner().invoke(app, ["schedule", "list"])
    assert res.exit_code == 0, res.output
    assert 'feb30  BROKEN, not run: schedule feb30: its cron "0 0 30 2 *" never comes round' in res.stdout
    assert "garbled  BROKEN, not run: schedule file" in res.stdout and "greet  [0 3 * * *]  next " in res.stdout
    listed = json.loads(CliRunner().invoke(app, ["schedule", "list", "--json"]).stdout)
    assert [(v["name"], "broken" in v) for v in listed] == [("feb30", True), ("garbled", True), ("greet", False)]

    replay = write_replay(tmp_path / "d.jsonl", ["Hello from the daemon."])
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "hermes_local", "schedule", "daemon", "--poll", "1", "--model", f"replay:{replay}"]
    proc = subprocess.Popen(cmd, cwd=workspace, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while (seen := schedules.get("greet")).last_session is None or seen.last_status == "running":
            assert time.monotonic() < deadline and proc.poll() is None, "the good schedule did not run"
            time.sleep(0.2)
        time.sleep(3.5)  # three more ticks: a broken file is not reported again while it is unchanged
        (schedules.schedules_dir() / "garbled.json").write_text("{still not json}")  # a change: reported again
        time.sleep(2.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert schedules.get("greet").last_status == "answer"
    assert stderr.count("schedule feb30: its cron") == 1, stderr
    assert stderr.count("schedule file") == 2 and "garbled.json is unreadable" in stderr, stderr
    assert "the other schedules still run" in stderr and "Traceback" not in stderr
