"""The `gemma3` dialect: Gemma 3's user/model turns with Google's ```tool_code / ```tool_output recipe.

Gemma 3's official template (google/gemma-3-4b-it `tokenizer_config.json`; tests/data/templates) has no tool
support: it writes `<start_of_turn>user|model\\n` + the content trimmed + `<end_of_turn>\\n`, puts a system
message at the head of the first user turn followed by a blank line, and refuses any role out of
user/model alternation. Tools follow Google's function-calling recipe for Gemma
(https://ai.google.dev/gemma/docs/meme-generator; the full prompt in
https://www.philschmid.de/gemma-function-calling): the instruction to wrap calls in ```tool_code and the
tools as Python `def`s with docstrings, then our rules, form that system text; a call is a
```` ```tool_code\\nNAME(key=value, ...)\\n``` ```` block (one per call, Python literals); a step's results
go back in one *user* turn as ```` ```tool_output\\nJSON\\n``` ```` blocks in call order, each JSON on one
line, so a result cannot start a line of its own and fake a fence or another result; a user message after
results joins that turn, so roles alternate. Rendered in Python, text for text as the official template
renders the same turns with results folded into user messages (golden tests). `<start_of_turn>` and
`<end_of_turn>` are the only framing tokens; everything a user, a tool or a tool definition wrote is
content. Gemma 3 has no thought markers. Reading calls is `calls/families.tool_code` (this file turns a
block it cannot read into an error for the model); does not decode.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hermes_local.calls.families import tool_code
from hermes_local.calls.parse import CALL_EXAMPLE, MAX_ERRORS, ParseResult, ToolCall, parse_tool_calls
from hermes_local.dialects.base import Dialect, Message, ToolDef, dumps
from hermes_local.dialects.hermes import python_type
from hermes_local.dialects.segs import Out, trimmed
from hermes_local.prompts import Segment, Segments

FENCE = "```"
EXAMPLE = '```tool_code\nNAME(key="value")\n```'
INSTRUCTION = (  # the recipe's instruction, its stray "```tool_call" spelled as the calls are
    "At each turn, if you decide to invoke any of the function(s), it should be wrapped with ```tool_code```. "
    "The python methods described below are imported and available, you can only use defined methods. "
    "The generated code should be readable and efficient. The response to a method will be wrapped in "
    "```tool_output``` use it to call more tools or generate a helpful, friendly response. When using a "
    "```tool_code``` think step by step why and how it should be used.\n"
    "Write each call on its own line as NAME(key=value, ...) with keyword arguments and Python literal values.\n\n"
    "The following Python methods are available:\n\n```python\n"
)


def py_literal(value: Any) -> str:
    """`value` as a Python literal that `ast.literal_eval` reads back (strings double-quoted with JSON's escapes, and
    a backtick as `\\u0060`, so no argument can close the call's fence)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(str(k))}: {py_literal(v)}" for k, v in value.items()) + "}"
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False).replace("`", "\\u0060")


def _python_def(out: Out, tool: ToolDef) -> None:
    """One tool as `def NAME(required: type, optional: type = default):` and a docstring with its Args."""
    fn = tool.get("function", tool)
    params: dict[str, Any] = fn["parameters"] if isinstance(fn.get("parameters"), dict) else {}
    props: dict[str, Any] = params["properties"] if isinstance(params.get("properties"), dict) else {}
    required = [p for p in props if p in (params.get("required") or [])]
    ordered = required + [p for p in props if p not in required]  # a Python signature: defaults last
    out.t("def ").u(fn["name"]).t("(")
    for i, name in enumerate(ordered):
        spec = props[name] if isinstance(props[name], dict) else {}
        out.t(", " if i else "").u(name).t(": ").u(python_type(spec))
        if name not in required:
            out.t(" = ").u(py_literal(spec.get("default")))
    out.t('):\n    """').u(str(fn.get("description", "")).strip())
    if not ordered:
        out.t('"""')
        return
    out.t("\n\n    Args:")
    for name in ordered:
        spec = props[name] if isinstance(props[name], dict) else {}
        out.t("\n      ").u(name).t(": ").u(str(spec.get("description", "")).strip())
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            out.u(" One of: " + ", ".join(py_literal(v) for v in spec["enum"]) + ".")
    out.t('\n    """')


def tool_offer(tools: Sequence[ToolDef]) -> list[Segment]:
    """The recipe's instruction and the tools as Python definitions (the head of the system text)."""
    out = Out().t(INSTRUCTION)
    for i, tool in enumerate(tools):
        out.t("\n\n" if i else "")
        _python_def(out, tool)
    return out.t("\n" + FENCE).parts


class Gemma3Dialect(Dialect):
    """Gemma 3: alternating user/model turns, ```tool_code calls, ```tool_output results in user turns."""

    name = "gemma3"
    call_format = "tool_code"
    framing_tokens = ("<start_of_turn>", "<end_of_turn>")
    stop = ("<end_of_turn>", "<eos>", "```tool_output")  # a result the model would write itself is cut
    call_open = "```tool_code"
    required_prefill = "```tool_code"
    description = "Gemma 3: user/model turns, Python tool defs, ```tool_code calls, ```tool_output results"
    thoughts = ()
    keep_thoughts = False

    def render_prompt(self, msgs: list[Message], tools: list[ToolDef], open_turn: bool, prefill: str) -> Segments:
        system = msgs.pop(0)["content"] if msgs and msgs[0]["role"] == "system" else None
        head = Out()
        if tools:
            head.add(tool_offer(tools)).t("\n\n" if system is not None else "")
        if system is not None:
            head.add(system)
        if tools or system is not None:
            head.t("\n\n")  # the template's first_user_prefix: the system text and a blank line
        out = Out()
        for i, (role, content) in enumerate(turns(msgs)):
            out.t(f"<start_of_turn>{role}\n").add(head.parts if i == 0 else ())
            out.add(trimmed(content)).t("<end_of_turn>\n")
        if open_turn:
            out.t("<start_of_turn>model\n" + prefill)
        return out.done()

    def _call(self, out: Out, call: ToolCall) -> None:
        out.t(FENCE + "tool_code\n").u(call.name).t("(")
        for i, (key, value) in enumerate(call.arguments.items()):
            out.t(", " if i else "").u(key).t("=").u(py_literal(value))
        out.t(")\n" + FENCE)

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return self.assistant_content(step, "", [call]).text

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        """The reply's text, then one ```tool_code block per call, each on lines of its own."""
        out = Out()
        if text.strip():
            out.u(text.strip()).t("\n" if calls else "")
        for i, call in enumerate(calls):
            out.t("\n" if i else "")
            self._call(out, call)
        return out.done()

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        """One ```tool_output block per result, in call order: the result's JSON, on one line."""
        out = Out()
        for i, r in enumerate(responses):
            out.t(("\n" if i else "") + FENCE + "tool_output\n").u(dumps(r["content"])).t("\n" + FENCE)
        return out.done()

    def parse(self, text: str, tool_names: Sequence[str] | frozenset[str] | None = None) -> ParseResult:
        text, unreadable = tool_code(text)
        result = parse_tool_calls(text, tool_names, dialect=self.name)
        errors = [_unreadable(block) for block in unreadable]
        errors += [e.replace(CALL_EXAMPLE, f"```tool_code block such as {EXAMPLE}") for e in result.errors]
        if len(errors) > MAX_ERRORS:
            errors = [*errors[: MAX_ERRORS - 1], f"... and {len(errors) - MAX_ERRORS + 1} more unreadable tool calls."]
        result.errors = errors
        return result

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar_families import tool_code_grammar

        return tool_code_grammar(list(tools))


def turns(msgs: Sequence[Message]) -> list[tuple[str, Segments]]:
    """The messages as alternating Gemma turns: `assistant` is `model`, a `tool` turn is `user`, and a turn of
    the same role as the one before joins it after a blank line (results, then a user note: one user turn)."""
    out: list[tuple[str, Segments]] = []
    for m in msgs:
        role = "model" if m["role"] == "assistant" else "user"
        if out and out[-1][0] == role:
            out[-1] = (role, out[-1][1] + Segments.untrusted("\n\n") + m["content"])
        else:
            out.append((role, m["content"]))
    return out


def _unreadable(block: str) -> str:
    shown = block if len(block) <= 200 else block[:200] + "..."
    return (
        f"Your tool call {shown!r} is not a call this runtime can read: write a ```tool_code block holding one "
        f"NAME(key=value, ...) per line, keyword arguments only, with literal values, e.g. {EXAMPLE}"
    )
