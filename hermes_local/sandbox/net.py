"""The offline rule: which hosts the agent may reach at run time without the user's say-so.

Loopback (`localhost`, 127.0.0.0/8, ::1) is always local; any other host must be allow-listed by the
user (`allow_hosts`, `--allow-host`). A DNS name is never taken for loopback. Engines, MCP servers and
`serve` ask here; nothing here opens a connection.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection

__all__ = ["host_allowed", "is_loopback"]


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback IP address (127.0.0.0/8, ::1); a DNS name is never loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_allowed(host: str, allow_hosts: Collection[str]) -> bool:
    """Whether the offline rule lets the agent talk to `host`: loopback, or a host the user allow-listed."""
    return is_loopback(host) or host in allow_hosts
