"""MCP servers as a tool source: `manager.py` (`McpManager`: start the servers, their tools as `Tool`s, stop them),
`launch.py` (a stdio server's argv and environment, sandboxed; an HTTP server's url), `listing.py` (which listed
tools a run keeps; the SDK's log lines), `results.py` (results as envelopes, annotations as permissions) and
`pins.py` (each tool's pinned definition; a changed one is left out until `mcp trust`). Schema safety is the
framework's (`tools/schemas.py`). Does not decide approval or which tools the model sees.
"""

from hermes_local.tools.mcp.manager import McpManager

__all__ = ["McpManager"]
