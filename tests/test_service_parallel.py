"""`serve --parallel N`: up to N runs at once on one model that batches concurrent calls; the rest queue."""

from __future__ import annotations

import threading
from pathlib import Path

from service_server import http, served, wait_status

from hermes_local.testing import ScriptedLLM


class BatchingScriptedLLM(ScriptedLLM):
    """A scripted model that, like `batching.BatchedLLM`, takes concurrent calls; its first two calls
    each wait until the other has arrived, so they must come from runs that are going at once."""

    concurrent = True

    def __init__(self, outputs: list[str], on_meet) -> None:  # type: ignore[no-untyped-def]
        super().__init__(outputs)
        self._guard = threading.Lock()
        self._calls = 0
        self._meet = threading.Barrier(2, action=on_meet)

    def complete(self, tokens, **kwargs):  # type: ignore[no-untyped-def]
        with self._guard:
            self._calls += 1
            first_two = self._calls <= 2
        if first_two:
            self._meet.wait(timeout=30)  # one run at a time would break the barrier
        with self._guard:
            return super().complete(tokens, **kwargs)


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
