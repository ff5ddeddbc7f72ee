"""`@tool`, the `Tool` record, result envelopes and the `ToolRegistry`.

`@tool` turns a typed, docstring-documented function into a tool: a JSON schema for the model and a
pydantic model that validates arguments before the function runs. A parameter annotated
`ToolContext` is injected, never shown to the model. Every outcome is a `ToolResult` envelope
`{"ok", "data" | "error", "error_kind", "summary"}`. This module does not decide approval policy or
run the agent loop; see `tools/execution.py` for how a call is checked and run.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model

Permission = Literal["read", "write", "dangerous"]
ErrorKind = Literal["invalid_arguments", "permission_denied", "timeout", "not_found", "tool_error", "truncated"]


@dataclass
class ToolContext:
    """What a tool may know about the run: its workspace and settings. Injected, never from the model."""

    workspace: Path
    db_path: Path | None = None
    allow_hosts: list[str] = field(default_factory=list)
    output_cap: int = 8000
    timeout: float = 30.0
    extras: dict[str, Any] = field(default_factory=dict)


class ToolFailure(Exception):
    """Raised by a tool to report a failure with a specific kind (e.g. permission_denied)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ToolResult:
    ok: bool
    summary: str
    data: Any = None
    error: str | None = None
    error_kind: ErrorKind | None = None

    @classmethod
    def success(cls, data: Any, summary: str) -> ToolResult:
        return cls(ok=True, data=data, summary=summary)

    @classmethod
    def failure(cls, kind: ErrorKind, error: str, summary: str | None = None) -> ToolResult:
        return cls(ok=False, error=error, error_kind=kind, summary=summary or f"{kind}: {error}")

    def envelope(self) -> dict[str, Any]:
        if self.ok:
            return {"ok": True, "data": self.data, "summary": self.summary}
        return {"ok": False, "error": self.error, "error_kind": self.error_kind, "summary": self.summary}

    def to_json(self) -> str:
        return json.dumps(self.envelope(), ensure_ascii=False, default=str)


@dataclass
class Tool:
    name: str
    description: str
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    permission: Permission = "read"
    timeout: float | None = None
    repeatable: bool = False
    context_param: str | None = None

    def schema(self) -> dict[str, Any]:
        """OpenAI/Hermes function signature shown to the model inside <tools>."""
        params = self.arguments_model.model_json_schema()
        # Validation rejects extra keys anyway; titles and additionalProperties only cost prompt tokens.
        params.pop("title", None)
        params.pop("additionalProperties", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def parameters_schema(self) -> dict[str, Any]:
        return self.schema()["function"]["parameters"]


_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Description (text before Args:) and per-argument descriptions from a Google-style docstring."""
    doc = inspect.cleandoc(doc or "")
    description_lines: list[str] = []
    arg_docs: dict[str, str] = {}
    section = "description"
    current: str | None = None
    arg_indent: int | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            section = "args"
            continue
        if stripped.lower() in ("returns:", "raises:", "examples:"):
            section = "other"
            continue
        if section == "description":
            description_lines.append(stripped)
        elif section == "args" and stripped:
            indent = len(line) - len(line.lstrip())
            m = _ARG_LINE.match(line)
            if m and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = m.group(1)
                arg_docs[current] = m.group(2).strip()
            elif current:
                arg_docs[current] += " " + stripped
    description = " ".join(" ".join(description_lines).split())
    return description, arg_docs


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    permission: Permission = "read",
    timeout: float | None = None,
    repeatable: bool = False,
) -> Any:
    """Decorator: `@tool` or `@tool(permission="write", timeout=10)`. Returns the `Tool`."""

    def wrap(fn: Callable[..., Any]) -> Tool:
        from pydantic import Field

        description, arg_docs = _parse_docstring(fn.__doc__ or "")
        hints = typing.get_type_hints(fn, include_extras=True)  # keeps Annotated[str, Field(max_length=...)]
        fields: dict[str, Any] = {}
        context_param = None
        for pname, param in inspect.signature(fn).parameters.items():
            annotation = hints.get(pname, str)
            if annotation is ToolContext:
                context_param = pname
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        model = create_model(  # type: ignore[call-overload]
            f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        return Tool(
            name=name or fn.__name__,
            description=description or fn.__name__,
            function=fn,
            arguments_model=model,
            permission=permission,
            timeout=timeout,
            repeatable=repeatable,
            context_param=context_param,
        )

    return wrap(function) if function is not None else wrap


class ToolRegistry:
    """The tools offered to the model in one run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, t: Tool) -> None:
        if not isinstance(t, Tool):
            raise TypeError(f"{t!r} is not a Tool; decorate the function with @tool")
        self._tools[t.name] = t

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]
