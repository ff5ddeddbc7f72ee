"""What a tool says about itself for the parts that reason about tools without running them: its `Traits`.

The agent loop, routing and the answer guard need to know a few things about a tool beyond its schema and
permission (`tools/registry.py`): whether calling it ends the run, ... Each built-in declares its own traits
on its `@tool(traits=...)`, so no list of tool names is kept anywhere else. Does not run tools or decide
anything itself: the readers do.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Traits:
    """A tool's declared traits; a tool module's or MCP server's tool has none (the defaults)."""

    # Calling it ends the run with its argument as the answer (`final_answer`): routing always keeps it.
    ends_run: bool = False
