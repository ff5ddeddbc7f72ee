"""The one front door (`runtime.start_run`): what a `RunHandle` opens, owns and closes, where its events go, and the
library API that stands on it (`hermes_local.__all__`, `Agent`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import hermes_local
from hermes_local.config import load_settings
from hermes_local.errors import UserError
from hermes_local.events import Event, StepStart, Token
from hermes_local.runtime import Model, RunSpec, Sinks, start_run
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.session import read_events, sessions_dir
from hermes_local.testing import ScriptedLLM, tool_call_text
from hermes_local.tools import Approver


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_every_public_name_loads_and_is_the_front_doors(workspace: Path) -> None:
    for name in hermes_local.__all__:
        assert getattr(hermes_local, name) is not None, name
    assert hermes_local.RunSpec is RunSpec and hermes_local.start_run is start_run
    with pytest.raises(AttributeError):
        hermes_local.build_agent  # noqa: B018 - the old wiring is not part of the API


def test_a_run_is_logged_pinned_and_everything_it_opened_is_closed(workspace: Path) -> None:
    before = open_fds()
    llm = ScriptedLLM([tool_call_text("write_file", path="a.txt", content="x"), "Wrote a.txt."])
    shown: list[Event] = []
    pieces: list[str] = []
    allow = Approver(allow=["write_file"])
    spec = RunSpec(task="Write a.txt", settings=load_settings({}), workspace=workspace, approver=allow)
    with start_run(spec, Model(llm), Sinks(display=shown.append, tokens=pieces.append)) as handle:
        assert handle.workspace.path == workspace.resolve()
        result = handle.run()
    assert result.answer == "Wrote a.txt." and result.session_id == handle.session_id
    assert (workspace / "a.txt").read_text() == "x"
    logged = read_events(sessions_dir() / f"{handle.session_id}.jsonl")
    assert [e.kind for e in logged if e.kind in ("run_start", "run_end")] == ["run_start", "run_end"]
    assert any(isinstance(e, StepStart) for e in shown)  # the display sees every event
    assert not any(isinstance(e, Token) for e in logged)  # tokens are never logged...
    assert "".join(pieces) == "".join(e.text for e in shown if isinstance(e, Token))  # ...they are pushed
    assert open_fds() == before  # the pin, the session log and the stores are closed


def test_a_mistake_found_on_the_way_in_is_one_line_and_leaves_nothing_open(workspace: Path) -> None:
    before = open_fds()
    spec = RunSpec(task="t", settings=load_settings({"tools": ["no_such_tool"]}), workspace=workspace)
    with pytest.raises(UserError, match="no_such_tool"):
        start_run(spec, Model(ScriptedLLM(["never"])))
    assert open_fds() == before
    assert not list(sessions_dir().glob("*.jsonl")) if sessions_dir().exists() else True  # no log was opened


def test_a_swapped_pin_is_refused_at_the_door(tmp_path: Path) -> None:
    folder, other = tmp_path / "proj", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    pin = PinnedWorkspace.open(folder)
    try:
        folder.rename(tmp_path / "moved")
        folder.symlink_to(other)
        with pytest.raises(UserError, match="changed after the run was accepted"):
            start_run(RunSpec(task="t", settings=load_settings({}), workspace=pin), Model(ScriptedLLM(["x"])))
    finally:
        pin.close()


def test_a_tool_only_run_executes_recorded_calls_in_its_pinned_workspace(workspace: Path) -> None:
    spec = RunSpec(settings=load_settings({}), workspace=workspace, approver=Approver(allow=["write_file"]))
    with start_run(spec, None) as handle:
        assert handle.agent is None
        result = handle.executor.execute("write_file", {"path": "b.txt", "content": "y"})
        with pytest.raises(RuntimeError, match="without a model"):
            handle.run()
    assert result.ok and (workspace / "b.txt").read_text() == "y"


def test_the_library_agent_runs_through_the_front_door(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("get_current_time"), "It is noon."])
    agent = hermes_local.Agent(Model(llm), settings={"max_steps": 3})
    result = agent.run("What time is it?", workspace=workspace)
    assert result.answer == "It is noon." and result.session_id
    assert agent.model.llm is llm
