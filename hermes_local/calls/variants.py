"""Family-specific call spellings rewritten into forms `parse.py` reads (its per-dialect entries).

- `llama3`: `<|python_tag|>NAME.call(key="value", ...)` (Llama 3.1 built-in tool style) becomes a
  `<tool_call>` block; `<|python_tag|>{...}` becomes `<tool_call>{...}`.
- `mistral`: `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}` loses its call id (`[TOOL_CALLS]NAME[ARGS]{...}`
  and the JSON array are read by the parser itself).
Qwen3-Coder's `<function=N><parameter=K>V</parameter></function>` needs no rewrite. With no dialect
every rewrite applies. Does not decode JSON beyond the `.call(...)` keyword values; never executes.
"""

from __future__ import annotations

import ast
import json
import re

_PY_CALL = re.compile(r"<\|python_tag\|>\s*([A-Za-z_][\w.]*?)\.call\((.*?)\)(?=\s*(?:<\||$|\n))", re.S)
_PY_JSON = re.compile(r"<\|python_tag\|>\s*(?=[{\[])")
_CALL_ID = re.compile(r"(\[TOOL_CALLS\]\s*[A-Za-z_][\w.\-]*)\s*\[CALL_ID\]\s*[^\[\s]*\s*(?=\[ARGS\])")
_FAMILIES = {"llama3": ("llama3",), "mistral": ("mistral", "mistral-v3")}


def _py_call(m: re.Match[str]) -> str:
    try:
        node = ast.parse(f"f({m.group(2)})", mode="eval").body
        assert isinstance(node, ast.Call) and not node.args
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        body = json.dumps({"name": m.group(1), "arguments": args}, ensure_ascii=False)
    except (SyntaxError, ValueError, TypeError, AssertionError, RecursionError, MemoryError):
        return m.group(0)  # left as it is: the parser reports what it cannot read
    return f"<tool_call>{body}</tool_call>"


def _applies(family: str, dialect: str | None) -> bool:
    return dialect is None or dialect in _FAMILIES[family]


def normalize_variants(text: str, dialect: str | None) -> str:
    """`text` with the family's own call spellings rewritten (a no-op when none occurs)."""
    if _applies("llama3", dialect) and "<|python_tag|>" in text:
        text = _PY_JSON.sub("<tool_call>", _PY_CALL.sub(_py_call, text))
    if _applies("mistral", dialect) and "[CALL_ID]" in text:
        text = _CALL_ID.sub(r"\1", text)
    return text
