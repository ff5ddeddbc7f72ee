"""The built-in tools, one module per family, and `BUILTIN_TOOLS`, the registry's built-ins in their order.

Families: `clock.py` (`get_current_time`), `files.py` (`read_file`, `list_dir`, `write_file`), `memory.py`
(`append_to_memo`), `database.py` (`query_database`), `shell.py` (`run_shell`), `web.py` (`http_get`),
`interaction.py` (`ask_user`, `final_answer`) and `delegate.py` (a team's `delegate`, built per run). Names and
argument names are public interface (see the README). Each function only does its own job inside the workspace
from `ToolContext`; validation, approval, timeouts and output caps happen in `tools/execution.py`.
"""

from __future__ import annotations

from hermes_local.tools.builtin.clock import get_current_time
from hermes_local.tools.builtin.database import query_database
from hermes_local.tools.builtin.files import list_dir, read_file, write_file
from hermes_local.tools.builtin.interaction import ask_user
from hermes_local.tools.builtin.memory import append_to_memo
from hermes_local.tools.builtin.shell import run_shell
from hermes_local.tools.builtin.web import http_get
from hermes_local.tools.registry import Tool

__all__ = ["BUILTIN_TOOLS"]

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
