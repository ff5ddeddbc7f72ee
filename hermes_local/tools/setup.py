"""A run's tool side from its settings: the `ToolContext` its tools see and the `Executor` that runs their calls.

`tool_context` gives the tools the pinned workspace, the database, allowed hosts, limits, the command sandbox and
the long-term store; `build_executor` wraps the registry in the settings' approval policy (allow/deny lists,
content provenance, files that run code later, the sandbox/checkpoint note), the result cache and, for a logged
session, the checkpoint recorder. Used by `runtime` (every run) and `sessions apply`. Does not choose tools
(`toolsets.py`) or build the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hermes_local.config import Settings, home_dir
from hermes_local.sandbox import procs
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.tools.approval import Approver
from hermes_local.tools.cache import ResultCache
from hermes_local.tools.effects.snapshot import open_recorder, shell_notes
from hermes_local.tools.execution import Executor
from hermes_local.tools.permissions import Permissions
from hermes_local.tools.registry import FactStore, ToolContext, ToolRegistry


def tool_context(
    settings: Settings,
    pin: PinnedWorkspace,
    longterm: FactStore,
    *,
    db_path: Path | None = None,
    n_ctx: int = 8000,
    on_notice: Callable[[str], None] | None = None,
) -> ToolContext:
    """What the tools of a run may know: the pinned workspace (every tool reaches it through its fd), the
    database, allowed hosts, limits, the command sandbox and the long-term store `remember` writes through."""
    procs.install_signal_handlers()  # Ctrl-C / SIGTERM kill every live command first (main thread only)
    return ToolContext(
        workspace=pin.path,
        pin=pin,
        db_path=db_path,
        allow_hosts=list(settings.allow_hosts),
        output_cap=max(1000, min(8000, n_ctx)),
        timeout=settings.tool_timeout,
        notice=on_notice,
        sandbox=SandboxPolicy.from_settings(settings),
        longterm=longterm,
    )


def build_executor(
    settings: Settings, registry: ToolRegistry, context: ToolContext, approver: Approver | None, *, plan: bool = False,
    session_id: str | None = None) -> Executor:  # fmt: skip
    """The executor of a run (`plan`: plan-only; `session_id`: checkpointed) or of `sessions apply`, with the settings'
    approval policy: allow/deny lists, content provenance, files that run code later, the sandbox/checkpoint note."""
    approver = approver or Approver(allow=settings.allow_tools, deny=settings.deny_tools)
    approver.trust_content = approver.trust_content or settings.trust_content
    approver.execute_later = list(settings.execute_later_files)
    configured = Permissions.from_lists(**settings.permissions.model_dump())  # [permissions]: path-scoped rules
    approver.rules.extend(r for r in configured.rules if r not in approver.rules.rules)  # a seat reusing it: once
    recorder = open_recorder(session_id, context, settings.checkpoint_max_mb)
    approver.notes = lambda t: shell_notes(context.sandbox, recorder) if t.traits.sandboxed else ""
    cache = ResultCache(ttl=dict(settings.cache_ttl), store=home_dir() / "cache")
    return Executor(registry=registry, context=context, approver=approver, cache=cache, plan=plan, checkpoints=recorder)
