"""`hermes-local mcp list`: the configured MCP servers, whether they start, and how many tools they offer.

Thin: starts the servers of `[mcp.servers.NAME]` the way a run does (`tools.mcp.McpManager`), prints
one line per server, stops them. `app.py` mounts `mcp_app`. Does not change configuration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from hermes_local.config import config_file, load_settings
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.textsafe import terminal_safe

mcp_app = typer.Typer(help="MCP servers configured under [mcp.servers.NAME] in config.toml.", no_args_is_help=True)


@mcp_app.command("list")
def mcp_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Start each configured server once and show its status and tool count (then stop them); exit 1 if one fails."""
    from hermes_local.tools.mcp import McpManager

    settings = load_settings()
    if not settings.mcp.servers:
        if as_json:
            typer.echo("[]")
        else:
            typer.echo(f"(no MCP servers configured; add [mcp.servers.NAME] with command or url to {config_file()})")
        return
    manager = McpManager(
        settings.mcp.servers,
        allow_hosts=list(settings.allow_hosts),
        sandbox=SandboxPolicy.from_settings(settings),
        workspace=Path.cwd(),
    )
    try:
        manager.start()
        rows = []
        for server in manager.servers.values():
            offered = server.as_tools() if server.status == "running" else []
            target = server.config.url or " ".join([server.config.command or "", *server.config.args])
            rows.append(
                {
                    "name": server.name,
                    "transport": server.transport,
                    "target": target,
                    "status": server.status,
                    "tools": len(offered),
                    "tool_names": [t.name for t in offered],
                    "error": server.error or None,
                }
            )
    finally:
        manager.close()
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        _print_rows(rows)
    if any(row["status"] != "running" for row in rows):
        raise typer.Exit(1)  # a script can tell that a configured server does not work


def _print_rows(rows: list[dict]) -> None:
    for row in rows:
        typer.echo(
            terminal_safe(
                f"{row['name']:12} {row['status']:8} {row['tools']:3} tools  {row['transport']:5} {row['target']}"
            )
        )
        if row["error"]:
            typer.echo(terminal_safe(f"    {row['error']}"))
