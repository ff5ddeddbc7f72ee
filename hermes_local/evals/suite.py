"""Evaluation runs: a suite of cases on a model, scored (`hermes-local eval CASES.jsonl`).

Every run gets a fresh temporary workspace and home dir; write tools in the case's list are approved,
dangerous ones only when listed in `approve` and only while the command sandbox is in force, and `deny`
refuses a tool (`trust.py`: a bad run's recorded calls other than reads are refused too; each refusal is in
the report). `eval_tools` starts the MCP
servers of the config once for the whole eval run (not per case: a server's start-up, a second or more,
would be paid by every case and repeat; the reference servers keep no state between calls) and stops them
when the run ends; a case names their tools (`time__get_current_time`) in `tools` like built-ins. Their
folder is the server's `cwd`, else an empty temporary folder, never a case's workspace. A case passes pass^k
only when all K runs pass. With `jobs` > 1 the runs go concurrently in threads on one loaded model (a real
model serves them as sequences of one batched context, `batching.py`); reports keep the suite's order.
Exporting a session as a case is `export.py`. Case schema and checks
live in `cases.py`. Does not parse flags or print: `cli/evals.py` does.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_local.config import Settings
from hermes_local.evals.cases import (
    Case,
    Failure,
    Suite,
    SuiteCase,
    check_run,
)
from hermes_local.evals.trust import EvalApprover, denial_lines
from hermes_local.events import Event, LLMCall, Redecoded, Routed, StepStart, ToolFinished, ToolOutcome
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.tools import ToolRegistry

if TYPE_CHECKING:
    from hermes_local.dialects.base import Dialect
    from hermes_local.runtime import ModelSource


# -- running --------------------------------------------------------------------------------------
@dataclass
class RunOutcome:
    """One scored run of a case: pass/fail, calls, failures and usage."""

    passed: bool
    steps: int
    stopped: str
    answer: str | None
    calls: list[ToolOutcome]
    failures: list[Failure]
    failed_step: int | None
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    routed: str | None = None  # a team case: who the router picked
    routed_right: bool | None = None  # ...and whether it is the case's `specialist` (None: no expectation)
    denied: list[str] = field(default_factory=list)  # calls the eval refused and why (`trust.denial_lines`)
    redecoded: int = 0  # replies whose unreadable call was decoded again under the grammar (agent/redecode.py)
    unreadable: int = 0  # calls that did not parse and went back to the model as an error turn
    outcome: str = ""  # what the evidence said of the run (`agent/evidence.py`); a success that failed its checks
    # is a "false success"


@dataclass
class CaseReport:
    """All runs of one case (pass^k passes only when every run passes)."""

    id: str
    runs: list[RunOutcome] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.runs)

    def first_failure(self) -> tuple[int, RunOutcome] | None:
        return next(((i + 1, r) for i, r in enumerate(self.runs) if not r.passed), None)


# Concurrent runs: the home dir is a process-wide environment variable, so each run's agent is built
# (memory store, result cache opened under its own home) while holding this lock.
_BUILD_LOCK = threading.Lock()


@contextlib.contextmanager
def _home(path: Path) -> Iterator[None]:
    """A fresh HERMES_LOCAL_HOME for one run, so long-term memory from other runs cannot leak in."""
    old = os.environ.get("HERMES_LOCAL_HOME")
    os.environ["HERMES_LOCAL_HOME"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HERMES_LOCAL_HOME", None)
        else:
            os.environ["HERMES_LOCAL_HOME"] = old


def _fixtures(case: Case, root: Path, workspace: Path) -> Path | None:
    for rel, content in case.fixtures.files.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    if case.fixtures.database is None:
        return None
    db = root / "fixture.sqlite"
    conn = sqlite3.connect(db)
    try:
        for sql in case.fixtures.database:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()
    return db


@contextlib.contextmanager
def eval_tools(settings: Settings, on_notice: Callable[[str], None] | None = None) -> Iterator[ToolRegistry]:
    """Every tool a case may name: built-ins, `remember` and the configured MCP servers' tools.

    The servers start on entry and stop on exit (once per eval run); one that fails to start is one
    `on_notice` line, and a case naming its tools is refused at load with that line.
    """
    from hermes_local.runtime import build_registry

    with tempfile.TemporaryDirectory(prefix="hermes-eval-mcp-") as folder:
        registry = build_registry((), settings, on_notice=on_notice, workspace=Path(folder))
        try:
            yield registry
        finally:
            registry.close()


def run_once(
    sc: SuiteCase, settings: Settings, llm: Any, *, concurrent: bool = False, dialect: Dialect | None = None
) -> RunOutcome:
    """One run of a case in a fresh temporary workspace, scored. `concurrent`: other runs go on in other
    threads, so the run's home is in force only while its agent is built (under `_BUILD_LOCK`). `dialect`:
    the suite's (default: chosen for `llm` when the run is assembled)."""
    from hermes_local.runtime import Model, RunSpec, Sinks, start_run

    case = sc.case
    updates = {k: v for k, v in (("max_steps", case.max_steps), ("tool_choice", case.tool_choice)) if v is not None}
    events: list[Event] = []

    def collect(event: Event) -> None:
        if event.logged:
            events.append(event)

    with tempfile.TemporaryDirectory(prefix="hermes-eval-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        workspace.mkdir()
        db = _fixtures(case, root, workspace)
        writes = [t.name for t in sc.registry if t.permission == "write"]
        approver = EvalApprover(
            allow=[*writes, *case.approve],
            deny=case.deny,
            deny_calls=case.deny_calls,
            sandbox=SandboxPolicy.from_settings(settings),
        )
        spec = RunSpec(
            task=case.task,
            settings=settings,
            overrides=updates,
            workspace=workspace,
            tools=sc.registry,
            approver=approver,
            team=case.team,  # routed first, as `run --team`; a router model's toolsets: among the case's
            db=db,
            log=False,
        )
        started = time.perf_counter()
        result, error = None, None
        with _BUILD_LOCK if concurrent else contextlib.nullcontext(), _home(root / "home"):
            handle = start_run(spec, Model(llm, dialect), Sinks(display=collect))
        with _home(root / "home") if not concurrent else contextlib.nullcontext(), handle:
            try:
                result = handle.run()
            except Exception as exc:  # noqa: BLE001 - a replay that ran out, or a bug: the run fails, the suite goes on
                error = f"{type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - started
        calls = [e.outcome for e in events if isinstance(e, ToolFinished)]
        last_step = max((e.step for e in events if isinstance(e, StepStart)), default=0)
        stopped = result.stopped if result else "error"
        answer = result.answer if result else None
        failures, excused = check_run(case, calls, answer, stopped, workspace)
    if error:
        failures.insert(0, Failure("error", error, last_step or None))
    for f in failures:
        if f.check == "stopped" and result and result.error:
            f.message += f" ({result.error})"
    leftover = getattr(llm, "remaining", 0)
    if leftover:
        failures.append(Failure("replay", f"{leftover} scripted output(s) unused: the run diverged from the recording"))
    failed_step = None
    if failures:
        candidates = [f.step for f in failures if f.step] + [
            c.step for i, c in enumerate(calls) if not c.ok and i not in excused
        ]
        failed_step = min(candidates) if candidates else (last_step or None)
    llm_calls = [e for e in events if isinstance(e, LLMCall)]
    usage = {
        k: sum(getattr(c, k) for c in llm_calls)
        for k in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens")
    }
    routed = next((e.chosen for e in events if isinstance(e, Routed)), None)
    right = None if routed is None or case.specialist is None else routed == case.specialist
    return RunOutcome(
        not failures, last_step, stopped, answer, calls, failures, failed_step, **usage, seconds=round(seconds, 3),
        routed=routed, routed_right=right, denied=denial_lines(calls, approver),
        redecoded=sum(isinstance(e, Redecoded) for e in events),
        unreadable=sum(c.name == "invalid_tool_call" for c in calls),
        outcome=result.outcome if result else "failed",
    )  # fmt: skip


def llm_for_case(settings: Settings, case_id: str, source: ModelSource | None = None) -> Any:
    """`replay:DIR` -> a fresh replay model from DIR/<case_id>.jsonl; `replay:FILE` -> that file; else the
    model of `source` (the suite's `find_model`), loaded once."""
    from hermes_local.runtime import load_llm

    return load_llm(settings, source=source, case_id=case_id)


def run_suite(
    suite: Suite,
    settings: Settings,
    *,
    repeat: int = 1,
    on_progress: Callable[[str], None] | None = None,
    jobs: int = 1,
) -> list[CaseReport]:
    """Every case `repeat` times; with `jobs` > 1, that many runs at once (a real model is loaded with
    `parallel` >= jobs, so their model calls are decoded together)."""
    from hermes_local.runtime import dialect_for, find_model

    if jobs > 1 and settings.parallel < jobs:
        settings = settings.model_copy(update={"parallel": jobs})
    source = find_model(settings)  # once, in the user's home (each run builds its agent in a temporary one)
    for sc in suite.cases:  # fail early on a missing replay file, not after an hour of runs
        if source.replay:
            llm_for_case(settings, sc.case.id, source)
    reports = [CaseReport(sc.case.id) for sc in suite.cases]
    work = [(n, k) for n in range(len(suite.cases)) for k in range(repeat)]
    progress_lock = threading.Lock()

    def one(n: int, k: int) -> RunOutcome:
        sc = suite.cases[n]
        llm = llm_for_case(settings, sc.case.id, source)
        outcome = run_once(sc, settings, llm, concurrent=jobs > 1, dialect=dialect_for(settings, llm, source))
        if on_progress:
            verdict = "pass" if outcome.passed else f"FAIL at step {outcome.failed_step}"
            run = f" run {k + 1}/{repeat}" if repeat > 1 else ""
            with progress_lock:
                on_progress(f"[{n + 1}/{len(suite.cases)}] {sc.case.id}{run}: {verdict} ({outcome.seconds:.2f}s)")
        return outcome

    if jobs <= 1:
        outcomes = [one(n, k) for n, k in work]
    else:
        from hermes_local.sandbox import procs

        procs.install_signal_handlers()  # from the main thread: Ctrl-C still kills the runs' commands
        # While runs are concurrent, the process-wide home is an empty suite home (as each run's own is)
        with (
            tempfile.TemporaryDirectory(prefix="hermes-eval-home-") as home,
            _home(Path(home)),
            ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="hermes-eval") as pool,
        ):
            outcomes = list(pool.map(lambda nk: one(*nk), work))
    for (n, _k), outcome in zip(work, outcomes, strict=True):
        reports[n].runs.append(outcome)
    return reports


# -- reporting ------------------------------------------------------------------------------------
def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def _case_json(r: CaseReport) -> dict[str, Any]:
    calls = [c for run in r.runs for c in run.calls]
    return {
        "id": r.id,
        "passed": r.passed,
        "runs_passed": sum(run.passed for run in r.runs),
        "runs": len(r.runs),
        "mean_steps": _mean([run.steps for run in r.runs]),
        "mean_tokens": _mean([run.prompt_tokens + run.completion_tokens for run in r.runs]),
        "mean_seconds": _mean([run.seconds for run in r.runs]),
        "routed": [run.routed for run in r.runs if run.routed is not None],
        "tool_calls": len(calls),
        "valid_tool_calls": sum(c.valid for c in calls),
        "details": [asdict(run) for run in r.runs],
    }


def suite_report(reports: list[CaseReport], *, cases_file: Path, model: str | None, repeat: int) -> dict[str, Any]:
    runs = [run for r in reports for run in r.runs]
    calls = [c for run in runs for c in run.calls]
    failures = []
    for r in reports:
        for k, run in enumerate(r.runs, 1):
            if not run.passed:
                first = next((f for f in run.failures if f.step == run.failed_step), run.failures[0])
                failures.append(
                    {"case": r.id, "run": k, "step": run.failed_step, "check": first.check, "message": first.message}
                )
    passed = sum(r.passed for r in reports)
    routed = [run.routed_right for run in runs if run.routed_right is not None]
    summary = {
        "cases": len(reports),
        "passed": passed,
        "failed": len(reports) - passed,
        "repeat": repeat,
        "success_rate": round(passed / len(reports), 4) if reports else 0.0,
        "run_success_rate": round(sum(run.passed for run in runs) / len(runs), 4) if runs else 0.0,
        "tool_calls": len(calls),
        "tool_call_validity_rate": round(sum(c.valid for c in calls) / len(calls), 4) if calls else None,
        "mean_steps": _mean([run.steps for run in runs]),
        "mean_prompt_tokens": _mean([run.prompt_tokens for run in runs]),
        "mean_completion_tokens": _mean([run.completion_tokens for run in runs]),
        "mean_seconds": _mean([run.seconds for run in runs]),
        "redecoded": sum(run.redecoded for run in runs),
        "unreadable_calls": sum(run.unreadable for run in runs),
        "routing_accuracy": round(sum(routed) / len(routed), 4) if routed else None,  # team cases naming a specialist
        "routed_runs": len(routed),
        "denied_calls": sum(len(run.denied) for run in runs),
        # runs reported as a success that failed their checks: by the outcome (evidence), and by `stopped: answer`
        # alone (what a bare answer used to count as)
        "false_successes": sum(run.outcome in ("done", "answered") and not run.passed for run in runs),
        "false_successes_by_stopped": sum(run.stopped == "answer" and not run.passed for run in runs),
        "outcomes": {o: sum(run.outcome == o for run in runs) for o in sorted({run.outcome for run in runs})},
    }
    return {
        "cases_file": str(cases_file),
        "model": model,
        "summary": summary,
        "failures": failures,
        "cases": [_case_json(r) for r in reports],
    }


def format_table(reports: list[CaseReport], summary: dict[str, Any]) -> str:
    rows = [("case", "result", "runs", "steps", "calls ok", "tokens", "seconds", "where it went wrong")]
    for r in reports:
        j = _case_json(r)
        where = ""
        bad = r.first_failure()
        if bad:
            k, run = bad
            first = next((f for f in run.failures if f.step == run.failed_step), run.failures[0])
            where = f"{'run ' + str(k) + ', ' if len(r.runs) > 1 else ''}step {run.failed_step}: {first.message}"
        rows.append(
            (
                r.id,
                "pass" if r.passed else "FAIL",
                f"{j['runs_passed']}/{j['runs']}",
                f"{j['mean_steps']:g}",
                f"{j['valid_tool_calls']}/{j['tool_calls']}",
                f"{j['mean_tokens']:.0f}",
                f"{j['mean_seconds']:.2f}",
                where[:100],
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(7)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:7], widths, strict=True)) + "  " + row[7] for row in rows]
    validity = summary["tool_call_validity_rate"]
    lines.append(
        f"\n{summary['passed']}/{summary['cases']} cases passed (pass^{summary['repeat']}: "
        f"{summary['success_rate']:.0%}); tool-call validity "
        f"{'n/a' if validity is None else f'{validity:.0%}'} of {summary['tool_calls']} calls; "
        f"mean {summary['mean_steps']:.2f} steps, {summary['mean_prompt_tokens']:.0f}+"
        f"{summary['mean_completion_tokens']:.0f} tokens, {summary['mean_seconds']:.2f}s per run"
    )
    denied = [(r.id, line) for r in reports for run in r.runs for line in run.denied]
    for case_id, line in dict.fromkeys(denied):
        lines.append(f"{case_id}: {line}")
    outcomes = ", ".join(f"{name} {n}" for name, n in summary["outcomes"].items())
    false = summary["false_successes"]
    lines.append(f"outcomes: {outcomes}; false successes {false} (reported a success, failed its checks)")
    if summary.get("routed_runs"):
        lines.append(f"routing accuracy {summary['routing_accuracy']:.0%} of {summary['routed_runs']} routed runs")
    return "\n".join(line.rstrip() for line in lines)
