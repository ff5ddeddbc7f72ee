"""The `llama3` dialect: Llama 3.1 / 3.2 / 3.3 JSON tool calling (header ids, `ipython` results).

Framing is `<|start_header_id|>ROLE<|end_header_id|>\\n\\n...<|eot_id|>`; the tools go into the first
user turn (the template's default `tools_in_user_message`) with the official instruction; calls are
bare JSON `{"name": ..., "parameters": {...}}` and results come back in `ipython` turns (one per
result). The date line is the template's default, so the prefix stays byte-stable across days. The
parser entry also reads `<function=N>{...}</function>` and `<|python_tag|>N.call(k="v")`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_local.calls.parse import ToolCall
from hermes_local.dialects.base import Dialect, dumps
from hermes_local.prompts import Segment, Segments

DATE_STRING = "26 Jul 2024"
_NEXT_RESULT = "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n"


class Llama3Dialect(Dialect):
    """Meta's Llama 3.x format with JSON custom tools."""

    name = "llama3"
    template = "llama3.jinja"
    framing_tokens = ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")
    stop = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|start_header_id|>")
    call_format = "llama3"
    call_open = None
    required_prefill = ""
    roles = {"tool": "ipython"}
    description = "Llama 3.1-3.3: header ids, tools in the first user turn, JSON calls with parameters, ipython"

    def offer(self, tools: Sequence[dict[str, Any]]) -> Any:
        return "".join(dumps(t, indent=4) + "\n\n" for t in tools)

    def context(self) -> dict[str, Any]:
        return {"date_string": DATE_STRING}

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return dumps({"name": call.name, "parameters": call.arguments})

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        parts = ([text] if text else []) + [self.call_text(c, step, i) for i, c in enumerate(calls)]
        return Segments.untrusted("\n".join(parts))

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        segs: list[Segment] = []
        for i, r in enumerate(responses):
            if i:
                segs.append(Segment(_NEXT_RESULT, True))
            segs.append(Segment(dumps(r["content"]), False))
        return Segments(segs)

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar import json_call_grammar

        return json_call_grammar(list(tools), args_key="parameters")
