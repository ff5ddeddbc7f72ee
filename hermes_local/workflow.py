"""Workflows: a TOML file of tool steps run in dependency order without the model (`hermes-local workflow run`).

A workflow has a `name`, optional `[vars]` and `tools_modules`, and `[[steps]]` with `id`, `tool`, `params` and
`depends_on`. Params are Jinja templates (sandboxed, `StrictUndefined`) over `steps.<id>.data|summary|ok`,
`vars.<name>`, `today`, `yesterday` and `now`; a param that is exactly one `{{ expression }}` keeps its native
type. An optional `summarize = true` step asks the model once (no tools) for a report from its dependencies'
outputs and can write it to `params.output`. Everything is validated before anything runs (unknown tool, cycle,
missing dependency, a template that reads a step it does not depend on). Tools run through the same `Executor`
and approval rules as the agent. A failed step stops its dependents while independent branches still run; the
state file `$HERMES_LOCAL_HOME/workflows/<name>.json` lets `--resume` reuse completed outputs. Results go to a
session log (workflow_start, workflow_step, workflow_end). Does not parse flags or print.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateError, Undefined, nodes
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hermes_local.config import Settings, home_dir
from hermes_local.errors import HermesError, UserError
from hermes_local.llm import LLM
from hermes_local.tools import Approver, Executor, ToolContext, ToolRegistry, ToolResult

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"  # usable as `steps.<id>` in Jinja
OUTPUT_CAP = 200_000  # step outputs feed later steps, so they are not cut to the model's context size
SUMMARY_INPUT_CHARS = 6000
_SINGLE_EXPRESSION = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}|\{%|%\}).)*)\}\}\s*$", re.S)

StepSink = Callable[["StepOutcome"], None]


class StepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=STEP_ID_PATTERN)
    tool: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    summarize: bool = False
    prompt: str | None = None


class WorkflowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    tools_modules: list[str] = Field(default_factory=list)
    vars: dict[str, Any] = Field(default_factory=dict)
    steps: list[StepSpec] = Field(min_length=1)


@dataclass
class Workflow:
    name: str
    path: Path
    steps: list[StepSpec]  # in the order they run (topological, file order among equals)
    vars: dict[str, Any]
    registry: ToolRegistry

    def step(self, step_id: str) -> StepSpec:
        return next(s for s in self.steps if s.id == step_id)


@dataclass
class StepOutcome:
    id: str
    tool: str
    status: str  # ok | failed | skipped | reused
    ok: bool = False
    data: Any = None
    summary: str = ""
    error: str | None = None
    error_kind: str | None = None
    params: Any = None
    approval: str = ""
    seconds: float = 0.0
    blocked_by: str | None = None
    fingerprint: str = ""

    def context(self) -> dict[str, Any]:
        return {"ok": self.ok, "data": self.data, "summary": self.summary, "error": self.error}


@dataclass
class WorkflowResult:
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
def _add_days(value: Any, days: int) -> str:
    return (date.fromisoformat(str(value)[:10]) + timedelta(days=int(days))).isoformat()


def template_env() -> SandboxedEnvironment:
    env = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters["add_days"] = _add_days
    return env


def builtin_context(now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now().astimezone()
    today = now.date()
    return {
        "now": now.isoformat(timespec="seconds"),
        "today": today.isoformat(),
        "yesterday": (today - timedelta(days=1)).isoformat(),
    }


def render_value(env: SandboxedEnvironment, value: Any, context: dict[str, Any]) -> Any:
    """Render strings (recursively in lists/tables); exactly one `{{ expr }}` keeps the native type."""
    if isinstance(value, dict):
        return {k: render_value(env, v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(env, v, context) for v in value]
    if not isinstance(value, str) or ("{{" not in value and "{%" not in value):
        return value
    single = _SINGLE_EXPRESSION.match(value)
    if single:
        result = env.compile_expression(single.group("expr"), undefined_to_none=False)(**context)
        if isinstance(result, Undefined):
            str(result)  # StrictUndefined raises with the name that is missing
        return result
    return env.from_string(value).render(**context)


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) and ("{{" in value or "{%" in value) else []


def template_references(env: SandboxedEnvironment, source: str) -> tuple[set[str], set[str]]:
    """(step ids, var names) a template reads; raises ValueError for dynamic `steps[...]` use."""
    tree = env.parse(source)
    found: dict[str, set[str]] = {"steps": set(), "vars": set()}
    resolved = 0
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if not (isinstance(node.node, nodes.Name) and node.node.name in found):
            continue
        key = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)
        if isinstance(key, str):
            found[node.node.name].add(key)
            resolved += 1
    total = sum(1 for n in tree.find_all(nodes.Name) if n.name in found)
    if total > resolved:
        raise ValueError("refer to earlier results by name, as steps.STEP_ID.data (or vars.NAME)")
    return found["steps"], found["vars"]


# -- loading and validation -----------------------------------------------------------------------
def _order(steps: list[StepSpec], where: str) -> list[StepSpec]:
    """Topological order (stable in file order), or a UserError naming a cycle."""
    by_id = {s.id: s for s in steps}
    state: dict[str, int] = {}  # 1 = visiting, 2 = done
    order: list[StepSpec] = []

    def visit(step: StepSpec, path: list[str]) -> None:
        if state.get(step.id) == 2:
            return
        if state.get(step.id) == 1:
            cycle = path[path.index(step.id) :] + [step.id]
            raise UserError(f"{where}: dependency cycle {' -> '.join(cycle)}; remove one of these depends_on entries")
        state[step.id] = 1
        for dep in step.depends_on:
            visit(by_id[dep], [*path, step.id])
        state[step.id] = 2
        order.append(step)

    for s in steps:
        visit(s, [])
    return order


def _ancestors(step_id: str, by_id: dict[str, StepSpec]) -> set[str]:
    seen: set[str] = set()
    todo = list(by_id[step_id].depends_on)
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(by_id[dep].depends_on)
    return seen


def load_workflow(
    path: Path,
    *,
    tools_modules: list[str] | None = None,
    var_overrides: dict[str, str] | None = None,
    now: datetime | None = None,
    allow_imports: bool = False,
) -> Workflow:
    """Parse and validate FILE.toml; every mistake is one UserError naming the file and the step.

    A file's own `tools_modules` run Python code when imported, so they are loaded only with
    `allow_imports` (the `--allow-imports` flag): a workflow file from elsewhere cannot run code by itself.
    """
    from hermes_local.runtime import build_registry

    where = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UserError(f"workflow file {where} does not exist") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from exc
    try:
        spec = WorkflowSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "workflow"
        raise UserError(f"{where}: {loc}: {first['msg']}") from exc
    modules = [str((path.parent / m) if not Path(m).is_absolute() else m) for m in spec.tools_modules]
    if modules and not allow_imports:
        raise UserError(
            f"{where}: tools_modules would import and run Python code ({', '.join(modules)}); "
            "rerun with --allow-imports if you trust this workflow file"
        )
    registry = build_registry([*modules, *(tools_modules or [])])
    by_id: dict[str, StepSpec] = {}
    for s in spec.steps:
        if s.id in by_id:
            raise UserError(f"{where}: two steps have the id {s.id!r}; step ids must be unique")
        by_id[s.id] = s
    for s in spec.steps:
        if s.summarize:
            if s.tool:
                raise UserError(f"{where}: step {s.id!r} has summarize = true, so it must not name a tool")
            if set(s.params) - {"output"}:
                raise UserError(f"{where}: step {s.id!r} (summarize) takes only params.output, the file to write")
            if not s.depends_on:
                s.depends_on = [o.id for o in spec.steps if not o.summarize]
        elif not s.tool:
            raise UserError(f"{where}: step {s.id!r} needs a tool (or summarize = true)")
        elif registry.get(s.tool) is None:
            known = ", ".join(registry.names())
            raise UserError(f"{where}: step {s.id!r} uses unknown tool {s.tool!r} (known: {known}; or --tools-module)")
        for dep in s.depends_on:
            if dep not in by_id:
                raise UserError(f"{where}: step {s.id!r} depends on {dep!r}, which is not a step in this workflow")
            if dep == s.id:
                raise UserError(f"{where}: step {s.id!r} depends on itself")
    ordered = _order(spec.steps, where)
    env = template_env()
    variables = dict(spec.vars) | dict(var_overrides or {})
    for s in ordered:
        allowed = _ancestors(s.id, by_id)
        for source in _strings(s.params) + ([s.prompt] if s.prompt else []):
            try:
                step_refs, var_refs = template_references(env, source)
            except (TemplateError, ValueError) as exc:
                raise UserError(f"{where}: step {s.id!r}: bad template {source[:60]!r}: {exc}") from exc
            for ref in sorted(step_refs - allowed):
                hint = "add it to depends_on" if ref in by_id else "no such step"
                raise UserError(f"{where}: step {s.id!r} reads steps.{ref} but does not depend on it ({hint})")
            for ref in sorted(var_refs - set(variables)):
                raise UserError(f"{where}: step {s.id!r} reads vars.{ref}, which is not defined in [vars] or --var")
    try:
        rendered = render_value(env, variables, builtin_context(now))
    except TemplateError as exc:
        raise UserError(f"{where}: [vars]: {exc}") from exc
    return Workflow(spec.name, path, ordered, rendered, registry)


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
    resume: bool = False,
    llm_factory: Callable[[], LLM] | None = None,
    on_step: StepSink | None = None,
) -> WorkflowResult:
    from hermes_local.session import SessionLog

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
    context = ToolContext(
        workspace=workspace,
        db_path=db_path,
        allow_hosts=list(settings.allow_hosts),
        output_cap=OUTPUT_CAP,
        timeout=settings.tool_timeout,
    )
    executor = Executor(registry=wf.registry, context=context, approver=approver)
    session = SessionLog()
    result = WorkflowResult(wf.name, session.id)
    state = {"name": wf.name, "file": str(wf.path), "session_id": session.id, "status": "running", "steps": {}}
    env = template_env()
    base = builtin_context() | {"vars": wf.vars, "workflow": {"name": wf.name}}
    done: dict[str, StepOutcome] = {}
    session.log(
        "workflow_start", {"name": wf.name, "file": str(wf.path), "resume": resume, "order": [s.id for s in wf.steps]}
    )
    try:
        for step in wf.steps:
            fp = _fingerprint(step, wf, workspace, db_path)
            old = previous.get(step.id) or {}
            blocked = next((d for d in step.depends_on if done[d].status in ("failed", "skipped")), None)
            tool_name = step.tool or "(summarize)"
            if blocked:
                outcome = StepOutcome(step.id, tool_name, "skipped", blocked_by=blocked, fingerprint=fp)
                outcome.summary = f"not run: {blocked} did not complete"
            elif (
                resume
                and old.get("status") in ("ok", "reused")
                and old.get("fingerprint") == fp
                and all(done[d].status == "reused" for d in step.depends_on)
            ):
                outcome = StepOutcome(
                    step.id, tool_name, "reused", True, old.get("data"), old.get("summary", ""), fingerprint=fp
                )
                outcome.params = old.get("params")
            else:
                ctx = base | {"steps": {d: done[d].context() for d in _ancestors(step.id, {s.id: s for s in wf.steps})}}
                started = time.perf_counter()
                outcome = _run_step(step, wf, env, ctx, executor, settings, workspace, approver, llm_factory)
                outcome.seconds = round(time.perf_counter() - started, 3)
                outcome.fingerprint = fp
            done[step.id] = outcome
            result.outcomes.append(outcome)
            state["steps"][step.id] = asdict(outcome)
            _save_state(spath, state)
            payload = asdict(outcome)
            payload.pop("data" if not outcome.ok else "error")
            session.log("workflow_step", payload)
            if on_step:
                on_step(outcome)
        state["status"] = "ok" if result.ok else "failed"
        _save_state(spath, state)
        session.log(
            "workflow_end",
            {
                "name": wf.name,
                "status": state["status"],
                "failed": [o.id for o in result.failed],
                "skipped": [o.id for o in result.outcomes if o.status == "skipped"],
            },
        )
    finally:
        session.close()
    return result


def _run_step(
    step: StepSpec,
    wf: Workflow,
    env: SandboxedEnvironment,
    ctx: dict[str, Any],
    executor: Executor,
    settings: Settings,
    workspace: Path,
    approver: Approver,
    llm_factory: Callable[[], LLM] | None,
) -> StepOutcome:
    tool_name = step.tool or "(summarize)"
    try:
        params = render_value(env, step.params, ctx)
        prompt = render_value(env, step.prompt, ctx) if step.prompt else None
    except (TemplateError, ValueError, TypeError) as exc:
        message = f"cannot fill in params: {type(exc).__name__}: {exc}"
        return StepOutcome(step.id, tool_name, "failed", error=message, error_kind="invalid_arguments", summary=message)
    executor.last_approval = ""
    if step.summarize:
        res = _summarize(step, wf, ctx, params, prompt, executor, settings, workspace, approver, llm_factory)
    else:
        res = executor.execute(step.tool or "", params)
    status = "ok" if res.ok else "failed"
    return StepOutcome(
        step.id,
        tool_name,
        status,
        res.ok,
        res.data,
        res.summary,
        res.error,
        res.error_kind,
        params,
        executor.last_approval,
    )


def _summarize(
    step: StepSpec,
    wf: Workflow,
    ctx: dict[str, Any],
    params: dict[str, Any],
    prompt: str | None,
    executor: Executor,
    settings: Settings,
    workspace: Path,
    approver: Approver,
    llm_factory: Callable[[], LLM] | None,
) -> ToolResult:
    from hermes_local.runtime import build_agent

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
        agent_settings = settings.model_copy(update={"tool_choice": "none", "max_steps": 1})
        run = build_agent(llm, agent_settings, workspace=workspace, registry=ToolRegistry(), approver=approver).run(
            prompt
        )
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
