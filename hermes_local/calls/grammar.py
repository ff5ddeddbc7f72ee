"""GBNF grammars for tool calls, built from the registered tools' JSON schemas.

`tool_call_grammar(tools)` returns a grammar for what follows `<tool_call>`: one JSON object whose
"name" is a registered tool and whose "arguments" match that tool's schema, then `</tool_call>`.
Covers the JSON-schema subset `@tool` produces (scalars, enums, arrays, objects, anyOf, $ref);
anything else falls back to a generic JSON value. Results are cached per tool set. Does not decode, and
knows tools only by the `Tool` protocol below (name and schemas), not the tool registry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol


class Tool(Protocol):
    """What a grammar needs of a tool (`tools.registry.Tool` is one): its name and JSON schemas."""

    name: str

    def parameters_schema(self) -> dict[str, Any]: ...

    def schema(self) -> dict[str, Any]: ...

_PRIMITIVES = {
    "ws": r'" "?',
    "string": r'"\"" char* "\""',
    "char": r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "integer": r'"-"? ([0-9] | [1-9] [0-9]{1,15})',
    "number": r'"-"? ([0-9] | [1-9] [0-9]{1,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,4})?',
    "boolean": r'"true" | "false"',
    "null": r'"null"',
    "value": r"object | array | string | number | boolean | null",
    "object": r'"{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"',
    "array": r'"[" ws ( value ws ( "," ws value ws )* )? "]"',
}

_cache: dict[str, str] = {}


def _literal(value: Any) -> str:
    return json.dumps(json.dumps(value, ensure_ascii=False))


class _Builder:
    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def add(self, name: str, body: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9]+", "-", name).strip("-").lower() or "r"
        candidate, n = base, 1
        while candidate in self.rules and self.rules[candidate] != body:
            n += 1
            candidate = f"{base}-{n}"
        self.rules[candidate] = body
        return candidate

    def value(self, schema: dict[str, Any], name: str, root: dict[str, Any]) -> str:
        if "$ref" in schema:
            ref = schema["$ref"].split("/")[-1]
            return self.value(root.get("$defs", {}).get(ref, {}), ref, root)
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            return self.add(name, " | ".join(_literal(v) for v in schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                alts = [self.value(s, f"{name}-{i}", root) for i, s in enumerate(schema[key])]
                return self.add(name, " | ".join(alts))
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.add(name, " | ".join(self.value({**schema, "type": k}, f"{name}-{k}", root) for k in kind))
        if kind == "string" and isinstance(schema.get("maxLength"), int):
            n = max(0, schema["maxLength"])
            return self.add(f"string-max-{n}", f'"\\"" char{{0,{n}}} "\\""')
        if kind in ("string", "integer", "number", "boolean", "null"):
            return kind
        if kind == "array":
            item = self.value(schema.get("items", {}), f"{name}-item", root)
            return self.add(name, f'"[" ( {item} ( "," " " {item} )* )? "]"')
        if kind == "object" and "properties" in schema:
            return self.add(name, self.object_body(schema, name, root))
        if kind == "object":
            return "object"
        return "value"

    def object_body(self, schema: dict[str, Any], name: str, root: dict[str, Any]) -> str:
        props = schema.get("properties", {})
        required = [p for p in props if p in schema.get("required", [])]
        optional = [p for p in props if p not in required]

        def pair(prop: str) -> str:
            return f'{_literal(prop)} ":" " " {self.value(props[prop], f"{name}-{prop}", root)}'

        def optional_tail(names: Sequence[str]) -> str:
            return " ".join(f'( "," " " {pair(p)} )?' for p in names)

        if required:
            body = ' "," " " '.join(pair(p) for p in required)
            body = f"{body} {optional_tail(optional)}"
        elif optional:
            alts = [f"{pair(p)} {optional_tail(optional[i + 1 :])}" for i, p in enumerate(optional)]
            body = "( " + " | ".join(f"( {a} )" for a in alts) + " )?"
        else:
            body = ""
        return f'"{{" {body} "}}"'

    def text(self) -> str:
        lines = [f"{k} ::= {v}" for k, v in self.rules.items()]
        lines += [f"{k} ::= {v}" for k, v in _PRIMITIVES.items()]
        return "\n".join(lines) + "\n"


def _calls(b: _Builder, tools: Sequence[Tool], args_key: str, both_orders: bool, tail: str = "") -> list[str]:
    """One rule per tool (and key order): `{"name": NAME, ARGS_KEY: {...}TAIL}`."""
    alternatives = []
    for t in tools:
        params = t.parameters_schema()
        args = b.add(f"{t.name}-arguments", b.object_body({**params, "type": "object"}, f"{t.name}-arg", params))
        # Canonical separators (", " and ": ", as json.dumps writes them): names and keys become forced
        # tokens the decoder can fast-forward (automaton.py), instead of whitespace choices.
        name_pair = f'"\\"name\\"" ":" " " {_literal(t.name)}'
        args_pair = f'{_literal(args_key)} ":" " " {args}'
        alternatives.append(b.add(f"call-{t.name}", f'"{{" {name_pair} "," " " {args_pair}{tail} "}}"'))
        if both_orders:
            alternatives.append(b.add(f"call-{t.name}-args-first", f'"{{" {args_pair} "," " " {name_pair}{tail} "}}"'))
    return alternatives


def _build(key: str, tools: Sequence[Tool], make_root: Any) -> str:
    key = key + json.dumps([t.schema() for t in tools], sort_keys=True)
    if key not in _cache:
        b = _Builder()
        b.rules["root"] = ""  # reserve the name; filled below
        b.rules["root"] = make_root(b)
        _cache[key] = b.text()
    return _cache[key]


def tool_call_grammar(tools: Sequence[Tool]) -> str:
    """GBNF for `\\n{"name": ..., "arguments": {...}}\\n</tool_call>` (either key first) over `tools`."""
    # Hermes 2 Pro's model card wrote "arguments" first, its tool_use template "name" first: allow both.
    return _build(
        "hermes",
        tools,
        lambda b: f'"\\n"? ( {" | ".join(_calls(b, tools, "arguments", True))} ) "\\n"? "</tool_call>"',
    )


def json_call_grammar(tools: Sequence[Tool], args_key: str = "parameters") -> str:
    """GBNF for one bare JSON call `{"name": ..., ARGS_KEY: {...}}` (Llama 3 custom tools)."""
    return _build(f"json-{args_key}", tools, lambda b: f"ws ( {' | '.join(_calls(b, tools, args_key, False))} )")


def json_array_grammar(tools: Sequence[Tool]) -> str:
    """GBNF for what follows `[TOOL_CALLS]`: a JSON array of calls, each optionally with an "id" (Mistral)."""

    def root(b: _Builder) -> str:
        call = b.add(
            "call", " | ".join(_calls(b, tools, "arguments", False, tail=' ( ws "," ws "\\"id\\"" ws ":" ws string )?'))
        )
        return f'" "? "[" ws {call} ( ws "," ws {call} )* ws "]"'

    return _build("mistral", tools, root)
