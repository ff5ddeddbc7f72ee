"""Family-specific call spellings rewritten into forms `parse.py` reads (its per-dialect entries).

- `llama3`: `<|python_tag|>NAME.call(key="value", ...)` (Llama 3.1 built-in tool style) becomes a
  `<tool_call>` block; `<|python_tag|>{...}` becomes `<tool_call>{...}`.
- `mistral`: `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}` loses its call id (`[TOOL_CALLS]NAME[ARGS]{...}`
  and the JSON array are read by the parser itself).
- `gemma4`, `harmony`, and the `deepseek` / `minimax` call formats of `gguf`: see `families.py`.
Qwen3-Coder's `<function=N><parameter=K>V</parameter></function>` needs no rewrite. With no dialect
every rewrite applies except harmony's (its `<|end|>` and channels are only read for gpt-oss).
Does not decode JSON beyond the `.call(...)` keyword values; never executes.
"""

from __future__ import annotations

import re

from hermes_local.calls import families

_PY_CALL = re.compile(r"<\|python_tag\|>\s*([A-Za-z_][\w.]*?)\.call\((.*?)\)(?=\s*(?:<\||$|\n))", re.S)
_PY_JSON = re.compile(r"<\|python_tag\|>\s*(?=[{\[])")
_CALL_ID = re.compile(r"(\[TOOL_CALLS\]\s*[A-Za-z_][\w.\-]*)\s*\[CALL_ID\]\s*[^\[\s]*\s*(?=\[ARGS\])")
_FAMILIES = {
    "llama3": ("llama3",),
    "mistral": ("mistral", "mistral-v3"),
    "gemma": ("gemma4", "gemma"),
    "deepseek": ("deepseek",),
    "minimax": ("minimax",),
}


def _py_call(m: re.Match[str]) -> str:
    return families.python_call(m.group(1), m.group(2)) or m.group(0)  # else the parser reports what it cannot read


def _applies(family: str, dialect: str | None) -> bool:
    return dialect is None or dialect in _FAMILIES[family]


def normalize_variants(text: str, dialect: str | None) -> str:
    """`text` with the family's own call spellings rewritten (a no-op when none occurs)."""
    if _applies("llama3", dialect) and "<|python_tag|>" in text:
        text = _PY_JSON.sub("<tool_call>", _PY_CALL.sub(_py_call, text))
    if _applies("mistral", dialect) and "[CALL_ID]" in text:
        text = _CALL_ID.sub(r"\1", text)
    if dialect == "harmony":
        text = families.harmony(text)
    for family, rewrite in (("gemma", families.gemma), ("deepseek", families.deepseek), ("minimax", families.minimax)):
        if _applies(family, dialect):
            text = rewrite(text)
    return text
