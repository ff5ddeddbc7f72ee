"""Call spellings of newer families rewritten into `<tool_call>{"name", "arguments"}</tool_call>` blocks.

- Gemma 4: `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>` (bare keys, `<|"|>` strings; also
  `call:NAME(key: "text")`);
  its thought `<|channel>thought...<channel|>` is read by the parser itself. Gemma 3 (and Gemma 4 off its
  format): ```` ```tool_code\\nNAME(key="value")\\n``` ````, one or more Python calls with literal
  keyword arguments per block; `tool_code(text)` also returns the blocks that hold no such call (the
  `gemma3` dialect reports them) and marks a ```` ```tool_output ```` the model wrote itself as made up.
- gpt-oss (harmony): `<|channel|>analysis<|message|>...<|end|>` becomes a `<think>` thought (a call inside
  it is rehearsed, never run), `[<|channel|>commentary] to=functions.NAME [<|channel|>commentary]
  [<|constrain|>]json<|message|>{...}` a call; channel framing and `<|start|>assistant` are dropped.
- DeepSeek V3/R1/V3.1: `<｜tool▁call▁begin｜>[function<｜tool▁sep｜>]NAME[<｜tool▁sep｜>]`, then
  `[```json]{...}[```]<｜tool▁call▁end｜>`.
- MiniMax M2: `<minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke>` becomes the
  `<function=NAME>` form the parser reads.
A span that cannot be read is still wrapped in `<tool_call>` tags, so the parser reports it to the model
instead of passing it on as prose. Never executes; decodes only Gemma's own object syntax.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from hermes_local.calls.prose import HOLE

Q = '<|"|>'
_GEMMA_CALL = re.compile(
    r"<\|tool_call>\s*(?:call:)?\s*([A-Za-z_][\w.\-]*)\s*(\{.*?\}|\(.*?\))?\s*(?:<tool_call\|>|(?=<\|tool_call>)|\Z)",
    re.S,
)
_REOPENED = re.compile(r"```tool_code[^\S\n]*(?=```tool_code)")  # the prefilled opener, written again
_TOOL_CODE = re.compile(r"```tool_code[^\S\n]*\n?(.*?)\s*(?:```|\Z)", re.S)  # the block's body; unclosed: to the end
_HARMONY_ANALYSIS = re.compile(r"<\|channel\|>\s*analysis\s*<\|message\|>(.*?)(?:<\|end\|>|(?=<\|start\|>)|\Z)", re.S)
_HARMONY_CALL = re.compile(
    r"(?:<\|start\|>\s*assistant\s*)?(?:<\|channel\|>\s*commentary\s*)?to=functions\.([A-Za-z_][\w.\-]*)\s*"
    r"(?:<\|channel\|>\s*commentary\s*)?(?:<\|constrain\|>\s*)?(?:json\s*)?<\|message\|>(.*?)(?:<\|call\|>|<\|end\|>|(?=<\|start\|>)|\Z)",
    re.S,
)
_HARMONY_FRAMING = re.compile(
    r"<\|start\|>\s*assistant|<\|channel\|>\s*(?:final|commentary)\s*<\|message\|>|<\|(?:end|return|call)\|>"
)
_DS_CALL = re.compile(
    r"<｜tool▁call▁begin｜>\s*(?:function\s*<｜tool▁sep｜>\s*)?([A-Za-z_][\w.\-]*)\s*(?:<｜tool▁sep｜>)?\s*"
    r"(?:```(?:json)?\s*)?(.*?)\s*(?:```\s*)?(?:<｜tool▁call▁end｜>|\Z)",
    re.S,
)
_DS_WRAP = re.compile(r"<｜tool▁calls▁(?:begin|end)｜>")
_MINIMAX = (
    (re.compile(r"<minimax:tool_call>"), "<tool_call>"),
    (re.compile(r"</minimax:tool_call>"), "</tool_call>"),
    (re.compile(r"<invoke\s+name\s*=\s*[\"']([^\"']+)[\"']\s*>"), r"<function=\1>"),
    (re.compile(r"</invoke>"), "</function>"),
)


def block(name: str, args_text: str) -> str:
    """A `<tool_call>` block holding `name` and the arguments' raw JSON text (the parser repairs or reports it)."""
    return f'<tool_call>{{"name": {json.dumps(name)}, "arguments": {args_text.strip() or "{}"}}}</tool_call>'


class _Gemma:
    """Gemma's object syntax -> Python values (bare or `<|"|>`-quoted keys; `<|"|>` or JSON strings)."""

    def __init__(self, s: str) -> None:
        self.s, self.i = s, 0

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1

    def value(self) -> Any:
        self.ws()
        s, i = self.s, self.i
        if s.startswith(Q, i):
            end = s.index(Q, i + len(Q))
            self.i = end + len(Q)
            return s[i + len(Q) : end]
        if s[i] == '"':
            value, end = json.JSONDecoder().raw_decode(s, i)
            self.i = end
            return value
        if s[i] in "{[":
            close = "}" if s[i] == "{" else "]"
            out: dict[str, Any] | list[Any] = {} if close == "}" else []
            self.i += 1
            self.ws()
            while not s.startswith(close, self.i):
                if isinstance(out, dict):
                    key = self.key()
                    self.ws()
                    if s[self.i] != ":":
                        raise ValueError("expected ':'")
                    self.i += 1
                    out[key] = self.value()
                else:
                    out.append(self.value())
                self.ws()
                if s.startswith(",", self.i):
                    self.i += 1
                    self.ws()
                elif not s.startswith(close, self.i):
                    raise ValueError("expected ',' or a closing bracket")
            self.i += 1
            return out
        m = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null").match(s, i)
        if m is None:
            raise ValueError("not a value")
        self.i = m.end()
        return json.loads(m.group())

    def key(self) -> str:
        s = self.s
        if s.startswith(Q, self.i) or s.startswith('"', self.i):
            return str(self.value())
        m = re.compile(r"[^:,{}\[\]\s]+").match(s, self.i)
        if m is None:
            raise ValueError("expected a key")
        self.i = m.end()
        return m.group()


def _gemma(m: re.Match[str]) -> str:
    args = m.group(2) or "{}"
    if args.startswith("("):  # `call:NAME(key: "value")`, as Gemma 4 also writes (hermes-agent #7457)
        args = "{" + args[1:-1] + "}"
    try:
        parser = _Gemma(args)
        value = parser.value()
        if parser.i != len(args):
            raise ValueError("text after the arguments")
    except (ValueError, IndexError, RecursionError):
        return block(m.group(1), args.replace(Q, '"'))  # unreadable: the parser repairs or reports it
    return f"<tool_call>{json.dumps({'name': m.group(1), 'arguments': value}, ensure_ascii=False)}</tool_call>"


def _keywords(call: ast.Call) -> dict[str, Any] | None:
    """The literal keyword arguments of a call, or None when it has positional, `**` or non-literal ones."""
    if call.args or any(kw.arg is None for kw in call.keywords):
        return None
    return {str(kw.arg): ast.literal_eval(kw.value) for kw in call.keywords}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _tool_call(name: str, values: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': values}, ensure_ascii=False)}</tool_call>"


def python_call(name: str, args: str) -> str | None:
    """`name(key=literal, ...)` -> a `<tool_call>` block, or None when it is not such a call."""
    try:
        node = ast.parse(f"f({args})", mode="eval").body
        values = _keywords(node) if isinstance(node, ast.Call) else None
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return None if values is None else _tool_call(name, values)


def python_calls(code: str) -> str | None:
    """One or more `NAME(key=literal, ...)` statements (one per line, as in a ```` ```tool_code ```` block) ->
    their `<tool_call>` blocks, or None when the code is anything else (nothing is ever evaluated)."""
    try:
        body = ast.parse(code.strip(), mode="exec").body
        blocks = []
        for stmt in body:
            call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
            name = _dotted(call.func) if call is not None else None
            values = _keywords(call) if call is not None and name is not None else None
            if name is None or values is None:
                return None
            blocks.append(_tool_call(name, values))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return "".join(blocks) or None


def gemma(text: str) -> str:
    if "<|tool_call>" in text:
        text = _GEMMA_CALL.sub(_gemma, text)
    if "```tool_code" in text:
        text = _TOOL_CODE.sub(lambda m: python_calls(m.group(1)) or m.group(0), text)
    return text


def tool_code(text: str) -> tuple[str, list[str]]:
    """Gemma 3's calls: each ```` ```tool_code ```` block as `<tool_call>` blocks, and the blocks that hold no
    call (cut out of the text, returned to be reported); an opener written twice (after the prefilled one)
    counts once, and a ```` ```tool_output ```` the model wrote itself becomes a `<tool_response>`, which the
    parser drops with all after it as made up."""
    unreadable: list[str] = []

    def read(m: re.Match[str]) -> str:
        if not m.group(1).strip():
            return m.group()  # "```tool_code```" named in prose, as the instruction names it: not a block
        blocks = python_calls(m.group(1))
        if blocks is None and m.group(1).lstrip()[:1] in ("{", "["):
            return m.group()  # JSON in the fence: the parser reads a fenced JSON call (or reports it)
        if blocks is None:
            unreadable.append(m.group().strip())
            return HOLE
        return blocks

    if "```tool_output" in text:
        text = text.replace("```tool_output", "<tool_response>", 1)
    if "```tool_code" in text:
        text = _TOOL_CODE.sub(read, _REOPENED.sub("", text))
    return text, unreadable


def harmony(text: str) -> str:
    if "<|" not in text and "to=functions." not in text:
        return text
    text = _HARMONY_ANALYSIS.sub(lambda m: f"<think>{m.group(1)}</think>", text)
    text = _HARMONY_CALL.sub(lambda m: block(m.group(1), m.group(2)), text)
    return _HARMONY_FRAMING.sub("", text)


def deepseek(text: str) -> str:
    if "<｜tool▁call▁begin｜>" not in text:
        return text
    return _DS_WRAP.sub("", _DS_CALL.sub(lambda m: block(m.group(1), m.group(2)), text))


def minimax(text: str) -> str:
    if "<minimax:tool_call>" not in text and "<invoke" not in text:
        return text
    for pattern, repl in _MINIMAX:
        text = pattern.sub(repl, text)
    return text
