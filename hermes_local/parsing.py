"""Tool-call extraction from model output: `parse_tool_calls(text, tool_names=None)`.

Finds `<tool_call>{json}</tool_call>` blocks and returns the calls, the text left for the user,
and one error per block that could not be read (worded for the model). Never executes anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CALL_EXAMPLE = '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>'
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_LEFTOVERS = re.compile(r"<\|im_end\|>|<\|im_start\|>|<\|endoftext\|>|</s>")


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class ParseResult:
    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""
    errors: list[str] = field(default_factory=list)


def parse_tool_calls(text: str, tool_names: Iterable[str] | None = None) -> ParseResult:
    result = ParseResult()
    for m in _BLOCK.finditer(text):
        body = m.group(1).strip()
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            result.errors.append(
                f"Your tool call was not valid JSON: {exc.msg} at character {exc.pos}; "
                f"reply with exactly one {CALL_EXAMPLE}"
            )
            continue
        name = obj.get("name") if isinstance(obj, dict) else None
        arguments = obj.get("arguments", {}) if isinstance(obj, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            result.errors.append(f'Your tool call needs "name" (a string) and "arguments" (an object): {CALL_EXAMPLE}')
            continue
        result.calls.append(ToolCall(name=name, arguments=arguments or {}))
    remaining = _BLOCK.sub("", text)
    result.text = _LEFTOVERS.sub("", remaining).strip()
    return result
