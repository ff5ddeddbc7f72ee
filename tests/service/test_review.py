"""Issue 31 over real HTTP (uvicorn on 127.0.0.1, the scripted model): a plan-only run (`"plan": true`), the
hand-off in a run's result, and the user's verdict (`POST /v1/runs/ID/rating`) through the request guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_local.events import Proposal, Rating, RunStart
from hermes_local.session import read_events, session_path
from hermes_local.testing import ScriptedLLM, tool_call_text
from tests.fixtures.service_server import http, served, wait_status


def test_a_plan_run_over_http_proposes_and_changes_nothing(workspace: Path) -> None:
    (workspace / "notes.md").write_text("old\n")
    llm = ScriptedLLM(
        [
            tool_call_text("read_file", path="notes.md"),
            tool_call_text("write_file", path="notes.md", content="new\n"),
            "Rewrote notes.md.",
        ]
    )
    with served(llm, workspace) as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Rewrite notes.md", "plan": True})
        view = wait_status(base, created["id"], {"done", "error"})
    llm.assert_all_used()
    assert view["status"] == "done" and view["pending_approvals"] == []  # nothing asked: nothing ran
    assert view["result"]["proposals"] == [
        {"name": "write_file", "arguments": {"path": "notes.md", "content": "new\n"}}
    ]
    assert (workspace / "notes.md").read_text() == "old\n"
    events = read_events(session_path(created["id"]))
    start = next(e for e in events if isinstance(e, RunStart))
    assert start.plan and start.workspace == str(workspace.resolve())
    assert [e.name for e in events if isinstance(e, Proposal)] == ["write_file"]


def test_a_run_that_gave_up_says_so_in_its_result_and_can_be_rated(workspace: Path) -> None:
    script = [tool_call_text("read_file", path="missing.md")] * 2 + ["I could not find it."]
    llm = ScriptedLLM(script)
    with served(llm, workspace, token="secret") as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Read missing.md", "max_steps": 2}, token="secret")
        run_id = created["id"]
        view = wait_status(base, run_id, {"done", "error"}, token="secret")
        unauthorised, _ = http("POST", f"{base}/v1/runs/{run_id}/rating", {"verdict": "bad"})
        wrong, body = http("POST", f"{base}/v1/runs/{run_id}/rating", {"verdict": "meh"}, token="secret")
        status, rated = http(
            "POST", f"{base}/v1/runs/{run_id}/rating", {"verdict": "bad", "note": "gave up"}, token="secret"
        )
    handoff = view["result"]["handoff"]
    assert view["result"]["stopped"] == "max_steps" and "--max-steps 2" in handoff["why"]
    assert handoff["done"] == [] and handoff["failed"][0].startswith("step 1: read_file missing.md → failed")
    assert handoff["continue"].startswith(f"hermes-local run --continue {run_id} ")
    assert unauthorised == 401 and wrong == 400 and "verdict" in body["error"]["message"]
    assert status == 200 and rated == {"id": run_id, "verdict": "bad", "note": "gave up"}
    assert [(e.verdict, e.note) for e in read_events(session_path(run_id)) if isinstance(e, Rating)] == [
        ("bad", "gave up")
    ]


def test_a_run_rated_bad_over_http_keeps_its_episode_marked_failed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_local.longterm import LongTermMemory

    monkeypatch.setenv("HERMES_LOCAL_EMBEDDING_MODEL", "none")  # words only: no embedding model loads here
    (workspace / "passport.txt").write_text("Passport: expires 2028-06-14\n")  # what backs the answer (issue 42)
    llm = ScriptedLLM([tool_call_text("read_file", path="passport.txt"), "The passport expires on 2028-06-14."])
    with served(llm, workspace) as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Find the passport expiry date"})
        view = wait_status(base, created["id"], {"done", "error"})
        status, _ = http("POST", f"{base}/v1/runs/{created['id']}/rating", {"verdict": "bad"})
    assert view["status"] == "done", view
    [episode] = LongTermMemory().items("episode")
    assert status == 200 and episode.session_id == created["id"] and episode.status == "failed"
    from hermes_local.config import load_settings
    from hermes_local.runtime import memory_scope

    here = LongTermMemory(scope=memory_scope(load_settings({}), workspace=workspace))  # what the next run would use
    assert here.recall("passport expiry date") == []
