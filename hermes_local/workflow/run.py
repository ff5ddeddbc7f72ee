"""Running workflows: tool steps in dependency order without the model (`hermes-local workflow run`).

Steps (see `spec.py` for the file format and validation) run through the tool side of a run opened by
`runtime.start_run` (the workspace pinned, the same `Executor` and approval rules as the agent, except the fresh
approval after untrusted content: a workflow's calls are its author's, not chosen by a model), checkpointed under
the workflow's session; each step's result is a `StepOutcome` holding one `events.ToolOutcome`. An optional
`summarize = true` step asks the model once (no tools) for a report from its dependencies' outputs and can write it
to `params.output`. A failed step stops its dependents while independent branches still run; the state file
`$HERMES_LOCAL_HOME/workflows/<name>.json` lets `--resume` reuse completed outputs. Results go to a session log
(workflow_start, workflow_step, workflow_end). Does not parse flags or print."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import TemplateError

from hermes_local.config import Settings, home_dir
from hermes_local.errors import HermesError, UserError
from hermes_local.events import ToolOutcome, WorkflowEvent
from hermes_local.llm import LLM
from hermes_local.prompts import BoundedSandbox
from hermes_local.runtime import Model, RunHandle, RunSpec, start_run
from hermes_local.sandbox.workspace import FolderId, PinnedWorkspace
from hermes_local.tools import Approver, Executor, ToolRegistry, ToolResult
from hermes_local.workflow.spec import (
    StepSpec,
    Workflow,
    _ancestors,
    builtin_context,
    load_workflow,
    render_value,
    template_env,
)

__all__ = ["StepOutcome", "WorkflowResult", "load_workflow", "render_value", "run_workflow", "template_env"]

OUTPUT_CAP = 200_000  # step outputs feed later steps, so they are not cut to the model's context size
SUMMARY_INPUT_CHARS = 6000

StepSink = Callable[["StepOutcome"], None]


@dataclass
class StepOutcome:
    """One workflow step: its status and, unless it was skipped, the tool call's `ToolOutcome`."""

    id: str
    status: str  # ok | failed | skipped | reused
    outcome: ToolOutcome
    seconds: float = 0.0
    blocked_by: str | None = None
    fingerprint: str = ""

    tool = property(lambda self: self.outcome.name)
    ok = property(lambda self: self.outcome.ok)
    data = property(lambda self: self.outcome.data)
    summary = property(lambda self: self.outcome.summary)
    error = property(lambda self: self.outcome.error)
    error_kind = property(lambda self: self.outcome.error_kind)
    params = property(lambda self: self.outcome.arguments)
    approval = property(lambda self: self.outcome.approval)

    def context(self) -> dict[str, Any]:
        return {"ok": self.ok, "data": self.data, "summary": self.summary, "error": self.error}

    def to_state(self) -> dict[str, Any]:
        """The flat record kept in the state file and the `workflow_step` event."""
        return {
            "id": self.id,
            "tool": self.tool,
            "status": self.status,
            "ok": self.ok,
            "data": self.data,
            "summary": self.summary,
            "error": self.error,
            "error_kind": self.error_kind,
            "params": self.params,
            "approval": self.approval,
            "seconds": self.seconds,
            "blocked_by": self.blocked_by,
            "fingerprint": self.fingerprint,
        }


def _step(step_id: str, tool: str, status: str, result: ToolResult, params: Any = None, **extra: Any) -> StepOutcome:
    arguments = params if isinstance(params, dict) else {}
    return StepOutcome(step_id, status, ToolOutcome(0, tool, arguments, result), **extra)


@dataclass
class WorkflowResult:
    """The outcomes of one workflow run, in step order."""

    name: str
    session_id: str
    outcomes: list[StepOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.status in ("ok", "reused") for o in self.outcomes)

    @property
    def failed(self) -> list[StepOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


# -- templates ------------------------------------------------------------------------------------
# -- state ----------------------------------------------------------------------------------------
def state_path(name: str) -> Path:
    return home_dir() / "workflows" / f"{name}.json"


def _save_state(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


def _fingerprint(step: StepSpec, wf: Workflow, workspace: Path, db_path: Path | None) -> str:
    blob = json.dumps(
        [step.model_dump(), wf.vars, str(workspace), str(db_path) if db_path else None], sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# -- running --------------------------------------------------------------------------------------
def run_workflow(
    wf: Workflow,
    settings: Settings,
    *,
    workspace: Path,
    db_path: Path | None,
    approver: Approver,
    folder: FolderId | None = None,
    resume: bool = False,
    llm_factory: Callable[[], LLM] | None = None,
    on_step: StepSink | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> WorkflowResult:
    """Run the steps in order (see the module docstring); `on_notice` receives the tools' one-line notices."""
    if not workspace.is_dir():
        raise UserError(f"workspace {workspace} is not a directory; create it or pass --workspace DIR")
    workspace = workspace.resolve()
    db_path = db_path.resolve() if db_path else None
    spath = state_path(wf.name)
    previous: dict[str, Any] = {}
    if resume:
        if not spath.is_file():
            raise UserError(f"no saved state for workflow {wf.name!r} ({spath}); run it once without --resume")
        try:
            previous = json.loads(spath.read_text(encoding="utf-8")).get("steps", {})
        except (json.JSONDecodeError, AttributeError) as exc:
            raise UserError(f"state file {spath} is corrupt; delete it and run without --resume") from exc
    # The steps are the file's calls, not a model's: untrusted step outputs cannot choose them, so the fresh
    # approval after untrusted content does not apply (writes to files that run code later still ask).
    approver.trust_content = True
    spec = RunSpec(
        settings=settings,
        workspace=workspace,
        folder=folder,  # a schedule's: the folder it recorded, reopened and checked by the front door
        tools=wf.registry,
        approver=approver,
        db=db_path,
        output_cap=OUTPUT_CAP,  # step outputs feed later steps: not cut to a model's context size
        on_notice=on_notice,  # run_shell steps honour the sandbox settings
    )
    with start_run(spec, None) as handle:  # its tool side: pinned, checkpointed under the workflow's session
        return _run_steps(wf, settings, handle, db_path, approver, previous, resume, llm_factory, on_step)


def _run_steps(
    wf: Workflow,
    settings: Settings,
    handle: RunHandle,
    db_path: Path | None,
    approver: Approver,
    previous: dict[str, Any],
    resume: bool,
    llm_factory: Callable[[], LLM] | None,
    on_step: StepSink | None,
) -> WorkflowResult:
    """The steps in order, each checkpointed as one step of the workflow's session (see the module docstring)."""
    executor, session = handle.executor, handle.session
    assert session is not None
    workspace, spath = handle.workspace.path, state_path(wf.name)
    result = WorkflowResult(wf.name, session.id)
    state: dict[str, Any] = {
        "name": wf.name,
        "file": str(wf.path),
        "session_id": session.id,
        "status": "running",
        "steps": {},
    }
    env = template_env()
    base = builtin_context() | {"vars": wf.vars, "workflow": {"name": wf.name}}
    done: dict[str, StepOutcome] = {}
    start = {"name": wf.name, "file": str(wf.path), "resume": resume, "order": [s.id for s in wf.steps]}
    session.log(WorkflowEvent("workflow_start", start))
    for number, step in enumerate(wf.steps, 1):
        if executor.checkpoints is not None:
            executor.checkpoints.at(number)
        fp = _fingerprint(step, wf, workspace, db_path)
        old = previous.get(step.id) or {}
        blocked = next((d for d in step.depends_on if done[d].status in ("failed", "skipped")), None)
        tool_name = step.tool or "(summarize)"
        if blocked:
            skipped = ToolResult(False, f"not run: {blocked} did not complete")
            outcome = _step(step.id, tool_name, "skipped", skipped, blocked_by=blocked, fingerprint=fp)
        elif (
            resume
            and old.get("status") in ("ok", "reused")
            and old.get("fingerprint") == fp
            and all(done[d].status == "reused" for d in step.depends_on)
        ):
            reused = ToolResult(True, old.get("summary", ""), old.get("data"))
            outcome = _step(step.id, tool_name, "reused", reused, old.get("params"), fingerprint=fp)
        else:
            ctx = base | {"steps": {d: done[d].context() for d in _ancestors(step.id, {s.id: s for s in wf.steps})}}
            started = time.perf_counter()
            outcome = _run_step(step, wf, env, ctx, executor, settings, handle.workspace, approver, llm_factory)
            outcome.seconds = round(time.perf_counter() - started, 3)
            outcome.fingerprint = fp
        done[step.id] = outcome
        result.outcomes.append(outcome)
        state["steps"][step.id] = outcome.to_state()
        _save_state(spath, state)
        payload = outcome.to_state()
        payload.pop("data" if not outcome.ok else "error")
        session.log(WorkflowEvent("workflow_step", payload))
        if on_step:
            on_step(outcome)
    state["status"] = "ok" if result.ok else "failed"
    _save_state(spath, state)
    session.log(
        WorkflowEvent(
            "workflow_end",
            {
                "name": wf.name,
                "status": state["status"],
                "failed": [o.id for o in result.failed],
                "skipped": [o.id for o in result.outcomes if o.status == "skipped"],
            },
        )
    )
    return result


def _run_step(
    step: StepSpec,
    wf: Workflow,
    env: BoundedSandbox,
    ctx: dict[str, Any],
    executor: Executor,
    settings: Settings,
    workspace: PinnedWorkspace,
    approver: Approver,
    llm_factory: Callable[[], LLM] | None,
) -> StepOutcome:
    tool_name = step.tool or "(summarize)"
    try:
        params = render_value(env, step.params, ctx)
        prompt = render_value(env, step.prompt, ctx) if step.prompt else None
    except (TemplateError, ValueError, TypeError) as exc:
        message = f"cannot fill in params: {type(exc).__name__}: {exc}"
        return _step(step.id, tool_name, "failed", ToolResult.failure("invalid_arguments", message, message))
    if step.summarize:
        res = _summarize(step, wf, ctx, params, prompt, executor, settings, workspace, approver, llm_factory)
    else:
        res = executor.execute(step.tool or "", params)
    return _step(step.id, tool_name, "ok" if res.ok else "failed", res, params)


def _summarize(
    step: StepSpec,
    wf: Workflow,
    ctx: dict[str, Any],
    params: dict[str, Any],
    prompt: str | None,
    executor: Executor,
    settings: Settings,
    workspace: PinnedWorkspace,
    approver: Approver,
    llm_factory: Callable[[], LLM] | None,
) -> ToolResult:

    if llm_factory is None:
        return ToolResult.failure("tool_error", "no model is available for the summarize step")
    if prompt is None:
        inputs = json.dumps({d: ctx["steps"][d]["data"] for d in step.depends_on}, ensure_ascii=False, default=str)
        if len(inputs) > SUMMARY_INPUT_CHARS:
            inputs = inputs[:SUMMARY_INPUT_CHARS] + " …(cut)"
        prompt = (
            f"Write a short Markdown report for the workflow '{wf.name}'. Use only these step results (JSON) "
            f"and do not invent numbers:\n{inputs}"
        )
    try:
        llm = llm_factory()
        # a report from these results only: nothing recalled into it, no episode of it kept
        only = {"tool_choice": "none", "max_steps": 1, "memory": False}
        spec = RunSpec(task=prompt, settings=settings, overrides=only, workspace=workspace, tools=ToolRegistry(),
                       approver=approver, log=False)  # fmt: skip
        with start_run(spec, Model(llm)) as handle:
            run = handle.run()
    except HermesError as exc:  # a missing model or a replay that ran out
        return ToolResult.failure("tool_error", f"the model could not write the report: {exc}")
    text = (run.answer or "").strip()
    if not text:
        return ToolResult.failure("tool_error", f"the model gave no report (stopped: {run.error or run.stopped})")
    output = params.get("output")
    if output:
        written = executor.execute("write_file", {"path": str(output), "content": text + "\n"})
        if not written.ok:
            return written
    summary = f"report of {len(text)} characters" + (f" written to {output}" if output else "")
    return ToolResult.success({"text": text, "output": output}, summary)
