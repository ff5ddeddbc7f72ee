"""`serve --parallel N`: up to N runs at once on one model that batches concurrent calls; the rest queue."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hermes_local.sandbox import procs
from hermes_local.testing import ScriptedLLM, tool_call_text
from tests.fixtures.service_server import http, served, wait_status


class BatchingScriptedLLM(ScriptedLLM):
    """A scripted model that, like `batching.BatchedLLM`, takes concurrent calls; its first two calls
    each wait until the other has arrived, so they must come from runs that are going at once."""

    concurrent = True

    def __init__(self, outputs: list[str], on_meet) -> None:  # type: ignore[no-untyped-def]
        super().__init__(outputs)
        self._guard = threading.Lock()
        self._calls = 0
        self._meet = threading.Barrier(2, action=on_meet)

    def complete(self, tokens, *args, **kwargs):  # type: ignore[no-untyped-def]
        with self._guard:
            self._calls += 1
            first_two = self._calls <= 2
        if first_two:
            self._meet.wait(timeout=30)  # one run at a time would break the barrier
        with self._guard:
            return super().complete(tokens, *args, **kwargs)


def test_parallel_runs_overlap_and_the_rest_queue(workspace: Path) -> None:
    seen: list[tuple[int, int]] = []
    holder: dict = {}

    def on_meet() -> None:  # the two running runs met inside the model; the third POST may still be on its way
        deadline = time.monotonic() + 10
        while not holder["m"].queue and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append((len(holder["m"].running), len(holder["m"].queue)))

    llm = BatchingScriptedLLM(["Hello there."] * 3, on_meet)
    with served(llm, workspace, parallel=2) as (base, manager):
        holder["m"] = manager
        assert http("GET", f"{base}/v1/health")[1]["parallel"] == 2
        ids = [http("POST", f"{base}/v1/runs", {"task": f"Say hello ({i})."})[1]["id"] for i in range(3)]
        for run_id in ids:
            assert wait_status(base, run_id, {"done"})["result"]["answer"] == "Hello there."
    assert seen == [(2, 1)]  # two runs inside a model call at once, the third waiting in the queue
    assert not llm._meet.broken


def test_one_run_at_a_time_by_default(workspace: Path) -> None:
    llm = ScriptedLLM(["Hi."] * 2)
    with served(llm, workspace) as (base, manager):
        assert http("GET", f"{base}/v1/health")[1]["parallel"] == 1
        assert getattr(manager.model.lock, "__class__", object) is not None
        ids = [http("POST", f"{base}/v1/runs", {"task": f"Say hi ({i})."})[1]["id"] for i in range(2)]
        for run_id in ids:
            assert wait_status(base, run_id, {"done"})["status"] == "done"


def test_cancel_kills_only_that_runs_command_while_others_run(workspace: Path) -> None:
    script = [tool_call_text("run_shell", command="sleep 60; echo late > late.txt")] * 2
    llm = ScriptedLLM(script + ["Stopped."] * 2)
    with served(llm, workspace, parallel=2, allow_tools=["run_shell"]) as (base, manager):
        ids = [http("POST", f"{base}/v1/runs", {"task": f"Run it ({i})."})[1]["id"] for i in range(2)]
        deadline = time.monotonic() + 30
        while procs.live_count() < 2:  # both runs' commands are going
            assert time.monotonic() < deadline, "the two commands never started"
            time.sleep(0.1)
        http("POST", f"{base}/v1/runs/{ids[0]}/cancel")
        first = wait_status(base, ids[0], {"cancelled", "done", "error"}, timeout=20)  # not the 60 s sleep
        assert procs.live_count() == 1  # the other run's command goes on
        assert http("GET", f"{base}/v1/runs/{ids[1]}")[1]["status"] == "running"
        http("POST", f"{base}/v1/runs/{ids[1]}/cancel")
        second = wait_status(base, ids[1], {"cancelled", "done", "error"}, timeout=20)
    assert first["status"] == second["status"] == "cancelled"
    assert procs.live_count() == 0 and not (workspace / "late.txt").exists()


def test_a_run_waiting_for_approval_does_not_hold_the_queue(workspace: Path) -> None:
    """One worker (the default): the first of 5 runs waits on approval while the other 4 finish."""
    script = [tool_call_text("write_file", path="late.txt", content="x")]
    script += [f"Answer {i}." for i in range(1, 5)] + ["Written."]
    llm = ScriptedLLM(script)
    with served(llm, workspace) as (base, manager):
        first = http("POST", f"{base}/v1/runs", {"task": "Write late.txt"})[1]["id"]
        [pending] = wait_status(base, first, {"waiting_approval"})["pending_approvals"]
        others = [http("POST", f"{base}/v1/runs", {"task": f"Say hello ({i})."})[1]["id"] for i in range(1, 5)]
        answers = [wait_status(base, run_id, {"done"})["result"]["answer"] for run_id in others]
        health = http("GET", f"{base}/v1/health")[1]
        assert http("GET", f"{base}/v1/runs/{first}")[1]["status"] == "waiting_approval"  # still asking
        http("POST", f"{base}/v1/runs/{first}/approvals", {"call": pending["call"], "decision": "allow"})
        view = wait_status(base, first, {"done", "error"})
        after = http("GET", f"{base}/v1/health")[1]
    assert answers == [f"Answer {i}." for i in range(1, 5)]
    assert health["parallel"] == 1 and health["waiting_approval"] == 1 and health["queue"] == 0
    assert view["status"] == "done" and view["result"]["answer"] == "Written."
    assert (workspace / "late.txt").read_text() == "x"
    assert after["waiting_approval"] == 0 and after["running_ids"] == [] and manager._active == 0


def test_a_decided_run_takes_its_slot_back_before_queued_runs(workspace: Path) -> None:
    """Once decided, the waiting run goes before the runs still queued (the model's replies are handed out in
    call order, so each run's answer shows the order); one run works at a time."""
    script = [tool_call_text("write_file", path="w.txt", content="y"), tool_call_text("run_shell", command="sleep 3")]
    llm = ScriptedLLM([*script, "Shell done.", "Written.", "Hi 1.", "Hi 2."])
    with served(llm, workspace, allow_tools=["run_shell"]) as (base, _):
        first = http("POST", f"{base}/v1/runs", {"task": "Write w.txt"})[1]["id"]
        [pending] = wait_status(base, first, {"waiting_approval"})["pending_approvals"]
        shell = http("POST", f"{base}/v1/runs", {"task": "Run sleep 3"})[1]["id"]
        deadline = time.monotonic() + 30
        while procs.live_count() < 1:  # the shell run holds the one slot, in its command
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        queued = [http("POST", f"{base}/v1/runs", {"task": f"Say hi ({i})."})[1]["id"] for i in (1, 2)]
        http("POST", f"{base}/v1/runs/{first}/approvals", {"call": pending["call"], "decision": "allow"})
        views = [wait_status(base, run_id, {"done", "error"}) for run_id in (first, shell, *queued)]
    assert [v["result"]["answer"] for v in views] == ["Written.", "Shell done.", "Hi 1.", "Hi 2."]


def test_at_most_serve_max_queue_runs_wait_without_their_slot(workspace: Path) -> None:
    """Parked runs are bounded (each keeps a thread): past `serve_max_queue` a waiting run keeps its slot."""
    write = tool_call_text("write_file", path="p.txt", content="x")
    llm = ScriptedLLM([write, write, "B done.", "A done.", "C done."])
    with served(llm, workspace, serve_max_queue=1) as (base, _):
        a, b = (http("POST", f"{base}/v1/runs", {"task": f"Write p.txt ({n})"})[1]["id"] for n in "AB")
        [pending_a] = wait_status(base, a, {"waiting_approval"})["pending_approvals"]
        [pending_b] = wait_status(base, b, {"waiting_approval"})["pending_approvals"]  # A gave its slot to B
        c = http("POST", f"{base}/v1/runs", {"task": "Say hi (C)."})[1]["id"]
        time.sleep(0.3)
        assert http("GET", f"{base}/v1/runs/{c}")[1]["status"] == "queued"  # B kept the slot: only one parks
        assert http("GET", f"{base}/v1/health")[1]["waiting_approval"] == 1
        http("POST", f"{base}/v1/runs/{a}/approvals", {"call": pending_a["call"], "decision": "deny"})
        http("POST", f"{base}/v1/runs/{b}/approvals", {"call": pending_b["call"], "decision": "deny"})
        answers = [wait_status(base, run_id, {"done"})["result"]["answer"] for run_id in (a, b, c)]
    assert answers == ["A done.", "B done.", "C done."]
