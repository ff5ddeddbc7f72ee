"""The memo: `append_to_memo`, one line added to `memo.md` in the workspace (the `memory` toolset).

The line goes through the same confined write path as `write_file` (no links out, no FIFOs, no hard links;
checkpointed before the change). Long-term memory's `remember`, the other tool of the `memory` toolset, lives
with its store in `longterm/`. Does not read the memo back (`read_file` does).
"""

from __future__ import annotations

from hermes_local.tools.effects.confined import append_line, locate
from hermes_local.tools.registry import ToolContext, ToolFailure, tool

MEMO_FILE = "memo.md"


@tool(permission="write", provenance="trusted")  # its result only echoes the line it appended
def append_to_memo(content: str, ctx: ToolContext) -> dict:
    """Append one line to the memo file in the workspace.

    Args:
        content: The text to note down.
    """
    line = " ".join(content.split())
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure("invalid_arguments", "content has an invalid character (a lone surrogate).") from exc
    with locate(ctx, MEMO_FILE) as loc:  # the same confinement as write_file: no links out, no FIFOs, no hard links
        append_line(loc, f"- {line}\n")
    return {"file": MEMO_FILE, "appended": line}
