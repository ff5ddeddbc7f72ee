"""Text that is safe to show on a terminal: no raw control, escape or bidi characters.

`terminal_safe` escapes C0/C1 controls (ESC included), DEL, bidi overrides and isolates, zero-width
and other format characters, line/paragraph separators and lone surrogates as visible `\\xNN` /
`\\uNNNN` escapes, keeping ordinary newlines and tabs only when asked. `collapse_runs` shows long runs
of whitespace as a visible marker so padding cannot push text out of view. Used by every printer
(live progress, `sessions show`, `memory list`, streamed tokens, approval prompts). Does not print.
"""

from __future__ import annotations

import re
import unicodedata

_SURROGATE = re.compile("[\ud800-\udfff]")
_BIDI_AND_SEPARATORS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029\u0085\ufeff"
)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(ch: str, keep_newlines: bool) -> bool:
    if ch in "\n\t":
        return not keep_newlines
    if ch in _BIDI_AND_SEPARATORS:
        return True
    category = unicodedata.category(ch)
    return category in ("Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn") and ch != " "


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control/format/bidi character (and lone surrogate) shown as an escape."""
    if text.isprintable() and (keep_newlines or "\n" not in text):
        return text
    return "".join(_escape(ch) if _unsafe(ch, keep_newlines) else ch for ch in text)


def scrub_surrogates(text: str) -> str:
    """`text` with lone surrogates (from non-UTF-8 bytes or `\\ud800` escapes) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


# Whitespace other than newlines, plus characters that render blank (Hangul fillers, braille blank).
_BLANK = "\u115f\u1160\u3164\uffa0\u2800\u180e\u200b"
_RUN = re.compile(rf"(?:[^\S\n]|[{_BLANK}]){{8,}}|\n(?:[^\S\n]*\n){{2,}}")


def collapse_runs(text: str) -> str:
    """Long runs of spaces/tabs/blank-looking characters or blank lines become a visible `⟨N spaces⟩` marker."""

    def marker(m: re.Match[str]) -> str:
        run = m.group(0)
        if run[0] == "\n":
            return f"⟨{run.count(chr(10))} line breaks⟩"
        what = "spaces" if set(run) == {" "} else "whitespace characters"
        return f"⟨{len(run)} {what}⟩"

    return _RUN.sub(marker, text)
