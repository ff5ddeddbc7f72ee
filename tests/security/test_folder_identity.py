"""Issue 43, item 1: a workspace is a folder's identity, not a path string (attacks on what outlives a run).

After a run, `base/proj` is moved away and its path made to lead elsewhere: a symlink to `base/victim`, another
folder put in its place, or a folder above it swapped for a symlink. Every later act that used to resolve the path
again (`schedule run-now`, the daemon and `serve` firing a schedule, `sessions apply`, `sessions undo`/`--redo`/
`diff`, `run --resume`/`--continue`, the serve routes for diff and undo) must refuse in one line naming the recorded
path, exit 2 (409 over HTTP, a failed and reported schedule run), and never touch `base/victim`. Real folders and
symlinks, the real CLI, a real `serve` on loopback with two tokens, the replay model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import tool_call_text, write_replay
from hermes_local.events import RunStart, StepStart
from hermes_local.sandbox.workspace import FolderId, PinnedWorkspace
from hermes_local.service import schedules
from hermes_local.service.scheduler import Scheduler
from hermes_local.session import SessionLog
from hermes_local.testing import ScriptedLLM
from tests.fixtures.service_server import http, served, wait_status

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
WRITE = tool_call_text("write_file", path="report.md", content="the report\n")


def _symlink(base: Path) -> Path:
    """base/proj moved away and replaced by a symlink to base/victim."""
    (base / "proj").rename(base / "moved")
    (base / "proj").symlink_to(base / "victim")
    return base / "victim"


def _other_folder(base: Path) -> Path:
    """base/proj moved away and another folder made in its place."""
    (base / "proj").rename(base / "moved")
    (base / "proj").mkdir()
    return base / "proj"


def _parent_link(base: Path) -> Path:
    """base itself moved away and its path made a symlink to a tree that has its own proj."""
    base.rename(base.with_name("base-moved"))
    evil = base.with_name("evil")
    (evil / "proj").mkdir(parents=True)
    (evil / "victim").mkdir()
    base.symlink_to(evil)
    return evil / "proj"


SWAPS: dict[str, Callable[[Path], Path]] = {"symlink": _symlink, "other-folder": _other_folder, "parent": _parent_link}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "base" / "proj").mkdir(parents=True)
    (tmp_path / "base" / "victim").mkdir()
    return tmp_path / "base"


def _run(tmp_path: Path, proj: Path, outputs: list[str], *extra: str) -> str:
    replay = write_replay(tmp_path / f"r{len(list(tmp_path.glob('r*.jsonl')))}.jsonl", outputs)
    args = ["run", "Write the report", "--model", f"replay:{replay}", "--workspace", str(proj), "--json", *extra]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return str(json.loads(res.stdout)["session_id"])


def _refused(res: object, recorded: Path) -> str:
    """The one-line refusal (exit 2) naming the recorded folder; no traceback."""
    err = res.stderr  # type: ignore[attr-defined]
    assert res.exit_code == 2, (res.exit_code, res.output)  # type: ignore[attr-defined]
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"workspace {recorded}" in err and "refused, not redirected" in err, err
    return str(err)


def _untouched(victim: Path) -> None:
    assert sorted(p.name for p in victim.iterdir()) == [], "the swapped-in folder was written"


@pytest.mark.parametrize("swap", SWAPS)
def test_undo_redo_and_diff_refuse_a_swapped_folder(tmp_path: Path, base: Path, swap: str) -> None:
    proj = base / "proj"
    session = _run(tmp_path, proj, [WRITE, "Written."], "--allow", "write_file")
    undo = runner.invoke(app, ["sessions", "undo", session])
    assert undo.exit_code == 0 and not (proj / "report.md").exists()
    victim = SWAPS[swap](base)
    for args in (["undo", session, "--redo"], ["undo", session], ["diff", session], ["undo", session, "--force"]):
        err = _refused(runner.invoke(app, ["sessions", *args]), proj)
        if swap == "symlink":
            assert f"leads to {base / 'victim'} now" in err
        _untouched(victim)
    assert f"changed in {proj}" in undo.stderr  # the undo names the folder it acted in


@pytest.mark.parametrize("swap", SWAPS)
def test_sessions_apply_refuses_a_swapped_folder(tmp_path: Path, base: Path, swap: str) -> None:
    proj = base / "proj"
    session = _run(tmp_path, proj, [WRITE, "Proposed."], "--plan")
    victim = SWAPS[swap](base)
    res = runner.invoke(app, ["sessions", "apply", session, "--yes"])
    _refused(res, proj)
    assert "applied" not in res.output
    _untouched(victim)


def test_sessions_apply_names_the_folder_it_used(tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = base / "proj"
    session = _run(tmp_path, proj, [WRITE, "Proposed."], "--plan")
    monkeypatch.chdir(base / "victim")
    res = runner.invoke(app, ["sessions", "apply", session, "--yes"])
    assert res.exit_code == 0 and f"applied 1 of 1 proposal(s) in {proj}" in res.stderr
    assert (proj / "report.md").read_text() == "the report\n"
    _untouched(base / "victim")


@pytest.mark.parametrize("swap", SWAPS)
def test_continue_refuses_a_swapped_folder(tmp_path: Path, base: Path, swap: str) -> None:
    proj = base / "proj"
    session = _run(tmp_path, proj, [WRITE, "Written."], "--allow", "write_file")
    victim = SWAPS[swap](base)
    again = write_replay(tmp_path / "again.jsonl", [WRITE, "Written again."])
    args = ["run", "--continue", session, "Write it again", "--model", f"replay:{again}", "--allow", "write_file"]
    _refused(runner.invoke(app, args), proj)
    _refused(runner.invoke(app, [*args, "--workspace", str(proj)]), proj)  # naming the path again is no way around
    _untouched(victim)


def _unfinished(proj: Path) -> str:
    """A session killed after its start, as a crashed `run` leaves it (its start records the folder's identity)."""
    with PinnedWorkspace.open(proj) as pin, SessionLog() as log:
        log(RunStart("Write the report", workspace=str(pin.path), folder=pin.identity.to_dict()))
        log(StepStart(1))
        return log.id


def test_resume_goes_on_in_the_recorded_folder_and_refuses_a_swapped_one(
    tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = base / "proj"
    monkeypatch.chdir(base / "victim")  # resumed from another folder: the run goes on where it ran
    session = _unfinished(proj)
    replay = write_replay(tmp_path / "go.jsonl", [WRITE, "Written."])
    args = ["run", "--resume", session, "--model", f"replay:{replay}", "--allow", "write_file", "--json"]
    elsewhere = runner.invoke(app, [*args, "--workspace", str(base / "victim")])
    assert elsewhere.exit_code == 2 and f"is not the folder session {session} ran in ({proj})" in elsewhere.stderr
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (proj / "report.md").read_text() == "the report\n"
    _untouched(base / "victim")

    second = _unfinished(proj)
    victim = _symlink(base)
    _refused(runner.invoke(app, ["run", "--resume", second, "--model", f"replay:{replay}", "--yes"]), proj)
    _untouched(victim)


def test_an_older_session_without_an_identity_is_adopted_with_a_note(tmp_path: Path, base: Path) -> None:
    proj = base / "proj"
    session = _run(tmp_path, proj, [WRITE, "Written."], "--allow", "write_file")
    records = Path(os.environ["HERMES_LOCAL_HOME"]) / "checkpoints" / "sessions" / f"{session}.jsonl"
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert all(line["folder"]["path"] == str(proj) for line in lines)
    records.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "folder"}) + "\n" for r in lines))
    res = runner.invoke(app, ["sessions", "diff", session])
    assert res.exit_code == 0 and "+the report" in res.stdout
    assert f"recorded no folder identity (an older version wrote it); using {proj} as it is now" in res.stderr


# -- schedules: run-now, the scheduler of the daemon and of serve ---------------------------------------------------
@pytest.mark.parametrize("swap", SWAPS)
def test_schedule_run_now_refuses_a_swapped_folder_and_reports_it(tmp_path: Path, base: Path, swap: str) -> None:
    proj = base / "proj"
    add = ["schedule", "add", "nightly", "--cron", "0 3 * * *", "Write the report", "--workspace", str(proj)]
    assert runner.invoke(app, [*add, "--allow", "write_file"]).exit_code == 0
    victim = SWAPS[swap](base)
    replay = write_replay(tmp_path / "s.jsonl", [WRITE, "Written."])
    res = runner.invoke(app, ["schedule", "run-now", "nightly", "--model", f"replay:{replay}"])
    assert res.exit_code == 1, res.output
    _untouched(victim)
    seen = schedules.get("nightly")
    assert seen.last_status == "error" and f"workspace {proj} of schedule nightly" in (seen.last_note or "")
    listed = runner.invoke(app, ["schedule", "list"]).stdout
    assert "last error" in listed and "refused, not redirected" in listed


def test_a_schedule_without_an_identity_is_refused_unattended_and_says_how_to_add_it_again(
    base: Path, workspace: Path
) -> None:
    proj = base / "proj"
    schedules.add(schedules.Schedule(name="old", cron="0 3 * * *", task="Write the report", workspace=str(proj)))
    path = schedules.schedules_dir() / "old.json"
    data = json.loads(path.read_text())
    assert FolderId.from_dict(data["folder"]) == FolderId(str(proj), proj.stat().st_dev, proj.stat().st_ino)
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "folder"}))  # as an older version wrote it
    with served(ScriptedLLM([WRITE, "Written."]), workspace) as (_, manager):
        lines: list[str] = []
        done = Scheduler(manager, on_line=lines.append).fire("old")
    assert done is not None and done.last_status == "error" and not (proj / "report.md").exists()
    assert "recorded no folder identity" in (done.last_note or "") and "schedule add old --replace" in lines[-1]


def test_the_daemon_fires_a_schedule_whose_folder_was_swapped_as_a_failed_run(tmp_path: Path, base: Path) -> None:
    proj = base / "proj"
    schedules.add(schedules.Schedule(name="due", cron="* * * * *", task="Write the report", workspace=str(proj),
                                     allow=["write_file"], created=time.time() - 3600))  # fmt: skip
    victim = _symlink(base)
    replay = write_replay(tmp_path / "d.jsonl", [WRITE, "Written."])
    cmd = [sys.executable, "-m", "hermes_local", "schedule", "daemon", "--model", f"replay:{replay}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=os.environ | {"PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while schedules.get("due").last_status in (None, "running"):
            assert time.monotonic() < deadline and proc.poll() is None, "the daemon did not fire the schedule"
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert schedules.get("due").last_status == "error"
    _untouched(victim)


@pytest.mark.parametrize("swap", SWAPS)
def test_a_scheduled_workflow_refuses_a_swapped_folder(tmp_path: Path, base: Path, swap: str) -> None:
    proj = base / "proj"
    wf = tmp_path / "report.toml"
    wf.write_text('name = "report"\n\n[[steps]]\nid = "w"\ntool = "write_file"\n'
                  'params = { path = "report.md", content = "the report" }\n')  # fmt: skip
    add = ["schedule", "add", "wf", "--cron", "30 6 * * *", str(wf), "--workspace", str(proj), "--allow", "write_file"]
    assert runner.invoke(app, add).exit_code == 0
    victim = SWAPS[swap](base)
    with served(ScriptedLLM([]), base.parent) as (_, manager):  # the scheduler of `serve`
        done = Scheduler(manager).fire("wf")
    assert done is not None and done.last_status == "error" and "refused, not redirected" in (done.last_note or "")
    _untouched(victim)


# -- serve: GET /v1/runs/ID/diff and POST /v1/runs/ID/undo -----------------------------------------------------------
def test_serve_diff_and_undo_answer_409_for_a_swapped_folder(base: Path) -> None:
    proj = base / "proj"
    llm = ScriptedLLM([WRITE, "Written."])
    with served(llm, proj, token="owner", tokens=("owner", "other"), allow_tools=["write_file"]) as (url, _):
        _, created = http("POST", f"{url}/v1/runs", {"task": "Write the report"}, token="owner")
        assert wait_status(url, created["id"], {"done", "error"}, token="owner")["status"] == "done"
        assert (proj / "report.md").exists()
        victim = _symlink(base)
        for method, route, body in (("GET", "diff", None), ("POST", "undo", {}), ("POST", "undo", {"redo": True})):
            status, answer = http(method, f"{url}/v1/runs/{created['id']}/{route}", body, token="owner")
            assert status == 409 and f"workspace {proj} of session {created['id']}" in answer["error"]["message"]
        assert http("GET", f"{url}/v1/runs/{created['id']}/diff", token="other")[0] == 403
        _untouched(victim)
    assert (base / "moved" / "report.md").read_text() == "the report\n"  # the run's file stays where it was moved


def test_an_older_session_is_resumed_in_the_folder_given_with_a_note(tmp_path: Path, base: Path) -> None:
    proj = base / "proj"
    with SessionLog() as log:  # as an older version logged it: the path only
        log(RunStart("Write the report", workspace=str(proj)))
        log(StepStart(1))
    replay = write_replay(tmp_path / "old.jsonl", [WRITE, "Written."])
    args = ["run", "--resume", log.id, "--model", f"replay:{replay}", "--yes", "--json", "--workspace", str(proj)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (
        f"session {log.id} recorded no folder identity (an older version wrote it); it goes on in {proj}" in res.stderr
    )
    assert (proj / "report.md").read_text() == "the report\n"
