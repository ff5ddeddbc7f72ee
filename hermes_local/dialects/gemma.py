"""The `gemma4` dialect: Gemma 4's turns, tool declarations, `<|tool_call>` calls and in-turn results.

Rendered in Python, text for text as the official template (llama.cpp
`models/templates/google-gemma-4-31B-it.jinja`, thinking off): `<|turn>system\\n` holds our rules and
one `<|tool>declaration:NAME{...}<tool|>` per tool in Gemma's object syntax (bare keys, strings between
`<|"|>` tokens, types upper-cased); calls are `<|tool_call>call:NAME{key:value,...}<tool_call|>` (keys
sorted); results follow the calls *inside the same model turn* as
`<|tool_response>response:NAME{value:<|"|>JSON<|"|>}<tool_response|>`, and the model continues that turn (no new
generation prompt after results). An open turn on a user message is `<|turn>model\\n` with the empty
thought `<|channel>thought\\n<channel|>`. One documented difference: a reply's prose written with calls
stays before them (the template would move it after the results). `<|"|>` is framing; every string in
it is content. Does not parse (`calls/families.py` reads Gemma's syntax) or decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_local.calls.parse import ToolCall
from hermes_local.calls.thoughts import GEMMA_THOUGHT
from hermes_local.dialects.base import Dialect, Message, ToolDef, dumps
from hermes_local.dialects.segs import Out, trimmed
from hermes_local.prompts import Segments

Q = '<|"|>'
_STANDARD = ("description", "type", "properties", "required", "nullable")


def _sorted(mapping: dict[str, Any]) -> list[tuple[str, Any]]:
    """Jinja's `dictsort`: by key, case-insensitively."""
    return sorted(mapping.items(), key=lambda kv: kv[0].lower() if isinstance(kv[0], str) else kv[0])


def _upper(value: Any) -> str:
    return "" if value is None else str(value).upper()


def argument(out: Out, value: Any, escape_keys: bool = True) -> None:
    """The template's `format_argument`: strings between `<|"|>`, objects with sorted keys."""
    if isinstance(value, str):
        out.t(Q).u(value).t(Q)
    elif isinstance(value, bool):
        out.t("true" if value else "false")
    elif isinstance(value, dict):
        out.t("{")
        for i, (key, item) in enumerate(_sorted(value)):
            out.t("," if i else "")
            out.t(Q).u(key).t(Q) if escape_keys else out.u(key)
            out.t(":")
            argument(out, item, escape_keys)
        out.t("}")
    elif isinstance(value, (list, tuple)):
        out.t("[")
        for i, item in enumerate(value):
            out.t("," if i else "")
            argument(out, item, escape_keys)
        out.t("]")
    else:
        out.u(str(value))


def _quoted_list(out: Out, items: Any) -> None:
    out.t("required:[")
    for i, item in enumerate(items or []):
        out.t("," if i else "").t(Q).u(str(item)).t(Q)
    out.t("]")


def parameters(out: Out, properties: dict[str, Any]) -> None:
    """The template's `format_parameters` over one `properties` mapping."""
    first = True
    for key, value in _sorted(properties):
        if key in _STANDARD or not isinstance(value, dict):
            continue
        out.t("" if first else ",")
        first = False
        out.u(key).t(":{")
        comma = False

        def sep() -> None:
            nonlocal comma
            out.t("," if comma else "")
            comma = True

        if value.get("description"):
            out.t("description:" + Q).u(str(value["description"])).t(Q)
            comma = True
        kind = _upper(value.get("type"))
        if kind == "STRING" and value.get("enum"):
            sep()
            out.t("enum:")
            argument(out, value["enum"])
        elif kind == "ARRAY" and isinstance(value.get("items"), dict) and value["items"]:
            sep()
            _items(out, value["items"])
        if value.get("nullable"):
            sep()
            out.t("nullable:true")
        if kind == "OBJECT":
            inner = value.get("properties")
            sep()
            out.t("properties:{")
            parameters(out, inner if isinstance(inner, dict) else value)
            out.t("}")
            if value.get("required"):
                sep()
                _quoted_list(out, value["required"])
        sep()
        out.t("type:" + Q).u(kind).t(Q + "}")


def _items(out: Out, items: dict[str, Any]) -> None:
    out.t("items:{")
    first = True
    for key, value in _sorted(items):
        if value is None:
            continue
        out.t("" if first else ",")
        first = False
        if key == "properties":
            out.t("properties:{")
            parameters(out, value) if isinstance(value, dict) else None
            out.t("}")
        elif key == "required":
            _quoted_list(out, value)
        elif key == "type":
            out.t("type:")
            argument(out, _upper(value) if isinstance(value, str) else [_upper(v) for v in value])
        else:
            out.u(key).t(":")
            argument(out, value)
    out.t("}")


def declaration(out: Out, tool: ToolDef) -> None:
    """`<|tool>declaration:NAME{description:...,parameters:{...}}<tool|>` for one tool."""
    fn = tool.get("function", tool)
    out.t("<|tool>declaration:").u(fn["name"]).t("{description:" + Q).u(str(fn.get("description", ""))).t(Q)
    params = fn.get("parameters")
    if params:
        out.t(",parameters:{")
        if params.get("properties"):
            out.t("properties:{")
            parameters(out, params["properties"])
            out.t("},")
        if params.get("required"):
            _quoted_list(out, params["required"])
            out.t(",")
        if params.get("type"):
            out.t("type:" + Q).u(_upper(params["type"])).t(Q + "}")
    out.t("}<tool|>")


class Gemma4Dialect(Dialect):
    """Gemma 4: `<|turn>` framing, declarations, `<|tool_call>` calls, results inside the model turn."""

    name = "gemma4"
    call_format = "gemma"
    framing_tokens = ("<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", '<|"|>')
    stop = ("<turn|>", "<|tool_response>", "<eos>")
    call_open = "<|tool_call>"
    required_prefill = "<|tool_call>"
    description = "Gemma 4: <|turn> framing, <|tool> declarations, <|tool_call>call:NAME{...}, in-turn results"
    thoughts = (GEMMA_THOUGHT,)
    keep_thoughts = False  # the template strips past thoughts from model turns
    user_joins = ("user",)

    def render_prompt(self, msgs: list[Message], tools: list[ToolDef], open_turn: bool, prefill: str) -> Segments:
        out = Out()
        system = msgs.pop(0)["content"] if msgs and msgs[0]["role"] == "system" else None
        if system is not None or tools:
            out.t("<|turn>system\n").add(trimmed(system or ()))
            for tool in tools:
                declaration(out, tool)
            out.t("<turn|>\n")
        previous = None  # the role of the last message that was not a tool message
        for i, m in enumerate(msgs):
            nxt = msgs[i + 1]["role"] if i + 1 < len(msgs) else None
            if m["role"] == "tool":
                out.add(m["content"])  # results stay inside the model turn (it is closed by the model)
                continue
            role = "model" if m["role"] == "assistant" else m["role"]
            if not (role == "model" and previous == "assistant"):
                out.t(f"<|turn>{role}\n")
            previous = m["role"]
            out.add(trimmed(m["content"]))
            calls = any(seg.trusted and seg.text.startswith("<|tool_call>") for seg in m["content"])
            if calls and nxt != "tool":
                out.t("<|tool_response>")
            elif not (calls and nxt == "tool"):
                out.t("<turn|>\n")
        if open_turn and not (msgs and msgs[-1]["role"] == "tool"):
            out.t("<|turn>model\n<|channel>thought\n<channel|>")
        if open_turn:
            out.t(prefill)
        return out.done()

    def _call(self, call: ToolCall) -> Out:
        out = Out().t("<|tool_call>call:").u(call.name).t("{")
        for i, (key, value) in enumerate(_sorted(call.arguments)):
            out.t("," if i else "").u(key).t(":")
            argument(out, value, escape_keys=False)
        return out.t("}<tool_call|>")

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return "".join(seg.text for seg in self._call(call).parts)

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        out = Out()
        if text.strip():
            out.u(text.strip())
        for call in calls:
            out.add(self._call(call).parts)
        return out.done()

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        """`<|tool_response>response:NAME{value:<|"|>JSON<|"|>}<tool_response|>` per result: the template's
        form for a string result (what an OpenAI-style client sends; it fails on a mapping)."""
        out = Out()
        for r in responses:
            content = r["content"] if isinstance(r["content"], str) else dumps(r["content"])
            out.t("<|tool_response>response:").u(str(r["name"])).t("{value:" + Q).u(content).t(Q + "}<tool_response|>")
        return out.done()

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar_families import gemma_call_grammar

        return gemma_call_grammar(list(tools))
