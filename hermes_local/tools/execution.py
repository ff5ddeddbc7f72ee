"""Run one validated tool call: look up, validate, approve, execute with a timeout, cap the output.

Every path ends in a `ToolResult` envelope; model mistakes (unknown tool, bad arguments) and tool
failures become error results the model can act on. Repeated identical write calls in one run
return the first result instead of running twice. Does not parse model output or talk to the LLM.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from hermes_local.tools.approval import Approver
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, ToolRegistry, ToolResult


@dataclass
class Executor:
    registry: ToolRegistry
    context: ToolContext
    approver: Approver = field(default_factory=lambda: Approver(interactive=False))
    _done_writes: dict[str, ToolResult] = field(default_factory=dict)
    last_approval: str = ""

    def execute(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        self.last_approval = ""
        t = self.registry.get(name)
        if t is None:
            known = ", ".join(self.registry.names()) or "none"
            return ToolResult.failure("not_found", f"There is no tool named {name!r}. Available tools: {known}.")
        try:
            validated = t.arguments_model.model_validate(arguments)
        except ValidationError as exc:
            return ToolResult.failure("invalid_arguments", _validation_message(t, exc))
        args = validated.model_dump()
        approved, how = self.approver.decide(t, args)
        self.last_approval = how
        if not approved:
            reason = {
                "no_terminal": "no terminal to ask the user and no --yes/--allow flag was given",
                "denied_by_policy": "the user's policy denies this tool",
                "user": "the user said no",
            }.get(how, how)
            return ToolResult.failure(
                "permission_denied",
                f"{t.name} was not approved ({reason}). Tell the user what you wanted to do "
                f"and that they can approve it with --allow {t.name} or --yes.",
            )
        key = t.name + json.dumps(args, sort_keys=True, default=str)
        if t.permission != "read" and not t.repeatable and key in self._done_writes:
            first = self._done_writes[key]
            return ToolResult(
                ok=first.ok,
                data=first.data,
                error=first.error,
                error_kind=first.error_kind,
                summary=f"(already done earlier in this run; not repeated) {first.summary}",
            )
        result = self._run(t, args)
        result = cap_result(result, self.context.output_cap)
        if t.permission != "read":
            self._done_writes[key] = result
        return result

    def _run(self, t: Tool, args: dict[str, Any]) -> ToolResult:
        kwargs = dict(args)
        if t.context_param:
            kwargs[t.context_param] = self.context
        timeout = t.timeout or self.context.timeout
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = t.function(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - reported to the model as tool_error
                outcome["error"] = exc

        worker = threading.Thread(target=target, name=f"tool-{t.name}", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            return ToolResult.failure("timeout", f"{t.name} did not finish within {timeout:g} s and was abandoned.")
        if "error" in outcome:
            exc = outcome["error"]
            if isinstance(exc, ToolFailure):
                return ToolResult.failure(exc.kind, str(exc))
            return ToolResult.failure("tool_error", f"{type(exc).__name__}: {exc}")
        value = outcome.get("value")
        if isinstance(value, ToolResult):
            return value
        return ToolResult.success(value, _summarize(t.name, value))


def _summarize(name: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(str(text).split())
    return f"{name} -> {text[:120]}{'…' if len(text) > 120 else ''}"


def _validation_message(t: Tool, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    expected = json.dumps(t.parameters_schema().get("properties", {}), ensure_ascii=False)
    return f"Invalid arguments for {t.name}: {'; '.join(problems)}. Expected properties: {expected}"


def cap_result(result: ToolResult, cap: int) -> ToolResult:
    """Cut data longer than `cap` characters to a head and a tail, saying so in the summary."""
    if not result.ok or result.data is None:
        return result
    text = result.data if isinstance(result.data, str) else json.dumps(result.data, ensure_ascii=False, default=str)
    if len(text) <= cap:
        return result
    head = text[: cap * 2 // 3]
    tail = text[-(cap // 3) :]
    omitted = len(text) - len(head) - len(tail)
    cut = f"{head}\n[... {omitted} characters truncated ...]\n{tail}"
    return ToolResult(
        ok=True,
        data=cut,
        summary=f"{result.summary} (output truncated: {len(text)} characters, showing head and tail)",
    )
