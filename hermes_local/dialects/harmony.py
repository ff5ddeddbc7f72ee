"""The `harmony` dialect: gpt-oss's channels, a TypeScript tool namespace, `to=functions.NAME` calls.

Rendered in Python, text for text as the official template (llama.cpp `models/templates/openai-gpt-oss-120b.jinja`):
a `system` message (identity, knowledge cutoff, the date the dialect was made, `Reasoning: medium`,
the valid channels), a `developer` message with our rules under `# Instructions` and the tools as
`namespace functions { type NAME = (_: {...}) => any; }`. A call is
`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{args}<|call|>`, a result
`<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>{json}<|end|>`, an answer goes to the
`final` channel. Prose written with calls goes to the `analysis` channel and is dropped once a final
answer follows, as the template does; several calls in one reply each get their own message (the
template renders only the first). The model's `analysis` channel is a thought: a call inside it is
rehearsed, never run (`calls/families.py` reads the channels). Does not decode.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any

from hermes_local.calls.parse import ParseResult, ToolCall
from hermes_local.calls.thoughts import HARMONY_THOUGHT
from hermes_local.dialects.base import Dialect, Message, ToolDef, dumps
from hermes_local.dialects.segs import Out
from hermes_local.prompts import Segments

IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
_TS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}
_ANALYSIS_END = "<|end|>"


def ts_type(spec: dict[str, Any]) -> str:
    """The template's `render_typescript_type` for the schema shapes tools use."""
    kind = spec.get("type")
    null = " | null" if spec.get("nullable") else ""
    if kind == "array":
        items = spec.get("items")
        if not items:
            return "any[]" + null
        if items.get("type") in _TS:
            return _TS[items["type"]] + "[]" + null
        inner = ts_type(items)
        return ("any[]" if inner == "object | object" or len(inner) > 50 else inner + "[]") + null
    if isinstance(kind, list) and kind:
        return " | ".join(str(k) for k in kind)
    if kind == "string":
        if spec.get("enum"):
            return '"' + '" | "'.join(str(e) for e in spec["enum"]) + '"'
        return "string" + null
    if kind in _TS:
        return _TS[kind]
    if kind == "object":
        props = spec.get("properties")
        if not props:
            return "object"
        required = spec.get("required") or []
        fields = [
            f"{n}{'' if n in required else '?'}: \n                {ts_type(s)}" for n, s in props.items()
        ]  # the template's own whitespace before a nested type
        return "{\n" + ", ".join(fields) + "}"
    return "any"


def namespace(out: Out, tools: Sequence[ToolDef]) -> None:
    """`## functions` and the TypeScript namespace of the tools."""
    out.t("## functions\n\nnamespace functions {\n\n")
    for tool in tools:
        fn = tool.get("function", tool)
        out.t("// ").u(str(fn.get("description", ""))).t("\ntype ").u(fn["name"]).t(" = ")
        params = fn.get("parameters") or {}
        props = params.get("properties")
        if not props:
            out.t("() => any;\n\n")
            continue
        out.t("(_: {\n")
        required = params.get("required") or []
        for name, spec in props.items():
            if spec.get("description"):
                out.t("// ").u(str(spec["description"])).t("\n")
            out.u(name).t("" if name in required else "?").t(": ").u(ts_type(spec))
            if "default" in spec:
                out.t(", // default: ").u(json.dumps(spec["default"], ensure_ascii=False))
            out.t(",\n")
        out.t("}) => any;\n\n")
    out.t("} // namespace functions")


class HarmonyDialect(Dialect):
    """gpt-oss's harmony format."""

    name = "harmony"
    call_format = "harmony"
    framing_tokens = ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|call|>", "<|return|>")
    stop = ("<|call|>", "<|return|>")
    call_open = " to=functions."
    required_prefill = "<|channel|>commentary to=functions."
    description = "gpt-oss (harmony): channels analysis/commentary/final, to=functions.NAME calls"
    thoughts = (HARMONY_THOUGHT,)
    keep_thoughts = False  # the template drops past analysis
    user_joins = ("user",)

    def __init__(self, date: str | None = None, reasoning: str = "medium") -> None:
        self.date = date or datetime.date.today().isoformat()  # fixed for the dialect's life: a stable prefix
        self.reasoning = reasoning

    def render_prompt(self, msgs: list[Message], tools: list[ToolDef], open_turn: bool, prefill: str) -> Segments:
        out = Out().t(f"<|start|>system<|message|>{IDENTITY}\nKnowledge cutoff: 2024-06\nCurrent date: {self.date}")
        out.t(f"\n\nReasoning: {self.reasoning}\n\n# Valid channels: analysis, commentary, final. ")
        out.t("Channel must be included for every message.")
        out.t("\nCalls to these tools must go to the commentary channel: 'functions'." if tools else "").t("<|end|>")
        developer = msgs.pop(0)["content"] if msgs and msgs[0]["role"] == "system" else None
        if developer or tools:
            out.t("<|start|>developer<|message|>")
            if developer:
                out.t("# Instructions\n\n").add(developer).t("\n\n")
            if tools:
                out.t("# Tools\n\n")
                namespace(out, tools)
            out.t("<|end|>")
        for i, m in enumerate(msgs):
            content: Segments = m["content"]
            if m["role"] == "assistant":
                final_later = any(n["role"] == "assistant" and not _has_calls(n["content"]) for n in msgs[i + 1 :])
                if final_later and content and content[0].text == "<|channel|>analysis<|message|>":
                    cut = next(k for k, seg in enumerate(content) if seg.text == _ANALYSIS_END)
                    content = Segments(content[cut + 1 :])
                out.t("" if content and content[0].text.startswith("<|start|>") else "<|start|>assistant")
                out.add(content)
            elif m["role"] == "tool":
                out.add(content)
            else:
                out.t(f"<|start|>{m['role']}<|message|>").add(content).t("<|end|>")
        if open_turn:
            out.t("<|start|>assistant" + prefill)
        return out.done()

    def _call(self, out: Out, call: ToolCall) -> None:
        out.t("<|start|>assistant to=functions.").u(call.name).t("<|channel|>commentary json<|message|>")
        out.u(dumps(call.arguments)).t("<|call|>")

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        out = Out()
        self._call(out, call)
        return "".join(seg.text for seg in out.parts)

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        """The reply after `<|start|>assistant`: prose to `analysis` (with calls) or `final` (without)."""
        out = Out()
        if not calls:
            return out.t("<|channel|>final<|message|>").u(text).t("<|end|>").done()
        if text:
            out.t("<|channel|>analysis<|message|>").u(text).t(_ANALYSIS_END)
        for call in calls:
            self._call(out, call)
        return out.done()

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        out = Out()
        for r in responses:
            out.t("<|start|>functions.").u(str(r["name"])).t(" to=assistant<|channel|>commentary<|message|>")
            out.u(dumps(r["content"])).t("<|end|>")
        return out.done()

    def parse(self, text: str, tool_names: Sequence[str] | frozenset[str] | None = None) -> ParseResult:
        from hermes_local.calls.parse import parse_tool_calls

        result = parse_tool_calls(text, tool_names, dialect=self.name)
        names = set(tool_names or ())
        for call in result.calls:  # `to=functions.shelljson<|message|>`: "json" glued to the name (llama.cpp #15158)
            if call.name not in names and call.name.endswith("json") and call.name[:-4] in names:
                call.name = call.name[:-4]
        return result

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar_families import named_json_grammar

        between = '" "? ( "<|channel|>commentary" " "? )? "<|constrain|>"? "json"? "<|message|>"'
        return named_json_grammar(list(tools), between)


def _has_calls(content: Segments) -> bool:
    return any(seg.trusted and "to=functions." in seg.text for seg in content)
