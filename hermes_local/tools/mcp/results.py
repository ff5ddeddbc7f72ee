"""MCP tool descriptions and results in hermes-local's terms: schemas, permissions, validation, envelopes.

`to_tool_result` turns a `CallToolResult` into a `ToolResult`: text blocks joined, structured content
kept (not repeated when the text is just its JSON), images, audio and resources described in words
rather than dropped or pasted as base64, `isError` as a `tool_error`. `permission_for` reads a tool's
annotations (open-world or destructive -> dangerous, read-only -> read, otherwise write), which may raise
its permission but never lower it below the server's floor: its `permission` setting, else `write`, or
`read` for a server marked `trusted = true` (a lying readOnlyHint cannot skip approval). `open_world`: a
tool not marked `openWorldHint: false` (MCP's default is open) needs a fresh approval after untrusted content.
`arguments_model` validates the model's arguments against the server's JSON schema before any call.
Does not talk to servers (see `manager.py`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from hermes_local.config import McpServerConfig
from hermes_local.outcome import ToolResult
from hermes_local.tools.registry import Permission

_RANK: dict[Permission, int] = {"read": 0, "write": 1, "dangerous": 2}


def permission_for(annotations: Any, server: McpServerConfig | None = None) -> Permission:
    """dangerous if openWorldHint or destructiveHint, read if readOnlyHint, otherwise write; never below the
    floor of `server` (its `permission`, else `read` when `trusted`, else `write`)."""
    floor: Permission = (server.permission or ("read" if server.trusted else "write")) if server else "write"
    if annotations is None:
        hinted: Permission = "write"
    elif annotations.open_world_hint or annotations.destructive_hint:
        hinted = "dangerous"
    elif annotations.read_only_hint:
        hinted = "read"
    else:
        hinted = "write"
    return max(hinted, floor, key=_RANK.__getitem__)


def open_world(annotations: Any) -> bool:
    """Whether the tool may reach outside (MCP's `openWorldHint`, true unless the server says false)."""
    return annotations is None or annotations.open_world_hint is not False


def clean_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The input schema as offered to the model: titles and `$schema` dropped (prompt tokens), an object."""
    out = dict(schema or {})
    for key in ("title", "$schema"):
        out.pop(key, None)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    props = {}
    for name, prop in out["properties"].items():
        props[name] = {k: v for k, v in prop.items() if k != "title"} if isinstance(prop, dict) else prop
    out["properties"] = props
    return out


def arguments_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that accepts exactly what `schema` accepts (checked with jsonschema) and dumps it back.

    The check resolves local refs only and bounds pattern matching in time (`tools/schemas.bounded_validator`);
    `tools/schemas.check_schema` has refused the schemas it could not apply safely.
    """
    from hermes_local.tools.schemas import bounded_validator, validation_errors

    validator = bounded_validator(schema)

    class Arguments(BaseModel):
        """A server tool's arguments: checked against its JSON schema, passed through as given."""

        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            if not isinstance(data, dict):
                raise ValueError("arguments must be a JSON object")
            errors = validation_errors(validator, data)
            if errors:
                first = errors[0]
                where = ".".join(str(p) for p in first.path) or "arguments"
                raise ValueError(f"{where}: {first.message}")
            return data

    Arguments.__name__ = Arguments.__qualname__ = f"{name}_arguments"
    return Arguments


def describe_block(block: Any) -> str:
    """Text for one content block; binary content is described, never inlined."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4
        return f"[{kind} {block.mime_type}, about {size} bytes, not shown]"
    if kind == "resource":
        res = block.resource
        mime = f" {res.mime_type}" if res.mime_type else ""
        if getattr(res, "text", None) is not None:
            return f"[resource {res.uri}{mime}]\n{res.text}"
        size = len(getattr(res, "blob", "") or "") * 3 // 4
        return f"[resource {res.uri}{mime}, about {size} bytes of binary data, not shown]"
    if kind == "resource_link":
        parts = [f"[resource link {block.name}: {block.uri}"]
        if block.mime_type:
            parts.append(f" ({block.mime_type})")
        if block.description:
            parts.append(f" - {block.description}")
        return "".join(parts) + "]"
    return f"[{kind or 'unknown'} content, not shown]"


def to_tool_result(name: str, result: Any) -> ToolResult:
    """Our envelope for a `CallToolResult`."""
    text = "\n".join(describe_block(b) for b in result.content or [])
    structured = result.structured_content
    if result.is_error:
        return ToolResult.failure("tool_error", f"{name} reported an error: {text or 'no details'}")
    if isinstance(structured, dict) and set(structured) == {"result"}:
        structured = structured["result"]  # a plain return value the server wrapped
    if structured is not None:
        data: Any = structured if not text or _same(text, structured) else {"text": text, "structured": structured}
    else:
        data = text
    shown = text if text else json.dumps(structured, ensure_ascii=False, default=str)
    shown = " ".join(shown.split())
    return ToolResult.success(data, f"{name} -> {shown[:120]}{'…' if len(shown) > 120 else ''}")


def _same(text: str, value: Any) -> bool:
    """Whether `text` is just `value` written out (as JSON, or the string itself)."""
    if text == value:
        return True
    try:
        return json.loads(text) == value
    except (json.JSONDecodeError, TypeError):
        return False
