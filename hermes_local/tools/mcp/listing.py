"""What hermes-local takes from an MCP server's listing: its tools' names and schemas, and the SDK's log lines.

`listed_tools` keeps the server tools a run may use: those `tools = [...]` allows, one per name (a name
listed twice keeps the first, with one warning), and only those whose schema passes `schemas.check_schema`
(the others are one warning each naming the tool; the run goes on). `quiet_sdk_logs` sends the mcp SDK's log
records (a server printing non-JSON lines on stdout, ...) to the run's notice sink as one line each, once per
message, instead of tracebacks on the terminal. `network_of` and `network_warnings` say plainly what network a
server reaches: a sandboxed stdio server none, or with `full_network = true` the whole network (bwrap shares the
network or none; it cannot filter hosts). Does not
check schemas itself (`tools/schemas.py`) or talk to servers (`manager.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hermes_local.tools.schemas import SchemaRefused, check_schema


def listed_tools(server: str, specs: list[Any], allowed: list[str] | None, notice: Callable[[str], None]) -> list[Any]:
    """The specs (`mcp_types.Tool`) a run registers, in listing order; each one left out is one `notice` line."""
    out, seen = [], set()
    for spec in specs:
        if allowed is not None and spec.name not in allowed:
            continue
        name = f"{server}__{spec.name}"
        if spec.name in seen:
            notice(f"MCP server {server} lists tool {spec.name} more than once; keeping the first")
            continue
        seen.add(spec.name)
        try:
            check_schema(name, spec.input_schema)
        except SchemaRefused as exc:
            notice(f"MCP server {server}: {exc}; the tool is left out")
            continue
        out.append(spec)
    return out


class _NoticeHandler(logging.Handler):
    """Forwards the mcp SDK's log records to the active runs' notice sinks: one line, no traceback, once each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.sinks: list[Callable[[str], None]] = []
        self.said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        line = " ".join(record.getMessage().split())[:200]
        if line in self.said:
            return
        self.said.add(line)
        for sink in list(self.sinks):
            try:
                sink(f"MCP: {line}")
            except Exception:  # noqa: BLE001 - a log line must never break a run
                pass


_HANDLER = _NoticeHandler()


def quiet_sdk_logs(notice: Callable[[str], None] | None) -> Callable[[], None]:
    """Route the `mcp` logger to `notice` (and never to the terminal) until the returned function is called."""
    logger = logging.getLogger("mcp")
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
        logger.propagate = False  # the root logger's last-resort handler would print the traceback
    sink = notice or (lambda line: None)
    _HANDLER.sinks.append(sink)
    _HANDLER.said.clear()

    def release() -> None:
        if sink in _HANDLER.sinks:
            _HANDLER.sinks.remove(sink)

    return release


def network_of(config: Any) -> str:
    """What network a server (`McpServerConfig`) reaches, in words for `mcp list` and the start notice."""
    if config.url:
        return "its url only"
    if not config.sandbox:
        return "FULL (sandbox = false: it runs with your rights)"
    if config.full_network:
        meant = f", meant for {', '.join(config.allow_hosts)}" if config.allow_hosts else ""
        return f"FULL (full_network = true{meant}; the host's 127.0.0.1 included)"
    return "none (sandboxed, its own loopback only)"


def network_warnings(servers: dict[str, Any]) -> list[str]:
    """One line per sandboxed stdio server (`McpServerConfig`) that has the whole network (`full_network`)."""
    return [
        f"MCP server {name}: full_network = true gives it the whole network (the host's 127.0.0.1 included)"
        + (f", not only {', '.join(c.allow_hosts)}" if c.allow_hosts else "")
        + "; the sandbox cannot allow single hosts"
        for name, c in servers.items()
        if c.command and c.sandbox and c.full_network
    ]
