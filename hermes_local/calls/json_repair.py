"""JSON scanning and repair for tool calls cut out of model output (used by `parse.py`).

`scan(s, i)` finds where the JSON (or Python-literal) value opening at `s[i]` ends, minding strings
and escapes, and stops at a tag boundary (`<tool_call>`, `<|im_end|>`, `[TOOL_CALLS]`, a fence...) when
the reply was cut off. `decode(src)` parses JSON, then JSON with trailing commas / raw control
characters repaired, then a Python literal. `value_at(s, i)` combines both and closes the brackets a
cut-off reply still owed after a complete value. It knows nothing about tool-call shapes (names,
arguments, envelopes) or the tags around them: that is `parse.py`. Pure stdlib: `re`, `json`, `ast`.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from typing import Any

_BOUNDARY = re.compile(
    r"<\s*/?\s*(?:tool_calls?|toolcall|tool-call|function_calls?|tool|tools|json|function|think|tool_response"
    r"|parameter)\b|<\|[a-z_]+\|>|</s>",
    re.I,
)
_OUTSIDE = re.compile(r"[\"'{}\[\]<`]")
_STRING_REST = {q: re.compile(rf"(?:[^{q}\\]++|\\.)*+{q}", re.S) for q in "\"'"}  # the rest of a string
_TOKENS = re.compile(r"(\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*')|,(?=\s*[}\]])|\b(true|false|null)\b", re.S)
_DECODER = json.JSONDecoder(strict=False)
_CONTROL = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})
_PY_WORDS = {"true": "True", "false": "False", "null": "None"}
Scan = tuple[int, list[str], str]


def scan(s: str, i: int) -> Scan:
    """Where the JSON (or Python-literal) value opening at s[i] ends, minding strings and escapes: (end,
    closers still owed, state), state "" if s[i:end] is complete, "cut" if the text or a tag ends it
    early, "string" if the text ends inside a string, "mismatch" for a wrong closing bracket at s[end]."""
    stack: list[str] = []
    pos, n = i, len(s)
    while (m := _OUTSIDE.search(s, pos)) is not None:
        c, p = m.group(), m.start()
        if c in "{[":
            if c == "[" and p > i and s.startswith("[TOOL_CALLS]", p):
                return p, stack, "cut"
            stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if stack.pop() != c:
                return p, stack, "mismatch"
            if not stack:
                return p + 1, stack, ""
        elif c == "`" or _BOUNDARY.match(s, p):
            return p, stack, "cut"
        elif c != "<":  # a quote: jump past its closing quote, minding escapes
            if (e := _STRING_REST[c].match(s, p + 1)) is None:
                return n, stack, "string"
            p = e.end() - 1
        pos = p + 1
    return n, stack, "cut"


def _plain(value: Any) -> Any:
    """Python literal -> JSON data (tuples become lists); anything else (a set is `{"key"}` cut short) is refused."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ValueError(f"not JSON data: {type(value).__name__}")


def decode(src: str) -> tuple[Any, str | None]:
    """JSON, then JSON without trailing commas / raw control characters, then a Python literal."""
    try:
        return json.loads(src, strict=False), None
    except json.JSONDecodeError as exc:
        why = f"{exc.msg} at character {exc.pos}"
    except RecursionError:
        return None, "it is nested too deeply"
    except ValueError:  # an integer over Python's digit limit (4300): ast would refuse it too
        return None, "a number in it has too many digits; send long numbers as strings"

    for py in (False, True):
        fixed = _TOKENS.sub(functools.partial(_fix_match, py=py), src)
        try:
            return (_plain(ast.literal_eval(fixed)) if py else json.loads(fixed)), None
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None, why


def _fix_match(m: re.Match[str], *, py: bool) -> str:
    return _fix_token(m, py)


def _fix_token(m: re.Match[str], py: bool) -> str:
    """A string: escape raw control characters. A trailing comma: drop it. true/false/null: Python's, if `py`."""
    if m.group(1):
        return m.group(1).translate(_CONTROL)
    return (_PY_WORDS[m.group(2)] if py else m.group(2)) if m.group(2) else ""


def value_at(s: str, i: int, scanned: Scan | None = None) -> tuple[Any, str | None, int, bool]:
    """Decode the value opening at s[i]: (value, why not, end, whether the block end must be searched for)."""
    if scanned is None:  # inside tags a well-formed value is the common case: try it at C speed first
        scanned = scan(s, i)
        if not scanned[2]:  # decode only the scanned extent: a JSON error counts lines from the start of
            try:  # the text it is given, which made many failed values quadratic in the reply's length
                value, used = _DECODER.raw_decode(s[i : scanned[0]])
                if used == scanned[0] - i:
                    return value, None, scanned[0], False
            except (ValueError, RecursionError):
                pass
    end, owed, state = scanned
    if state == "string":
        return None, "it was cut off inside a string, so it cannot be completed", end, True
    if state == "mismatch":
        return None, f"a closing bracket at character {end - i} does not match its opening bracket", end, True
    src = s[i:end]
    if state == "cut":  # cut after a complete value: close what is still open
        src = src.rstrip().removesuffix(",").rstrip() + "".join(reversed(owed))
    value, why = decode(src)
    return value, (f"it was cut off before it ended ({why})" if why and state else why), end, False
