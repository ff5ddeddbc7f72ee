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
    llm = BatchingScriptedLLM(
        ["Hello there."] * 3, lambda: seen.append((len(holder["m"].running), len(holder["m"].queue)))
    )
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
