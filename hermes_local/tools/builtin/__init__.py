"""The built-in tools, one module per family, and `BUILTIN_TOOLS`, the registry's built-ins in their order.

Families: `clock.py` (`get_current_time`), `files.py` (`read_file`, `list_dir`, `write_file`), `memory.py`
(`append_to_memo`), `database.py` (`query_database`), `shell.py` (`run_shell`), `web.py` (`http_get`),
`interaction.py` (`ask_user`, `final_answer`) and `delegate.py` (a team's `delegate`, built per run). Names and
argument names are public interface (see the README). Each tool declares its own traits (`tools/traits.py`: its
toolset, what a run must give it, the goal words that call for it, what it does to a file, ...), so adding a tool
to a family is its module (the tool and its place in the family's `TOOLS`) and its test. `file_effect` reads what a
built-in call does to a file (a plan's diff, a verdict). Each function only does its own job inside the workspace
from `ToolContext`; validation, approval, timeouts and output caps happen in `tools/execution.py`.
"""

from __future__ import annotations

from typing import Any

from hermes_local.tools.builtin import clock, database, files, interaction, memory, shell, web
from hermes_local.tools.registry import Tool
from hermes_local.tools.traits import FileEffect

__all__ = ["BUILTIN_TOOLS", "file_effect"]

# Each family's `TOOLS`, families in this order: a tool joins the registry by being in its family's list.
BUILTIN_TOOLS: list[Tool] = [
    *clock.TOOLS,
    *files.TOOLS,
    *memory.TOOLS,
    *database.TOOLS,
    *shell.TOOLS,
    *web.TOOLS,
    *interaction.TOOLS,
]

_BY_NAME = {t.name: t for t in BUILTIN_TOOLS}


def file_effect(name: str, arguments: dict[str, Any]) -> FileEffect | None:
    """What a call of the built-in `name` does to a workspace file, from its arguments (None: no file it names)."""
    t = _BY_NAME.get(name)
    return t.traits.file_effect(arguments) if t is not None and t.traits.file_effect is not None else None
