"""Tools the agent can call: the registry and `@tool`, approval, execution, the built-ins, toolsets and MCP.

Receives its asker and notice sink from the caller; calls no model and writes to no terminal.
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
    from hermes_local.tools.builtin import BUILTIN_TOOLS

    return ToolRegistry(BUILTIN_TOOLS)
