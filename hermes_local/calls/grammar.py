"""GBNF grammars for tool calls, built from the registered tools' JSON schemas.

`tool_call_grammar(tools)` returns a grammar for what follows `<tool_call>`: one JSON object whose
"name" is a registered tool and whose "arguments" match that tool's schema, then `</tool_call>`.
Covers the JSON-schema subset `@tool` produces (scalars, enums, arrays, objects, anyOf, local $ref);
anything else (a recursive or remote `$ref`, `properties` that is not an object, ...) falls back to a
generic JSON value. A string's `maxLength` up to `EXACT_MAX_LENGTH` is spelled out in the grammar; a
longer one is the plain string rule named `string-max-N`, whose bound the decoder enforces
(`engines/inprocess/decoding.py`, closing mode) and argument validation checks, so a huge maxLength
never becomes N nested rules. A grammar longer than `MAX_GRAMMAR_CHARS` is refused (`GrammarTooLarge`).
Results are cached per tool set. Does not decode, and knows tools only by the `Tool` protocol below
(name and schemas), not the tool registry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

from hermes_local.errors import GrammarTooLarge, UserError

EXACT_MAX_LENGTH = 64  # maxLength spelled out as char{0,N}: N nested rules in every GBNF engine
MAX_GRAMMAR_CHARS = 200_000  # far above any real tool set's grammar (a few KB); bounds parse and compile time


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


MAX_DEPTH = 32  # schema nesting followed into the grammar; deeper parts allow any JSON value


def _listed(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0


def _local_ref(root: dict[str, Any], ref: Any) -> Any:
    """The schema a local `$ref` (`#/$defs/NAME`, `#/definitions/NAME`, any `#/...` pointer) points at; None
    for a remote or broken one (nothing is ever fetched)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


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

    def value(self, schema: Any, name: str, root: dict[str, Any], seen: tuple[str, ...] = ()) -> str:
        """The rule for one schema; `seen` holds the `$ref`s being expanded (a recursive one is any JSON value)."""
        if not isinstance(schema, dict) or len(seen) > MAX_DEPTH:
            return "value"
        if "$ref" in schema:
            ref = schema["$ref"]
            target = _local_ref(root, ref)
            if target is None or ref in seen:
                return "value"
            return self.value(target, str(ref).split("/")[-1], root, (*seen, ref))
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            choices = schema["enum"]
            return self.add(name, " | ".join(_literal(v) for v in choices)) if _listed(choices) else "value"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                if not _listed(schema[key]):
                    return "value"
                alts = [self.value(s, f"{name}-{i}", root, seen) for i, s in enumerate(schema[key])]
                return self.add(name, " | ".join(alts))
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)]
            if not kinds:
                return "value"
            alts = [self.value({**schema, "type": k}, f"{name}-{k}", root, seen) for k in kinds]
            return self.add(name, " | ".join(alts))
        limit = schema.get("maxLength")
        if kind == "string" and isinstance(limit, int) and not isinstance(limit, bool):
            n = max(0, limit)
            chars = f"char{{0,{n}}}" if n <= EXACT_MAX_LENGTH else "char*"  # the decoder bounds long ones
            return self.add(f"string-max-{n}", f'"\\"" {chars} "\\""')
        if kind in ("string", "integer", "number", "boolean", "null"):
            return kind
        if kind == "array":
            item = self.value(schema.get("items", {}), f"{name}-item", root, seen)
            return self.add(name, f'"[" ( {item} ( "," " " {item} )* )? "]"')
        if kind == "object" and isinstance(schema.get("properties"), dict):
            return self.add(name, self.object_body(schema, name, root, seen))
        if kind == "object":
            return "object"
        return "value"

    def object_body(self, schema: dict[str, Any], name: str, root: dict[str, Any], seen: tuple[str, ...] = ()) -> str:
        props = schema.get("properties")
        if not isinstance(props, dict):
            props = {}
        wanted = schema.get("required")
        wanted = [r for r in wanted if isinstance(r, str)] if isinstance(wanted, list) else []
        required = [p for p in props if p in wanted]
        optional = [p for p in props if p not in required]

        def pair(prop: str) -> str:
            return f'{_literal(prop)} ":" " " {self.value(props[prop], f"{name}-{prop}", root, seen)}'

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
        params = params if isinstance(params, dict) else {}
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
        text = b.text()
        if len(text) > MAX_GRAMMAR_CHARS:
            raise GrammarTooLarge(
                f"the tool-call grammar for {len(tools)} tool(s) would be {len(text):,} characters (limit "
                f"{MAX_GRAMMAR_CHARS:,}); offer fewer tools or simpler parameter schemas"
            )
        if len(_cache) > 256:
            _cache.clear()
        _cache[key] = text
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


def check_schema(
    schema: Any, where: str, root: dict[str, Any] | None = None, refs: tuple[str, ...] = (), depth: int = 0
) -> None:
    """Refuse (UserError, one line naming the place) a parameters schema of the wrong shape: `properties`
    that is not an object, a `$ref` that is not local, does not resolve or is recursive, nesting deeper
    than `MAX_DEPTH`. For schemas from outside (an HTTP client's tools); the grammar itself never fails on
    them (it falls back to any JSON value)."""
    root = schema if root is None else root
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise UserError(f"{where} must be a JSON schema object")
    if depth > MAX_DEPTH:
        raise UserError(f"{where}: the schema nests too deep (more than {MAX_DEPTH} levels)")
    ref = schema.get("$ref")
    if ref is not None:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UserError(f"{where}.$ref must be a local reference like #/$defs/NAME (nothing is fetched)")
        if ref in refs:
            raise UserError(f"{where}.$ref {ref} is recursive; recursive schemas are not supported")
        target = _local_ref(root, ref)
        if target is None:
            raise UserError(f"{where}.$ref {ref} does not point at a schema in the same parameters")
        check_schema(target, f"{where}.$ref", root, (*refs, ref), depth + 1)
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            raise UserError(f"{where}.properties must be an object of name -> schema, not a {type(props).__name__}")
        for name, sub in props.items():
            check_schema(sub, f"{where}.properties.{name}", root, refs, depth + 1)
    required = schema.get("required")
    if required is not None and not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        raise UserError(f"{where}.required must be a list of property names")
    if "items" in schema:
        check_schema(schema["items"], f"{where}.items", root, refs, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            if not _listed(schema[key]):
                raise UserError(f"{where}.{key} must be a non-empty list of schemas")
            for i, sub in enumerate(schema[key]):
                check_schema(sub, f"{where}.{key}[{i}]", root, refs, depth + 1)
    if "enum" in schema and not _listed(schema["enum"]):
        raise UserError(f"{where}.enum must be a non-empty list")
