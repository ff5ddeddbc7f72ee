"""How an MCP server is reached: the argv and environment of a stdio server, the check of an HTTP url.

`stdio_parameters()` is the one place a stdio server's argv, environment and working directory are built
(the sandbox wraps it there); `check_url()` refuses a streamable-HTTP url that is not http(s) or whose host
is neither loopback nor in `allow_hosts`. Both raise `McpStartError`, one line for the user. Does not start,
talk to or stop a server (see `manager.py`), and does not convert results (see `results.py`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hermes_local.config import McpServerConfig
from hermes_local.sandbox.net import host_allowed
from hermes_local.sandbox.policy import SandboxPolicy, SandboxRefused, find_command
from hermes_local.sandbox.workspace import PinnedWorkspace, folder_of

Workspace = Path | PinnedWorkspace  # a pinned run workspace, or a folder path


class McpStartError(Exception):
    """A server that could not be started or initialized; the message is one line for the user."""


def check_url(name: str, url: str, allow_hosts: list[str]) -> None:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        raise McpStartError(f"MCP server {name}: url {url!r} is not an http(s) URL")
    if not host_allowed(host, allow_hosts):
        raise McpStartError(
            f"MCP server {name}: host {host} is neither loopback nor in allow_hosts; add it to allow_hosts to use it"
        )


def stdio_parameters(
    name: str, config: McpServerConfig, sandbox: SandboxPolicy | None = None, workspace: Workspace | None = None
) -> Any:
    """The argv, environment and working directory a stdio server is started with.

    With a sandbox policy and the server's `sandbox = true` (the default), the server runs under bwrap like
    `run_shell` (see `sandbox/policy.py`): its folder (`cwd`, else the run's workspace) read-write, or read-only for
    `permission = "read"`, folders named in its args read-only, no network (its own loopback only) unless the
    server's `full_network = true` (then the whole network, the host's 127.0.0.1 included), the filtered environment
    plus the server's own `env`, the agent's own state and code masked; a pinned workspace is used through its fd
    (`--bind-fd`, cwd `/proc/PID/fd/N`), never by its path again.
    """
    from mcp import StdioServerParameters

    command = config.command or ""
    resolved = find_command(command)
    if resolved is None:
        beside = Path(sys.executable).parent
        raise McpStartError(
            f"MCP server {name}: command {command!r} was not found beside the running Python ({beside}) or on "
            "PATH; install it into this environment or give its full path"
        )
    pin = workspace if isinstance(workspace, PinnedWorkspace) and not config.cwd else None
    folder = Path(config.cwd).expanduser() if config.cwd else folder_of(workspace)
    if sandbox is None or not config.sandbox or folder is None:
        return StdioServerParameters(
            command=resolved,
            args=list(config.args),
            env=dict(config.env) or None,  # merged over the SDK's minimal inherited environment (PATH, HOME, ...)
            cwd=config.cwd,
        )
    named_dirs = [a for a in config.args if a.startswith("/") and Path(a).is_dir() and Path(a) != folder]
    try:
        argv, env = sandbox.command(
            [resolved, *config.args],
            workspace=folder,
            writable=config.permission != "read",
            allow_network=config.full_network,
            extra_ro=named_dirs,
            pin=pin,
        )
    except SandboxRefused as exc:
        raise McpStartError(f"MCP server {name}: {exc}") from exc
    env.update(config.env)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=pin.proc_path() if pin else str(folder))
