"""Workflow files: the TOML schema, Jinja templating of params, and validation (no running).

A workflow has a `name`, optional `[vars]` and `tools_modules`, and `[[steps]]` with `id`, `tool`, `params` and
`depends_on`. Params are Jinja templates (sandboxed, `StrictUndefined`) over `steps.<id>.data|summary|ok`,
`vars.<name>`, `today`, `yesterday` and `now`; a param that is exactly one `{{ expression }}` keeps its native
type. Everything is validated before anything runs (unknown tool, cycle, missing dependency, a template that
reads a step it does not depend on), and a workflow that loads Python tool modules needs the caller's explicit
consent. Running the steps is `run.py`'s job.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateError, Undefined, nodes
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hermes_local.errors import UserError, one_line
from hermes_local.prompts import BoundedSandbox, TemplateBudget, render_bounded, within_budget
from hermes_local.tools import ToolRegistry
from hermes_local.tools.traits import Need

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
MAX_STEPS = 500  # a workflow's steps; a longer file is refused at load (3,000 steps ran for minutes, unbounded)
STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"  # usable as `steps.<id>` in Jinja
_SINGLE_EXPRESSION = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}|\{%|%\}).)*)\}\}\s*$", re.S)


class StepSpec(BaseModel):
    """One `[[steps]]` entry of a workflow file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=STEP_ID_PATTERN)
    tool: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    summarize: bool = False
    prompt: str | None = None


class WorkflowSpec(BaseModel):
    """The validated contents of a workflow file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    tools_modules: list[str] = Field(default_factory=list)
    vars: dict[str, Any] = Field(default_factory=dict)
    steps: list[StepSpec] = Field(min_length=1, max_length=MAX_STEPS)


@dataclass
class Workflow:
    """A loaded workflow: steps in run order, variables and the tool registry."""

    name: str
    path: Path
    steps: list[StepSpec]  # in the order they run (topological, file order among equals)
    vars: dict[str, Any]
    registry: ToolRegistry

    def step(self, step_id: str) -> StepSpec:
        return next(s for s in self.steps if s.id == step_id)

    def needs(self, need: Need) -> bool:
        """Whether a step calls a tool that needs `need` to work (`Traits.needs`, e.g. a database)."""
        return any((t := self.registry.get(s.tool or "")) is not None and t.traits.needs == need for s in self.steps)


def _add_days(value: Any, days: int) -> str:
    return (date.fromisoformat(str(value)[:10]) + timedelta(days=int(days))).isoformat()


def template_env() -> BoundedSandbox:
    """The bounded sandbox parameters render in (a time and output budget per value, see prompts.py)."""
    env = BoundedSandbox(
        TemplateBudget(seconds=2.0, chars=1_000_000),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.add_filter("add_days", _add_days)
    return env


def builtin_context(now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now().astimezone()
    today = now.date()
    return {
        "now": now.isoformat(timespec="seconds"),
        "today": today.isoformat(),
        "yesterday": (today - timedelta(days=1)).isoformat(),
    }


def render_value(env: BoundedSandbox, value: Any, context: dict[str, Any]) -> Any:
    """Render strings (recursively in lists/tables); exactly one `{{ expr }}` keeps the native type."""
    if isinstance(value, dict):
        return {k: render_value(env, v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(env, v, context) for v in value]
    if not isinstance(value, str) or ("{{" not in value and "{%" not in value):
        return value
    single = _SINGLE_EXPRESSION.match(value)
    if single:
        with within_budget(env.budget):
            result = env.compile_expression(single.group("expr"), undefined_to_none=False)(**context)
            if isinstance(result, Undefined):
                str(result)  # StrictUndefined raises with the name that is missing
        return result
    return render_bounded(env.from_string(value), **context)


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) and ("{{" in value or "{%" in value) else []


def template_references(env: BoundedSandbox, source: str) -> tuple[set[str], set[str]]:
    """(step ids, var names) a template reads; raises ValueError for dynamic `steps[...]` use."""
    tree = env.parse(source)
    found: dict[str, set[str]] = {"steps": set(), "vars": set()}
    resolved = 0
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        assert isinstance(node, nodes.Getattr | nodes.Getitem)
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
        raise UserError(f"{where}: {one_line(exc)}") from exc
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
