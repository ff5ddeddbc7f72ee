"""`eval --jobs N`: runs go concurrently on one model, reports keep the suite's order and verdicts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from hermes_local.config import load_settings
from hermes_local.engines.replay import load_replay
from hermes_local.evals import suite as evaluation
from hermes_local.evals.cases import load_cases
from tests.evals.test_evaluation import EVAL_DIR, run_eval


def test_jobs_give_the_same_report_as_one_at_a_time(tmp_path: Path) -> None:
    reports = {}
    for jobs in ("1", "4"):
        path = tmp_path / f"report{jobs}.json"
        res = run_eval(
            str(EVAL_DIR / "starter.jsonl"), "--model", f"replay:{EVAL_DIR / 'replay'}", "--report", str(path),
            "--jobs", jobs,
        )  # fmt: skip
        assert res.exit_code == 0, res.stdout + res.stderr
        reports[jobs] = json.loads(path.read_text())

    def shape(data: dict) -> list:
        cases = [(c["id"], c["passed"], c["mean_steps"], c["mean_tokens"], c["tool_calls"]) for c in data["cases"]]
        return cases + [{k: v for k, v in data["summary"].items() if "seconds" not in k}]

    assert shape(reports["1"]) == shape(reports["4"])


class RendezvousLLM:
    """Wraps a case's replay model; its first model call waits until `parties` runs are inside one."""

    def __init__(self, inner, barrier: threading.Barrier, seen: set) -> None:
        self.inner, self.barrier, self.seen = inner, barrier, seen
        self.n_ctx, self.description = inner.n_ctx, inner.description

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def complete(self, tokens, *args, **kwargs):  # type: ignore[no-untyped-def]
        if id(self) not in self.seen:
            self.seen.add(id(self))
            self.barrier.wait(timeout=30)  # one run at a time would break the barrier: BrokenBarrierError
        return self.inner.complete(tokens, *args, **kwargs)


def test_runs_really_overlap(tmp_path: Path, monkeypatch) -> None:
    suite = load_cases(EVAL_DIR / "starter.jsonl", only=["time_now", "time_to_memo", "db_count_customers"])
    settings = load_settings({"model": f"replay:{EVAL_DIR / 'replay'}"})
    barrier, seen = threading.Barrier(3), set()

    def llm_for_case(settings, case_id, source=None):  # type: ignore[no-untyped-def]
        return RendezvousLLM(load_replay(settings.model, n_ctx=settings.n_ctx, case_id=case_id), barrier, seen)

    monkeypatch.setattr(evaluation, "llm_for_case", llm_for_case)
    reports = evaluation.run_suite(suite, settings, jobs=3)
    assert [r.id for r in reports] == [sc.case.id for sc in suite.cases] and len(reports) == 3
    assert all(r.passed for r in reports), [r.runs[0].failures for r in reports]
    assert not barrier.broken
