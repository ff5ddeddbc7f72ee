"""The `qwen3-coder` dialect: Qwen3-Coder's ChatML with an XML tool block and XML calls.

Rendered in Python, text for text as the official template (llama.cpp `models/templates/Qwen3-Coder.jinja`):
the system turn is ours followed by `# Tools` with one `<function>` block per tool (`<name>`,
`<description>`, `<parameters>` with one `<parameter>` per property and any other schema keys as
`<key>value</key>`), then the trained format reminder. Calls are written and read as
`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>`
(an object or list value as JSON, anything else as text); results go back inside a *user* turn as
`<tool_response>` blocks. Values come back as text: the tool's schema validation converts them (as
llama.cpp does). The grammar constrains names and keys; a value may hold `<` but not `</`. Does not
parse (the shared parser reads `<function=...>`) or decode.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hermes_local.calls.parse import ToolCall
from hermes_local.dialects.base import ChatMLDialect, Message, ToolDef, dumps
from hermes_local.dialects.segs import Out
from hermes_local.prompts import Segment, Segments

DEFAULT_SYSTEM = "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."
REMINDER = (
    "\n\nIf you choose to call a tool ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: the tool calling block MUST begin with an opening "
    "<tool_call> tag and end with a closing </tool_call> tag.\n- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, "
    "but NOT after\n- If there is no function call available, answer the question like normal with your current "
    "knowledge and do not tell the user about function calls\n</IMPORTANT>"
)


def jinja_text(value: Any) -> str:
    """A value as Jinja's `| string` writes it (Python's str: True, None, ['a'])."""
    return value if isinstance(value, str) else str(value)


def xml_value(value: Any) -> str:
    """A mapping or list as JSON (`tojson`), anything else as text: the template's rule for values."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list, tuple)) else jinja_text(value)


def _extra_keys(out: Out, fields: Any, handled: Sequence[str]) -> None:
    if not isinstance(fields, dict):
        return
    for key, value in fields.items():
        if key not in handled:
            out.t("\n<").u(key).t(">").u(xml_value(value)).t("</").u(key).t(">")


def tool_block(out: Out, tools: Sequence[ToolDef]) -> None:
    """The `# Tools` section (after the system text) as the official template writes it."""
    out.t("\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>")
    for tool in tools:
        fn = tool.get("function", tool)
        out.t("\n<function>\n<name>").u(fn["name"]).t("</name>")
        if "description" in fn:
            out.t("\n<description>").u(jinja_text(fn["description"]).strip()).t("</description>")
        out.t("\n<parameters>")
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, dict) else None
        for name, spec in (props or {}).items() if isinstance(props, dict) else ():
            out.t("\n<parameter>\n<name>").u(name).t("</name>")
            if "type" in spec:
                out.t("\n<type>").u(jinja_text(spec["type"])).t("</type>")
            if "description" in spec:
                out.t("\n<description>").u(jinja_text(spec["description"]).strip()).t("</description>")
            _extra_keys(out, spec, ("name", "type", "description"))
            out.t("\n</parameter>")
        _extra_keys(out, params, ("type", "properties"))
        out.t("\n</parameters>")
        _extra_keys(out, fn, ("type", "name", "description", "parameters"))
        out.t("\n</function>")
    out.t("\n</tools>").t(REMINDER)


class Qwen3CoderDialect(ChatMLDialect):
    """Qwen3-Coder: ChatML, an XML tool block, `<function=...>` calls, results in user turns."""

    name = "qwen3-coder"
    call_format = "qwen3-coder"
    roles = {"tool": "user"}
    description = "Qwen3-Coder: ChatML, XML <tools> block, <tool_call><function=NAME><parameter=K> calls"
    required_prefill = "<tool_call>"

    def render_prompt(self, msgs: list[Message], tools: list[ToolDef], open_turn: bool, prefill: str) -> Segments:
        out = Out()
        system = msgs.pop(0)["content"] if msgs and msgs[0]["role"] == "system" else None
        if system is not None:
            out.t("<|im_start|>system\n").add(system)
        elif tools:
            out.t("<|im_start|>system\n" + DEFAULT_SYSTEM)
        if tools:
            tool_block(out, tools)
        if system is not None or tools:
            out.t("<|im_end|>\n")
        for m in msgs:
            out.t(f"<|im_start|>{self.roles.get(m['role'], m['role'])}\n").add(m["content"]).t("<|im_end|>\n")
        if open_turn:
            out.t("<|im_start|>assistant\n" + prefill)
        return out.done()

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return "".join(seg.text for seg in self._call(call))

    def _call(self, call: ToolCall) -> list[Segment]:
        out = Out().t("<tool_call>\n<function=").u(call.name).t(">\n")
        for key, value in call.arguments.items():
            out.t("<parameter=").u(key).t(">\n").u(xml_value(value)).t("\n</parameter>\n")
        return out.t("</function>\n</tool_call>").parts

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        """Text, a blank line, then the calls, as the template writes an assistant turn with tool_calls."""
        out = Out()
        if text.strip():
            out.u(text.strip() + ("\n\n" if calls else ""))
        for i, call in enumerate(calls):
            out.t("\n" if i else "").add(self._call(call))
        return out.done()

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        out = Out()
        for r in responses:
            out.t("<tool_response>\n").u(dumps(r)).t("\n</tool_response>\n")
        return out.done()

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar_families import xml_call_grammar

        return xml_call_grammar(list(tools))
