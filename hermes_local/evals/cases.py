"""Eval cases: their schema, loading a JSONL suite, and checking one run against a case.

A case (one JSON object per line) is a task, the tools it may use (built-in names, MCP tool names such as
`time__get_current_time` from the servers in config, and/or tools-module paths, relative to the cases
file), optional fixtures (`files`: path -> content; `database`: SQL statements that build a SQLite file)
and checks: expected `tool_calls` (name, an argument subset, `ok`; `order` "any" or "exact"),
`forbidden_tools`, `answer_contains` (case-insensitive), `answer_regex`, and `files` (must exist and contain
text, or `exists: false`). In an expected argument, `{"$contains": "x"}` (case-insensitive) and
`{"$regex": "..."}` match loosely. A failing run names the step where it went wrong: the first step whose
tool call broke a check or failed. Does not run models: `suite.py` does.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hermes_local.errors import UserError, one_line
from hermes_local.events import ToolOutcome
from hermes_local.tools import ToolRegistry

CASE_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
ANSWER_WORDS = 5  # how many words of a recorded answer become answer_contains on export


def _compile(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc


def _regexes(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [str(value["$regex"])] if set(value) == {"$regex"} else []
        return own + [r for v in value.values() for r in _regexes(v)]
    return [r for v in value for r in _regexes(v)] if isinstance(value, list) else []


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class ExpectedCall(BaseModel):
    """A tool call a case expects: its name and (a subset of) its arguments."""

    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool | None = True  # None: either outcome


class FileCheck(BaseModel):
    """A file the run must leave in the workspace, with content checks."""

    model_config = ConfigDict(extra="forbid")
    path: str
    contains: list[str] = Field(default_factory=list)
    exists: bool = True

    @field_validator("contains", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return _as_list(value)


class Checks(BaseModel):
    """What a case checks after the run: calls, answer, files, stop reason."""

    model_config = ConfigDict(extra="forbid")
    tool_calls: list[ExpectedCall] = Field(default_factory=list)
    order: Literal["any", "exact"] = "any"
    forbidden_tools: list[str] = Field(default_factory=list)
    answer_contains: list[str] = Field(default_factory=list)
    answer_regex: str | None = None
    files: list[FileCheck] = Field(default_factory=list)

    @field_validator("answer_contains", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("answer_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            _compile(value)
        return value


class Fixtures(BaseModel):
    """Files and a SQLite database prepared in a fresh workspace before the run."""

    model_config = ConfigDict(extra="forbid")
    files: dict[str, str] = Field(default_factory=dict)
    database: list[str] | None = None


class Case(BaseModel):
    """One eval case: a task, the tools offered, fixtures and checks."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=CASE_ID)
    task: str = Field(min_length=1)
    tools: list[str] = Field(default_factory=list)
    fixtures: Fixtures = Field(default_factory=Fixtures)
    checks: Checks = Field(default_factory=Checks)
    approve: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    deny_calls: list[dict[str, str]] = Field(default_factory=list)  # {name, digest}: calls a bad run made (trust.py)
    max_steps: int | None = Field(None, ge=1)
    tool_choice: Literal["auto", "required", "none"] | None = None
    description: str = ""
    origin: dict[str, Any] = Field(default_factory=dict)  # an exported session's: verdict, note, undone, changed files
    team: bool = False  # routed first, as `run --team` (the [agents.NAME] profiles of the config)
    specialist: str | None = None  # who the router should pick (a profile name or "manager"): routing accuracy


@dataclass
class SuiteCase:
    """A validated case with the tool registry it runs with."""

    case: Case
    line: int
    registry: ToolRegistry


@dataclass
class Suite:
    """All cases of one cases file."""

    path: Path
    cases: list[SuiteCase]


# -- loading --------------------------------------------------------------------------------------
def safe_relative(path: str) -> bool:
    p = PurePosixPath(path)
    return bool(path) and not p.is_absolute() and ".." not in p.parts and not path.startswith("~")


def _case_registry(case: Case, base: Path, everything: ToolRegistry) -> ToolRegistry:
    from hermes_local.tools.modules import load_tools_module

    chosen = ToolRegistry()
    for entry in case.tools:
        if entry.endswith(".py") or "/" in entry or "." in entry:
            spec = str(base / entry) if entry.endswith(".py") and not Path(entry).is_absolute() else entry
            for t in load_tools_module(spec):
                chosen.register(t)
        elif (known := everything.get(entry)) is not None:
            chosen.register(known, source=everything.source(entry))
        elif (failed := everything.failed_sources.get(f"mcp:{entry.partition('__')[0]}")) is not None:
            raise UserError(f"tool {entry!r} is unavailable: {failed}")
        else:
            raise UserError(f"unknown tool {entry!r} (known: {', '.join(everything.names())}, or a tools module path)")
    return chosen


def _validate(case: Case, registry: ToolRegistry) -> None:
    for call in case.checks.tool_calls:
        if registry.get(call.name) is None:
            raise UserError(f"expected tool call {call.name!r} is not in the case's tools")
        for pattern in _regexes(call.arguments):
            try:
                _compile(pattern)
            except ValueError as exc:
                raise UserError(f"expected {call.name} arguments: {exc}") from exc
    for name in case.approve:
        if registry.get(name) is None:
            raise UserError(f"approve lists {name!r}, which is not in the case's tools")
    for path in [*case.fixtures.files, *(f.path for f in case.checks.files)]:
        if not safe_relative(path):
            raise UserError(f"path {path!r} must be relative and stay inside the workspace")
    if case.fixtures.database:
        conn = sqlite3.connect(":memory:")
        try:
            for sql in case.fixtures.database:
                conn.execute(sql)
        except sqlite3.Error as exc:
            raise UserError(f"fixtures.database: {exc} in {sql[:60]!r}") from exc
        finally:
            conn.close()


def load_cases(path: Path, only: list[str] | None = None, registry: ToolRegistry | None = None) -> Suite:
    """Parse and validate a cases file; any mistake is a UserError naming FILE:LINE.

    A case's tool names are looked up in `registry` (the eval run's tools: built-ins, `remember` and the
    configured MCP servers' tools, see `evaluation.eval_tools`); without it, in the built-ins only.
    """
    from hermes_local.runtime import build_registry

    everything = registry if registry is not None else build_registry()
    if not path.is_file():
        raise UserError(f"cases file {path} does not exist")
    cases: list[SuiteCase] = []
    seen: set[str] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        where = f"{path}:{lineno}"
        try:
            case = Case.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        except ValidationError as exc:
            raise UserError(f"{where}: {one_line(exc)}") from exc
        if case.id in seen:
            raise UserError(f"{where}: duplicate case id {case.id!r}")
        seen.add(case.id)
        try:
            chosen = _case_registry(case, path.parent, everything)
            _validate(case, chosen)
        except UserError as exc:
            raise UserError(f"{where}: case {case.id!r}: {exc}") from exc
        if not only or case.id in only:
            cases.append(SuiteCase(case, lineno, chosen))
    if not seen:
        raise UserError(f"{path}: no cases (one JSON object per line)")
    missing = sorted(set(only or []) - seen)
    if missing:
        raise UserError(f"{path}: no case with id {missing[0]!r}")
    return Suite(path, cases)


# -- checking -------------------------------------------------------------------------------------


@dataclass
class Failure:
    """One failed check, with the step it points to."""

    check: str
    message: str
    step: int | None = None


def value_matches(expected: Any, actual: Any) -> bool:
    """`expected` is a subset of `actual`; `{"$contains": s}` / `{"$regex": r}` match strings loosely."""
    if isinstance(expected, dict) and len(expected) == 1 and next(iter(expected)) in ("$contains", "$regex"):
        op, arg = next(iter(expected.items()))
        text = actual if isinstance(actual, str) else json.dumps(actual, ensure_ascii=False)
        return str(arg).lower() in text.lower() if op == "$contains" else re.search(str(arg), text) is not None
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and value_matches(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(value_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return expected == actual


def call_matches(expected: ExpectedCall, call: ToolOutcome) -> bool:
    return (
        expected.name == call.name
        and (expected.ok is None or expected.ok == call.ok)
        and value_matches(expected.arguments, call.arguments)
    )


def _show(name: str, arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return f"{name}({text[:150]}{'…' if len(text) > 150 else ''})"


def _match_any(expected: list[ExpectedCall], calls: list[ToolOutcome]) -> dict[int, int]:
    """Expected index -> call index, one call per expectation (augmenting-path bipartite matching)."""
    owner: dict[int, int] = {}

    def assign(e: int, seen: set[int]) -> bool:
        for c, call in enumerate(calls):
            if c in seen or not call_matches(expected[e], call):
                continue
            seen.add(c)
            if c not in owner or assign(owner[c], seen):
                owner[c] = e
                return True
        return False

    for e in range(len(expected)):
        assign(e, set())
    return {e: c for c, e in owner.items()}


def _miss(exp: ExpectedCall, calls: list[ToolOutcome], used: set[int]) -> Failure:
    """Why an expected call was not matched, at the step of the closest attempt if there was one."""
    near = [c for i, c in enumerate(calls) if c.name == exp.name and i not in used]
    if not near:
        return Failure("tool_calls", f"expected {_show(exp.name, exp.arguments)} was never called")
    c = near[0]
    if exp.ok is not None and c.ok != exp.ok:
        outcome = f"failed ({c.error_kind}: {(c.error or '')[:120]})" if not c.ok else "succeeded"
        return Failure("tool_calls", f"{c.name} {outcome}; expected ok={exp.ok}", c.step)
    return Failure(
        "tool_calls", f"{_show(c.name, c.arguments)} does not match expected arguments {exp.arguments}", c.step
    )


def check_run(
    case: Case, calls: list[ToolOutcome], answer: str | None, stopped: str, workspace: Path
) -> tuple[list[Failure], set[int]]:
    """Failures of one run, and the indexes of calls that were expected to fail (not counted as wrong)."""
    checks = case.checks
    failures: list[Failure] = []
    real = [c for c in calls if c.name != "invalid_tool_call"]
    index = {id(c): i for i, c in enumerate(calls)}
    excused: set[int] = set()
    for c in real:
        if c.name in checks.forbidden_tools:
            failures.append(Failure("forbidden_tools", f"called forbidden tool {_show(c.name, c.arguments)}", c.step))
    if checks.order == "exact":
        for i, exp in enumerate(checks.tool_calls):
            if i >= len(real):
                failures.append(Failure("tool_calls", f"call {i + 1}: expected {_show(exp.name, exp.arguments)}, none"))
                break
            if not call_matches(exp, real[i]):
                got = _show(real[i].name, real[i].arguments) + ("" if real[i].ok else f" [{real[i].error_kind}]")
                failures.append(
                    Failure(
                        "tool_calls",
                        f"call {i + 1}: expected {_show(exp.name, exp.arguments)}, got {got}",
                        real[i].step,
                    )
                )
                break
            if exp.ok is False:
                excused.add(index[id(real[i])])
        else:
            if len(real) > len(checks.tool_calls):
                extra = real[len(checks.tool_calls)]
                failures.append(
                    Failure("tool_calls", f"unexpected extra call {_show(extra.name, extra.arguments)}", extra.step)
                )
    else:
        matched = _match_any(checks.tool_calls, real)
        used = set(matched.values())
        for e, exp in enumerate(checks.tool_calls):
            if e in matched:
                if exp.ok is False:
                    excused.add(index[id(real[matched[e]])])
            else:
                failures.append(_miss(exp, real, used))
    if stopped != "answer":
        failures.append(Failure("stopped", f"the run stopped with {stopped!r} instead of a final answer"))
    text = answer or ""
    for part in checks.answer_contains:
        if part.lower() not in text.lower():
            failures.append(Failure("answer_contains", f"answer lacks {part!r}: {text[:160]!r}"))
    if checks.answer_regex and not re.search(checks.answer_regex, text):
        failures.append(Failure("answer_regex", f"answer does not match /{checks.answer_regex}/: {text[:160]!r}"))
    for fc in checks.files:
        target = workspace / fc.path
        if not fc.exists:
            if target.exists():
                failures.append(Failure("files", f"{fc.path} exists but should not"))
            continue
        if not target.is_file():
            failures.append(Failure("files", f"{fc.path} was not created"))
            continue
        content = target.read_text(encoding="utf-8", errors="replace")
        for part in fc.contains:
            if part not in content:
                failures.append(Failure("files", f"{fc.path} lacks {part!r}: {content[:120]!r}"))
    return failures, excused
