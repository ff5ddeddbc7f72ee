"""Call writers for families rendered by their own GGUF template (`gguf` dialect): DeepSeek and MiniMax.

The `gguf` dialect renders these models' embedded chat templates; what it cannot take from the template
is how a call is written back into the history, parsed and constrained. `DeepSeekCalls` writes DeepSeek
V3.1's `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`
(the parser also reads V3/R1's `function<｜tool▁sep｜>NAME` + fenced JSON); `MiniMaxCalls` writes MiniMax M2's
`<minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke></minimax:tool_call>`.
Neither renders a prompt of its own (`gguf` does) nor decodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_local.calls.parse import ToolCall
from hermes_local.dialects.base import Dialect, dumps
from hermes_local.dialects.qwen3coder import xml_value
from hermes_local.dialects.segs import Out
from hermes_local.prompts import Segments

_BEGIN, _CALL, _SEP, _END, _CLOSE = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
)


class DeepSeekCalls(Dialect):
    """DeepSeek V3.1 tool calls (for the `gguf` dialect)."""

    name = "deepseek"
    call_format = "deepseek"
    call_open = _CALL
    required_prefill = _BEGIN + _CALL

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        out = Out()
        if text:
            out.u(text)
        if calls:
            out.t(_BEGIN)
            for call in calls:
                out.t(_CALL).u(call.name).t(_SEP).u(dumps(call.arguments)).t(_END)
            out.t(_CLOSE)
        return out.done()

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return self.assistant_content(step, "", [call]).text

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar_families import named_json_grammar

        return named_json_grammar(list(tools), f'"{_SEP}"', f'"{_END}"')


class MiniMaxCalls(Dialect):
    """MiniMax M2 tool calls (for the `gguf` dialect)."""

    name = "minimax"
    call_format = "minimax"
    call_open = "<minimax:tool_call>"
    required_prefill = "<minimax:tool_call>"

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        out = Out()
        if text:
            out.u(text + ("\n" if calls else ""))
        if calls:
            out.t("<minimax:tool_call>\n")
            for call in calls:
                out.t('<invoke name="').u(call.name).t('">\n')
                for key, value in call.arguments.items():
                    out.t('<parameter name="').u(key).t('">').u(xml_value(value)).t("</parameter>\n")
                out.t("</invoke>\n")
            out.t("</minimax:tool_call>")
        return out.done()

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return self.assistant_content(step, "", [call]).text

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar_families import xml_call_grammar

        return xml_call_grammar(list(tools), invoke=True)
