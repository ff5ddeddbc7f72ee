"""The `hermes` dialect: Hermes 2 Pro / Hermes 3 as NousResearch trained them (ChatML + `<tool_call>`).

The tool block is the official tool_use template's system turn, unchanged; tool descriptions take
the trained shape `name(arg: type, ...) - description` plus an `Args:` block with one line per
argument (the official template runs the argument lines together; one per line is what the model
cards show). hermes-local's rules and the user's instructions follow in a second system turn. Calls are
written `{"name": ..., "arguments": ...}` as the prompt's example shows; results go back in a `tool`
turn as `<tool_response>{"name": ..., "content": ...}</tool_response>`. Thoughts are Hermes 2 Pro's
`<|startofthought|>...<|endofthought|>` (its answer framed by `<|startofresponse|>...<|endofresponse|>`,
which the parser drops) or `<think>...</think>` (Hermes 3/4-style reasoning); the templates write the
content verbatim, so past thoughts stay in the history. Does not parse or decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_local.calls.thoughts import HERMES_THOUGHT, THINK
from hermes_local.dialects.base import ChatMLDialect, dumps

_PY_TYPES = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"}


def python_type(spec: dict[str, Any]) -> str:
    """The template's `json_to_python_type`, with arrays and unions spelled out."""
    kind = spec.get("type")
    if isinstance(kind, str) and kind in _PY_TYPES:
        return _PY_TYPES[kind]
    if kind == "array":
        return f"list[{python_type(spec.get('items') or {})}]"
    if kind == "object":
        extra = spec.get("additionalProperties")
        return f"dict[str, {python_type(extra)}]" if isinstance(extra, dict) else "dict"
    if isinstance(kind, list):
        return "Union[" + ",".join(python_type({"type": k}) for k in kind) + "]"
    alternatives = spec.get("anyOf") or spec.get("oneOf")
    if alternatives:
        types = [python_type(a) for a in alternatives if a.get("type") != "null"]
        return types[0] if len(types) == 1 else "Union[" + ",".join(types) + "]"
    return "Any"


def describe_tool(function: dict[str, Any]) -> str:
    """`name(a: str, b: int) - description` + `Args:` lines, as the Hermes tool_use template writes it."""
    props: dict[str, Any] = function.get("parameters", {}).get("properties", {})
    signature = ", ".join(f"{name}: {python_type(spec)}" for name, spec in props.items())
    text = f"{function['name']}({signature}) - {function.get('description', '')}\n\n"
    args = [
        f"        {name}({python_type(spec)}): {str(spec.get('description', '')).strip()}"
        for name, spec in props.items()
    ]
    if args:
        text += "    Args:\n" + "\n".join(args)
    return text


def tool_entry(schema: dict[str, Any]) -> str:
    """One line of the `<tools>` block: the function with its description in the trained shape."""
    fn = schema.get("function", schema)
    params = fn.get("parameters", {})
    shown = dumps(params) if params.get("properties") else "{}"
    return (
        f'{{"type": "function", "function": {{"name": "{fn["name"]}", "description": "{describe_tool(fn)}", '
        f'"parameters": {shown}}}'
    )  # one closing brace for two opened: the official template's, kept byte for byte


class HermesDialect(ChatMLDialect):
    """ChatML with the Hermes tool_use system block."""

    name = "hermes"
    template = "hermes.jinja"
    description = "Hermes 2 Pro / Hermes 3: ChatML, <tools>, <tool_call>, tool turns with <tool_response>"
    thoughts = (HERMES_THOUGHT, THINK)

    def offer(self, tools: Sequence[dict[str, Any]]) -> Any:
        return "\n".join(tool_entry(t) for t in tools)
