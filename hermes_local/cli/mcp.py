"""`hermes-local mcp list` and `mcp trust NAME`: the configured MCP servers, and accepting changed tools.

Thin: starts the servers of `[mcp.servers.NAME]` the way a run does (`tools.mcp.McpManager`), prints one line
per server and the network it reaches (tools whose definition changed since it was pinned are named: runs
leave them out), stops them. `mcp trust NAME` shows the current definition of each changed tool of server NAME
(or of the one tool NAME) and pins it, so runs use it again (`tools/mcp/pins.py`). `app.py` mounts `mcp_app`.
Does not change configuration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from hermes_local.cli.common import JsonOpt
from hermes_local.config import config_file, load_settings
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.textsafe import terminal_safe

mcp_app = typer.Typer(help="MCP servers configured under [mcp.servers.NAME] in config.toml.", no_args_is_help=True)


@mcp_app.command("list")
def mcp_list(as_json: JsonOpt = False) -> None:
    """Start each configured server once and show its status and tool count (then stop them); exit 1 if one fails."""
    from hermes_local.tools.mcp import McpManager
    from hermes_local.tools.mcp.listing import network_of

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
            changed = manager.pins.changed((t, f"mcp:{server.name}") for t in offered)
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
                    "changed": changed,
                    "network": network_of(server.config),
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
                f"  (network: {row['network']})"
            )
        )
        if row["error"]:
            typer.echo(terminal_safe(f"    {row['error']}"))
        if row["changed"]:
            names, fix = ", ".join(changed_names(row)), f"hermes-local mcp trust {row['name']}"
            typer.echo(terminal_safe(f"    changed since pinned, left out of runs: {names} (accept: {fix})"))


def changed_names(row: dict[str, object]) -> list[str]:
    value = row["changed"]
    return [str(v) for v in value] if isinstance(value, list) else []


@mcp_app.command("trust")
def mcp_trust(
    name: Annotated[str, typer.Argument(help="A configured server (all its tools) or one SERVER__TOOL.")],
) -> None:
    """Accept the current definitions of a server's tools (after reviewing them): runs use them again."""
    from hermes_local.errors import UserError
    from hermes_local.tools.mcp import McpManager

    settings = load_settings()
    server_name = name.split("__", 1)[0]
    if server_name not in settings.mcp.servers:
        known = ", ".join(settings.mcp.servers) or "none"
        raise UserError(f"no MCP server {server_name!r} in {config_file()} (configured: {known})")
    manager = McpManager(
        {server_name: settings.mcp.servers[server_name]},
        allow_hosts=list(settings.allow_hosts),
        sandbox=SandboxPolicy.from_settings(settings),
        workspace=Path.cwd(),
    )
    try:
        manager.start()
        server = manager.servers[server_name]
        if server.status != "running":
            raise UserError(f"{server.error}; it must start for its tools to be trusted")
        found = [(t, f"mcp:{server_name}") for t in server.as_tools()]
        if name != server_name and not any(t.name == name for t, _ in found):
            raise UserError(f"MCP server {server_name} has no tool {name!r}; see `hermes-local mcp list`")
        changed = set(manager.pins.changed(found))
        for t, _ in found:
            if t.name in changed and name in (server_name, t.name):
                schema = json.dumps(t.input_schema, ensure_ascii=False)
                typer.echo(terminal_safe(f"{t.name} ({t.permission}): {t.description}"))
                typer.echo(terminal_safe(f"    arguments: {schema[:2000]}"))
        accepted = manager.pins.trust(found, name)
    finally:
        manager.close()
    if accepted:
        typer.echo(f"accepted the new definition of {', '.join(accepted)}")
    else:
        typer.echo(f"nothing had changed; the current definitions of {name} are pinned")
