"""The clock: `get_current_time`, the local date and time (the `time` toolset).

The agent's own value, so its result is trusted; volatile, so it is never served from a cache. Does not
format dates for the model beyond ISO 8601.
"""

from __future__ import annotations

from datetime import datetime

from hermes_local.tools.registry import tool


@tool(volatile=True, provenance="trusted")  # the agent's own value
def get_current_time() -> str:
    """Get the current local date and time (ISO 8601, with timezone)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")
