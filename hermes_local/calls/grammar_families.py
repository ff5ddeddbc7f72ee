"""GBNF for the call syntaxes that are not one JSON object: XML parameters, name-then-JSON, Gemma's objects.

- `xml_call_grammar`: after `<tool_call>`, `<function=NAME>` then `<parameter=KEY>\\nVALUE\\n</parameter>`
  children (Qwen3-Coder); `invoke=True` spells them `<invoke name="NAME">` / `<parameter name="KEY">`
  (MiniMax M2). Names and keys come from the tools; a value is text that may hold `<` but never `</`.
- `named_json_grammar`: a tool name, a fixed separator, then that tool's JSON arguments and a fixed end
  (gpt-oss harmony `NAME <|constrain|>json<|message|>{...}`, DeepSeek `NAME<｜tool▁sep｜>{...}`).
- `gemma_call_grammar`: after `<|tool_call>`, `call:NAME{key:value,...}<tool_call|>` with Gemma's values
  (strings between `<|"|>` markers, bare keys).
- `tool_code_grammar`: after ```` ```tool_code ````, a line `NAME(key=value, ...)` with the tool's keys and
  Python literal values (double-quoted strings, numbers, True/False/None, lists, dicts), then the closing fence
  (Gemma 3).
Built with `grammar.py`'s builder and cache; decodes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hermes_local.calls.grammar import Tool, _build, _Builder

_XML_VALUE = r'( [^<] | "<" [^/] )*'
_PYTHON = {
    "pvalue": r'string | number | "True" | "False" | "None" | plist | pdict',
    "plist": r'"[" ( pvalue ( "," " "? pvalue )* )? "]"',
    "pdict": r'"{" ( string ":" " "? pvalue ( "," " "? string ":" " "? pvalue )* )? "}"',
}
_GEMMA = {
    "gstring": r'"<|\"|>" ( [^<] | "<" [^|] )* "<|\"|>"',
    "gvalue": r"gstring | number | boolean | null | gobject | garray",
    "gobject": r'"{" ( gkey ":" gvalue ( "," gkey ":" gvalue )* )? "}"',
    "garray": r'"[" ( gvalue ( "," gvalue )* )? "]"',
    "gkey": r"[A-Za-z_] [A-Za-z0-9_.\-]*",
}


def _params(tool: Tool) -> dict[str, object]:
    params = tool.parameters_schema()
    return params if isinstance(params, dict) else {}


def _keys(tool: Tool) -> list[str]:
    props = _params(tool).get("properties")
    return [k for k in props if isinstance(k, str)] if isinstance(props, dict) else []


def xml_call_grammar(tools: Sequence[Tool], *, invoke: bool = False) -> str:
    """GBNF for one XML-parameter call and its closing tag (see the module docstring)."""
    fn_open, fn_close = ('"<invoke name=\\""', '"\\">\\n"') if invoke else ('"<function="', '">\\n"')
    p_open, p_close = ('"<parameter name=\\""', '"\\">"') if invoke else ('"<parameter="', '">\\n"')
    p_end = '"</parameter>\\n"' if invoke else '"\\n</parameter>\\n"'
    end = '"</invoke>\\n</minimax:tool_call>"' if invoke else '"</function>\\n</tool_call>"'

    def root(b: _Builder) -> str:
        value = b.add("xml-value", _XML_VALUE)
        alts = []
        for t in tools:
            keys = _keys(t)
            param = (
                b.add(
                    f"{t.name}-param",
                    f"{p_open} ( {' | '.join(json.dumps(k) for k in keys)} ) {p_close} {value} {p_end}",
                )
                if keys
                else None
            )
            body = f"{param}*" if param else ""
            alts.append(b.add(f"xml-{t.name}", f"{fn_open} {json.dumps(t.name)} {fn_close} {body}"))
        return f'"\\n"? ( {" | ".join(alts)} ) {end}'

    return _build("xml-invoke" if invoke else "xml", tools, root)


def named_json_grammar(tools: Sequence[Tool], between: str, after: str = "") -> str:
    """GBNF for `NAME` + `between` + that tool's JSON arguments + `after` (both GBNF fragments)."""

    def root(b: _Builder) -> str:
        alts = []
        for t in tools:
            params = _params(t)
            args = b.add(f"{t.name}-arguments", b.object_body({**params, "type": "object"}, f"{t.name}-arg", params))
            alts.append(f"{json.dumps(t.name)} {between} {args}")
        return f"( {' | '.join(alts)} ) {after}".rstrip()

    return _build(f"named-{between}-{after}", tools, root)


def gemma_call_grammar(tools: Sequence[Tool]) -> str:
    """GBNF for what follows `<|tool_call>`: `call:NAME{...}<tool_call|>`."""

    def root(b: _Builder) -> str:
        for name, body in _GEMMA.items():
            b.rules[name] = body
        names = " | ".join(json.dumps(t.name) for t in tools)
        return f'"call:" ( {names} ) gobject "<tool_call|>"'

    return _build("gemma", tools, root)


def tool_code_grammar(tools: Sequence[Tool]) -> str:
    """GBNF for what follows ```` ```tool_code ````: `\\nNAME(key=value, ...)\\n``` ```` (keys the tool's own)."""

    def root(b: _Builder) -> str:
        b.rules.update(_PYTHON)
        alts = []
        for t in tools:
            keys = _keys(t)
            kwargs = ""
            if keys:
                kwarg = b.add(f"{t.name}-kwarg", f'( {" | ".join(json.dumps(k) for k in keys)} ) "=" pvalue')
                kwargs = f' ( {kwarg} ( ", " {kwarg} )* )?'
            alts.append(b.add(f"py-{t.name}", f'{json.dumps(t.name + "(")}{kwargs} ")"'))
        return f'"\\n" ( {" | ".join(alts)} ) "\\n```"'

    return _build("tool_code", tools, root)
