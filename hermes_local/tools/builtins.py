"""Built-in tools and `BUILTIN_TOOLS`. Names and argument names are public interface (see the README).

This module holds the two small tools (`get_current_time`, `append_to_memo`) and collects the
others from `files.py`, `database.py`, `shell.py` and `web.py`. Each function only does its own job
inside the workspace from `ToolContext`; validation, approval, timeouts and output caps happen in
`tools/execution.py`.
"""

from __future__ import annotations

from datetime import datetime

from hermes_local.tools.confined import append_line, locate
from hermes_local.tools.database import query_database
from hermes_local.tools.files import list_dir, read_file, write_file
from hermes_local.tools.interaction import ask_user
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool
from hermes_local.tools.shell import run_shell
from hermes_local.tools.web import http_get

MEMO_FILE = "memo.md"


@tool(volatile=True, provenance="trusted")  # the agent's own value
def get_current_time() -> str:
    """Get the current local date and time (ISO 8601, with timezone)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


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


BUILTIN_TOOLS: list[Tool] = [
    get_current_time,
    read_file,
    list_dir,
    write_file,
    append_to_memo,
    query_database,
    run_shell,
    http_get,
    ask_user,
]
