"""The memo: `append_to_memo`, one line added to `memo.md` in the workspace (the `memory` toolset).

The line goes through the same confined write path as `write_file` (no links out, no FIFOs, no hard links;
checkpointed before the change). Long-term memory's `remember`, the other tool of the `memory` toolset (`MEMORY`),
lives with its store in `longterm/`. `memo_line` is the line a call appends, which a plan shows before it runs and
a verdict looks for after. Does not read the memo back (`read_file` does).
"""

from __future__ import annotations

import re
from typing import Any

from hermes_local.tools.effects.confined import append_line, locate
from hermes_local.tools.effects.dryrun import check_target
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool
from hermes_local.tools.traits import Cue, FileEffect, Toolset, Traits

MEMO_FILE = "memo.md"
MEMORY = Toolset("memory", "note things in memo.md or remember facts across sessions")
GOAL_WORDS = re.compile(r"\b(memo|note it|note down|jot)\b|备忘")  # call for it


def memo_line(content: str) -> str:
    """The line `append_to_memo(content)` adds: the content on one line, as a list item."""
    return f"- {' '.join(content.split())}\n"


def _appended(arguments: dict[str, Any]) -> FileEffect:
    """`append_to_memo`'s effect: its line added at the end of the memo."""
    return FileEffect(MEMO_FILE, memo_line(str(arguments.get("content", ""))), append=True)


def _valid_line(content: str) -> str:
    """The memo line's text (one line); refused when not valid text."""
    line = " ".join(content.split())
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure("invalid_arguments", "content has an invalid character (a lone surrogate).") from exc
    return line


def _dry_append(arguments: dict[str, Any], ctx: ToolContext) -> None:
    """What `append_to_memo` would refuse, checked without writing (a plan-only run's proposal check)."""
    _valid_line(str(arguments.get("content", "")))
    check_target(ctx, MEMO_FILE)


@tool(  # its result only echoes the line it appended
    permission="write",
    provenance="trusted",
    traits=Traits(
        toolset=MEMORY,
        cues=(Cue(80, GOAL_WORDS.search),),
        call_hint="call append_to_memo with the line to note",
        file_effect=_appended,
        dry_run=_dry_append,
        checkpoints_itself=True,  # through effects/confined.py's write path
    ),
)
def append_to_memo(content: str, ctx: ToolContext) -> dict:
    """Append one line to the memo file in the workspace.

    Args:
        content: The text to note down.
    """
    line = _valid_line(content)
    with locate(ctx, MEMO_FILE) as loc:  # the same confinement as write_file: no links out, no FIFOs, no hard links
        append_line(loc, f"- {line}\n")
    return {"file": MEMO_FILE, "appended": line}


TOOLS: list[Tool] = [append_to_memo]  # the family's tools, in the registry's order
