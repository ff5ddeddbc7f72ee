"""Tools the agent can call, in four rooms: the framework here (`@tool` and the registry, the traits a tool
declares, approval, execution, limits, the result cache, toolsets), the built-ins in `builtin/` (one module per
family), MCP servers in `mcp/`, and what tools do to the workspace in `effects/` (confinement, checkpoints, undo).

`default_registry()` is the built-ins in their order. Receives its asker and notice sink from the caller; calls no
model and writes to no terminal.
"""

from hermes_local.outcome import ToolResult
from hermes_local.tools.approval import Approver
from hermes_local.tools.execution import Executor
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, ToolRegistry, tool

__all__ = [
    "Approver",
    "Executor",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolRegistry",
    "ToolResult",
    "default_registry",
    "tool",
]


def default_registry() -> ToolRegistry:
    """A registry of the built-in tools (`builtin.BUILTIN_TOOLS`), in their order."""
    from hermes_local.tools.builtin import BUILTIN_TOOLS

    return ToolRegistry(BUILTIN_TOOLS)
