"""The `hermes-local serve` command: load the model once, build the run manager, run uvicorn.

Binds 127.0.0.1 by default; any other address needs a token (`--token-file FILE`, config
`serve_token_file`, `HERMES_LOCAL_SERVE_TOKEN`, or `--token`, which warns: `ps` shows it to every
local user), and with a token every request must carry `Authorization: Bearer <token>`. The guard
(`service/guard.py`) answers only Host names that are loopback, the bound address or `serve_hosts`
(`--serve-host`). The token is never printed. SIGTERM / Ctrl-C cancel
queued and running runs first (their session logs stay resumable), kill the tool processes this
server started, then stop uvicorn. The schedules (`schedule add`) run while it serves (`service/scheduler.py`).
Imports fastapi/uvicorn only when the command runs, so the rest of
the CLI works without the `serve` extra. Holds no routes (see `app.py`) and no run logic (`runs.py`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from hermes_local.cli.common import (
    AllowHostOpt,
    AllowOpt,
    DbOpt,
    DraftOpt,
    GpuOpt,
    ModelOpt,
    NCtxOpt,
    NoGrammarOpt,
    ToolsModuleOpt,
    WorkspaceOpt,
    announce_shielded,
    pin_workspace,
    settings_from_flags,
)
from hermes_local.errors import UserError
from hermes_local.sandbox.net import is_loopback
from hermes_local.service.guard import read_tokens, world_readable
from hermes_local.textsafe import terminal_safe


def serve(
    host: Annotated[str, typer.Option(help="Address to bind; anything but loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8321,
    token: Annotated[
        str | None,
        typer.Option(help="Require `Authorization: Bearer TOKEN` (visible in `ps`: prefer --token-file or the env)."),
    ] = None,
    token_file: Annotated[
        str | None,
        typer.Option(help="Read the bearer token(s) from this file, one a line (config: serve_token_file)."),
    ] = None,
    serve_host: Annotated[
        list[str] | None, typer.Option(help="Another Host name clients may use, e.g. a LAN name (repeatable).")
    ] = None,
    model: ModelOpt = None,
    n_ctx: NCtxOpt = None,
    n_gpu_layers: GpuOpt = None,
    draft_model: DraftOpt = None,
    workspace: WorkspaceOpt = Path("."),
    workspace_root: Annotated[
        list[str] | None, typer.Option(help="Another folder runs may use as workspace (repeatable).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Default most model calls per run (default 8).")] = None,
    tool_choice: Annotated[str | None, typer.Option(help="Default tool choice: auto, required or none.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default 0.2).")] = None,
    no_grammar: NoGrammarOpt = False,
    allow: AllowOpt = None,
    tools_module: ToolsModuleOpt = None,
    db: DbOpt = None,
    allow_host: AllowHostOpt = None,
    approval_timeout: Annotated[
        float | None, typer.Option(help="Seconds a call waits for approval before it is denied (default 300).")
    ] = None,
    cors_origin: Annotated[list[str] | None, typer.Option(help="Allow browser calls from this origin.")] = None,
    max_body: Annotated[int, typer.Option(help="Largest request body in bytes.")] = 1_000_000,
    parallel: Annotated[
        int | None,
        typer.Option(min=1, max=64, help="Runs at once on the one loaded model, decoded together (config: parallel)."),
    ] = None,
) -> None:
    """Serve runs, live events, approvals and an OpenAI-compatible chat endpoint over HTTP (one warm model)."""
    try:
        import uvicorn  # noqa: F401 - checked here, used by _serve

        from hermes_local.service.app import create_app  # noqa: F401
    except ImportError as exc:
        hint = f"serve needs the serve extra ({exc.name} is missing): pip install 'hermes-local[serve]'"
        raise UserError(hint) from exc
    from hermes_local.runtime import build_registry, check_team

    settings = settings_from_flags(locals())
    if token:
        typer.echo("warning: --token is visible to every local user in `ps`; use --token-file FILE or "
                   "HERMES_LOCAL_SERVE_TOKEN instead", err=True)  # fmt: skip
    tokens = [t for t in (settings.serve_token,) if t]
    if settings.serve_token_file:
        tokens += read_tokens(settings.serve_token_file)
        if world_readable(settings.serve_token_file):
            typer.echo(f"warning: token file {settings.serve_token_file} is readable by others; chmod 600 it", err=True)
    if not is_loopback(host) and not tokens:
        raise UserError(f"binding {host} exposes the agent to the network; pass --token-file FILE (or set serve_token)")
    pin = pin_workspace(workspace)  # the MCP servers' folder, through its fd
    try:
        registry = build_registry(  # MCP servers start once for the service and stop with it
            tools_module or [],
            settings,
            on_notice=lambda line: typer.echo(terminal_safe(line), err=True),
            workspace=pin,
        )
        announce_shielded(pin)
        try:
            check_team(registry, settings)  # [agents.NAME] profiles: one line before the model loads
            _serve(settings, registry, tokens, host, port, workspace, db, max_body)
        finally:
            registry.close()
    finally:
        pin.close()


def _serve(
    settings: Any,
    registry: Any,
    tokens: list[str],
    host: str,
    port: int,
    workspace: Path,
    db: Path | None,
    max_body: int,
) -> None:
    """Load the model once, check its vocabulary for the dialect, and run uvicorn until stopped."""
    import uvicorn

    from hermes_local.runtime import dialect_for, find_model, load_llm
    from hermes_local.service.app import create_app
    from hermes_local.service.process import SharedModel
    from hermes_local.service.runs import RunManager
    from hermes_local.service.scheduler import Scheduler

    source = find_model(settings)
    llm = load_llm(settings, on_info=lambda line: typer.echo(line, err=True), source=source)
    dialect = dialect_for(settings, llm, source, check=True)  # a vocabulary without its framing tokens: exit 2
    manager = RunManager(
        SharedModel(llm),
        settings,
        registry=registry,
        workspace=workspace,
        db_path=db,
        approval_timeout=settings.approval_timeout,
        kill_children=True,
        dialect=dialect,  # every run and the chat endpoint speak the format checked here
    )
    app = create_app(
        manager,
        tokens=tokens,
        hosts=[*settings.serve_hosts, host],  # the bound address is this server's own name too
        max_body=max_body,
        cors_origins=settings.cors_origins,
        use_grammar=settings.grammar,
        dialect=dialect,
    )

    scheduler = Scheduler(manager, on_line=lambda line: typer.echo(terminal_safe(line), err=True))
    threading.Thread(target=scheduler.run_forever, name="hermes-schedules", daemon=True).start()  # `schedule add`

    class Server(uvicorn.Server):
        """uvicorn that cancels the runs first on SIGTERM/SIGINT."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            scheduler.stopping.set()
            # Finish the runs first, so open event streams end and uvicorn can stop.
            threading.Thread(target=manager.shutdown, name="hermes-shutdown", daemon=True).start()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=15)
    typer.echo(
        f"hermes-local serve on http://{host}:{port} (the page: http://{host}:{port}/; model {llm.description}, "
        f"workspace {workspace.resolve()})",
        err=True,
    )
    Server(config).run()
