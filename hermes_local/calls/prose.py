"""The text a reply leaves for the user once its calls, thoughts and made-up turns are cut out.

`parse.py` collects the kept prose in pieces, with `HOLE` where it removed a block; `kept_text(parts)` joins
them with a newline or one space instead of a pile of blanks, and drops ChatML leftovers (`<|im_start|>`,
`<|...|>`, `</s>`; `leftovers(parts)` lists them). The reasons a part of a reply is dropped (`ParseResult.dropped`,
shown by `sessions show` and `run --verbose`) are named here. Does not find calls or thoughts (that is `parse.py`),
and changes nothing else in the text.
"""

from __future__ import annotations

import re

# Why a part of a reply was dropped: neither a call, nor a thought, nor text for the user
MADE_UP = "a tool result or turn the model wrote itself"
STRAY_TAG = "a closing tag with nothing open"
LEFTOVER = "chat markup"
CUT_OFF = "a tag cut off at the end"
OVER_LIMIT = "calls over the per-reply limit"
HOLE = "\ue000"  # marks where a block was removed, so the text around it can be joined tidily
_LEFTOVER = re.compile(r"<\|im_start\|>(?:[a-z]+\n)?|<\|[a-z_]+\|>|</s>", re.I)
_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*\n")


def leftovers(parts: list[str]) -> list[str]:
    """The ChatML leftovers `kept_text` removes from these parts, in order."""
    return _LEFTOVER.findall("".join(parts))


def kept_text(parts: list[str]) -> str:
    """Join the kept text; where a block was removed, join with a newline or one space, not a pile of blanks."""
    pieces = [piece.strip(" \t") for piece in _LEFTOVER.sub(HOLE, "".join(parts)).split(HOLE)]
    out: list[str] = []
    for piece in filter(None, pieces):
        if out and out[-1].endswith("\n") and piece.startswith("\n"):
            piece = piece[1:]
        elif out and not (out[-1].endswith("\n") or piece.startswith("\n")):
            out.append(" ")
        out.append(piece)
    return _BLANK_LINES.sub("\n\n", "".join(out)).strip()
