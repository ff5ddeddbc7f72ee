"""A run's tools and its team: the registry built from the settings, the long-term store, the team's checks and the
router at the front of a `--team` run.

`build_registry` gathers the built-ins, `remember`, `--tools-module` tools and the configured MCP servers (started
here, stopped when the registry closes). `check_team` refuses a profile that names a missing tool, toolset, model or
dialect before any model loads; `role_catalog` is what a router model chooses toolsets among. Used by `run.py` (every
run) and by the commands that list tools or profiles. Does not build the agent or print.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_local.agent.team import Role, apply_profile
from hermes_local.config import Settings
from hermes_local.engines import load_embedder
from hermes_local.errors import UserError
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.tools import ToolRegistry, default_registry
from hermes_local.tools.modules import load_tools_module
from hermes_local.tools.registry import tool_warnings
from hermes_local.tools.toolsets import router_catalog, usable_tools

if TYPE_CHECKING:
    from hermes_local.longterm import LongTermMemory, Scope


def build_registry(
    tools_modules: Iterable[str] = (),
    settings: Settings | None = None,
    *,
    on_notice: Callable[[str], None] | None = None,
    workspace: Path | PinnedWorkspace | None = None,
) -> ToolRegistry:
    """Built-ins, `remember`, `--tools-module` tools and (with `settings`) the MCP servers' tools, with sources.

    MCP servers start here, once for the run; `registry.close()` (called by `Agent.close()`) stops them.
    A server that fails to start is one `on_notice` line and its tools are left out. Stdio servers run in
    the command sandbox (`settings.sandbox`), in their `cwd` or else `workspace` (through its fd when pinned).
    """
    from hermes_local.longterm import LONGTERM_TOOLS

    registry = default_registry()
    for t in LONGTERM_TOOLS:
        registry.register(t)
    for spec in tools_modules:
        for t in load_tools_module(spec):
            registry.register(t, source=f"module:{spec}")
            for warning in tool_warnings(t):  # a user's tool: its name and description
                if on_notice is not None:
                    on_notice(f"warning: {warning}")
    if settings is not None and settings.mcp.servers:
        from hermes_local.tools.mcp import McpManager

        manager = McpManager(
            settings.mcp.servers,
            allow_hosts=list(settings.allow_hosts),
            on_notice=on_notice,
            sandbox=SandboxPolicy.from_settings(settings),
            workspace=workspace,
            # a server that fails to start, or later crashes for good: logged by the agent as McpServerFailed
            on_down=lambda name, error: registry.failed_sources.__setitem__(f"mcp:{name}", error),
        )
        registry.add_closer(manager.close)
        try:
            for t, source in manager.tools():
                registry.register(t, source=source)
        except BaseException:
            registry.close()
            raise
    return registry


def memory_store(
    settings: Settings,
    path: Path | None = None,
    *,
    owner: str = "",
    workspace: Path | PinnedWorkspace | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> LongTermMemory:
    """The long-term memory of `owner` ("" : the local user) in `workspace` (`path`, default memory.db in the
    home), scoped as the settings say (`memory_scope`), with the embedding model they find (`longterm.open_memory`)."""
    from hermes_local.longterm import open_memory

    return open_memory(settings, load_embedder, path, memory_scope(settings, owner, workspace), on_notice)


def memory_scope(settings: Settings, owner: str = "", workspace: Path | PinnedWorkspace | None = None) -> Scope:
    """Whose memory a run uses: its owner ("": the local user) and its workspace's identity (a pinned folder's
    device and inode with its path; a path's own when not pinned)."""
    from hermes_local.longterm import LOCAL_OWNER, Scope, workspace_identity

    if isinstance(workspace, PinnedWorkspace):
        place = workspace_identity(workspace.path, workspace.dev, workspace.ino)
    else:
        place = workspace_identity(workspace)
    return Scope(owner or LOCAL_OWNER, place, wide=settings.memory_scope == "user")


def role_catalog(
    settings: Settings, tools: ToolRegistry, chosen: str, *, db: bool, person: bool = False
) -> dict[str, str]:
    """The toolsets (name -> what they hold) a team's `chosen` role (a profile or "manager") would see of `tools` in
    a run (`db`: a database given, `person`: someone to ask): what a router model chooses among."""
    own, _ = apply_profile(settings, Role(chosen if chosen in settings.agents else None), None)
    hosts = bool(own.allow_hosts)
    return router_catalog(usable_tools(tools, own.tools, own.deny_tools, db=db, hosts=hosts, person=person))


def check_team(registry: ToolRegistry, settings: Settings) -> None:
    """One line (exit 2) for an [agents.NAME] profile naming a missing tool, toolset, model or dialect, or a missing
    `router_model`, for `agents list`, `run` and `serve` before the model loads."""
    from hermes_local.dialects import get_dialect
    from hermes_local.models.registry import check_profile_models
    from hermes_local.tools.builtin.delegate import check_profiles

    check_profiles(registry, settings)
    check_profile_models(settings)
    for name, profile in settings.agents.items():
        try:
            get_dialect(profile.dialect) if profile.dialect else None
        except UserError as exc:
            raise UserError(f"[agents.{name}] dialect: {exc.line}; fix it in config.toml") from exc
