"""The `hermes-local` command (typer). Thin: parse flags, build through `runtime`, print.

User mistakes end with one line on stderr naming the fix and exit code 2; no tracebacks.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hermes_local.cache_commands import cache_app
from hermes_local.cli_common import (
    AllowHostOpt,
    AllowOpt,
    DbOpt,
    GpuOpt,
    HermesGroup,
    ModelOpt,
    NCtxOpt,
    NoPromptCacheOpt,
    ToolsModuleOpt,
    WorkspaceOpt,
    YesOpt,
    fail,
)
from hermes_local.config import load_settings
from hermes_local.errors import HermesError
from hermes_local.eval_commands import eval_command, sessions_export, workflow_app
from hermes_local.model_commands import doctor, models_app

app = typer.Typer(
    help="A local, offline task agent on llama.cpp (Hermes 2 Pro tool calling).\n\n"
    'Example: hermes-local run "What time is it? Note it in my memo."',
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=HermesGroup,
)
tools_app = typer.Typer(help="Inspect the tools the agent can call.", no_args_is_help=True)
sessions_app = typer.Typer(help="Recorded runs under $HERMES_LOCAL_HOME/sessions.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(models_app, name="models")
memory_app = typer.Typer(help="Long-term memory: facts kept across sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
app.add_typer(memory_app, name="memory")
app.command()(doctor)
app.add_typer(workflow_app, name="workflow")
app.add_typer(cache_app, name="cache")
app.command("eval")(eval_command)
sessions_app.command("export")(sessions_export)


class TerminalPrinter:
    """Shows agent events on stderr as they happen: streamed tokens, then the `sessions show` lines."""

    SHOWN_LIVE = frozenset({"step_start", "llm_call", "tool_call", "tool_result", "compaction"})

    def __init__(self, stream_tokens: bool) -> None:
        self.stream_tokens = stream_tokens
        self.mid_line = False

    def __call__(self, kind: str, payload: dict[str, Any]) -> None:
        from hermes_local.session import describe_event

        if kind == "token":
            if self.stream_tokens:
                sys.stderr.write(payload["text"])
                self.mid_line = True
        elif kind in self.SHOWN_LIVE:
            line = describe_event({"kind": kind, **payload})
            sys.stderr.write(("\n" if self.mid_line else "") + f"{line}\n")
            self.mid_line = False
        sys.stderr.flush()


def _floats(text: str | None, flag: str) -> list[float] | None:
    if not text:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        fail(f"{flag} takes numbers separated by commas, e.g. 0.6,0.4")
    return None


def _prepare(
    overrides: dict[str, Any],
    *,
    workspace: Path,
    yes: bool,
    allow: list[str] | None,
    tools_module: list[str] | None,
    db: Path | None,
    allow_host: list[str] | None,
    as_json: bool,
    session_id: str | None = None,
):
    """Settings, model, session log and agent for run/chat; user mistakes exit 2 with one line."""
    from hermes_local.runtime import build_agent, build_registry, load_llm
    from hermes_local.session import SessionLog
    from hermes_local.tools import Approver

    settings = load_settings(overrides)
    settings = settings.model_copy(update={"allow_hosts": [*settings.allow_hosts, *(allow_host or [])]})
    registry = build_registry(tools_module or [])
    llm = load_llm(settings, on_info=None if as_json else lambda line: typer.echo(line, err=True))
    approver = Approver(approve_all=yes, allow=[*settings.allow_tools, *(allow or [])], deny=settings.deny_tools)
    session = SessionLog(session_id)
    printer = TerminalPrinter(stream_tokens=not as_json and sys.stderr.isatty())

    def on_event(kind: str, payload: dict[str, Any]) -> None:
        session.log(kind, payload)
        if not as_json:
            printer(kind, payload)

    agent = build_agent(
        llm, settings, workspace=workspace, registry=registry, approver=approver, on_event=on_event, db_path=db
    )
    return llm, agent, session


RUN_EXAMPLES = (
    "Examples:\n\n"
    'hermes-local run "What time is it? Note it in my memo."\n\n'
    'hermes-local run "Summarise notes.txt into report.md" --workspace ~/work --allow write_file\n\n'
    'hermes-local run "Top 5 customers by revenue" --db shop.sqlite --model hermes-2-pro-llama-3 --n-gpu-layers -1\n\n'
    "hermes-local run --resume 20261130-101500-abc123"
)


@app.command(epilog=RUN_EXAMPLES)
def run(
    task: Annotated[str | None, typer.Argument(help="What the agent should do, in plain words.")] = None,
    model: ModelOpt = None,
    max_steps: Annotated[int | None, typer.Option(help="Most model calls before stopping (default 8).")] = None,
    n_ctx: NCtxOpt = None,
    n_gpu_layers: GpuOpt = None,
    main_gpu: Annotated[int | None, typer.Option(help="GPU that holds the model (with one GPU: 0).")] = None,
    tensor_split: Annotated[
        str | None, typer.Option(help="Share of the model per GPU, e.g. 0.6,0.4 (several GPUs).")
    ] = None,
    rpc_servers: Annotated[
        str | None, typer.Option(help="llama.cpp RPC backends host:port,host:port (passed through).")
    ] = None,
    workspace: WorkspaceOpt = Path("."),
    tool_choice: Annotated[
        str | None, typer.Option(help="auto: model decides; required: every step calls a tool; none: no tools.")
    ] = None,
    no_grammar: Annotated[
        bool, typer.Option("--no-grammar", help="Do not constrain tool calls with a grammar.")
    ] = False,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default 0.2).")] = None,
    no_prompt_cache: NoPromptCacheOpt = False,
    yes: YesOpt = False,
    allow: AllowOpt = None,
    tools_module: ToolsModuleOpt = None,
    db: DbOpt = None,
    allow_host: AllowHostOpt = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue session ID (see `sessions list`); completed calls are not re-run.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with the result.")] = False,
) -> None:
    """Run the agent on TASK until it answers or reaches --max-steps (or continue one with --resume ID)."""
    from hermes_local.session import read_events, session_path

    if (task is None) == (resume is None):
        fail("give a TASK, or --resume ID to continue a session (not both)")
    events = []
    if resume:
        events = read_events(session_path(resume))
        if not any(e.get("kind") == "run_start" for e in events):
            fail(f"session {resume} has no recorded start; it cannot be resumed")
    overrides = dict(
        model=model,
        max_steps=max_steps,
        n_ctx=n_ctx,
        n_gpu_layers=n_gpu_layers,
        main_gpu=main_gpu,
        tensor_split=_floats(tensor_split, "--tensor-split"),
        rpc_servers=rpc_servers,
        tool_choice=tool_choice,
        temperature=temperature,
        grammar=False if no_grammar else None,
        prompt_cache=False if no_prompt_cache else None,
    )
    llm, agent, session = _prepare(
        overrides,
        workspace=workspace,
        yes=yes,
        allow=allow,
        tools_module=tools_module,
        db=db,
        allow_host=allow_host,
        as_json=as_json,
        session_id=resume,
    )
    try:
        result = agent.resume(events) if resume else agent.run(task or "")
    except KeyboardInterrupt:
        fail(f"interrupted; continue with: hermes-local run --resume {session.id}", 130)
    result.session_id = session.id
    session.close()
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        typer.echo(result.answer if result.answer is not None else f"(no answer: stopped at {result.stopped})")
        if result.error:
            typer.echo(f"stopped: {result.error}", err=True)
    leftover = getattr(llm, "remaining", 0)
    if leftover:
        fail(f"the replay file has {leftover} unused output(s); the run diverged from the recording", 1)
    if result.stopped == "error":
        raise typer.Exit(1)


@app.command()
def chat(
    model: ModelOpt = None,
    n_ctx: NCtxOpt = None,
    n_gpu_layers: GpuOpt = None,
    workspace: WorkspaceOpt = Path("."),
    yes: YesOpt = False,
    allow: AllowOpt = None,
    tools_module: ToolsModuleOpt = None,
    db: DbOpt = None,
) -> None:
    """Interactive multi-turn chat with tools. /reset starts over, /exit (or Ctrl-D) quits."""
    overrides = dict(model=model, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers)
    llm, agent, session = _prepare(
        overrides,
        workspace=workspace,
        yes=yes,
        allow=allow,
        tools_module=tools_module,
        db=db,
        allow_host=None,
        as_json=False,
    )
    memory = None
    typer.echo(f"hermes-local chat on {llm.description} (session {session.id}); /reset, /exit", err=True)
    while True:
        typer.echo("you> ", nl=False, err=True)
        line = sys.stdin.readline()
        if not line or line.strip() == "/exit":
            break
        message = line.strip()
        if not message:
            continue
        if message == "/reset":
            memory = None
            typer.echo("(history cleared)", err=True)
            continue
        try:
            memory, result = agent.chat(memory, message)
        except KeyboardInterrupt:
            typer.echo("\n(interrupted)", err=True)
            continue
        typer.echo(result.answer if result.answer is not None else f"(no answer: {result.error or result.stopped})")
    session.close()


@tools_app.command("list")
def tools_list(
    tools_module: Annotated[list[str] | None, typer.Option(help="Also load @tool functions from here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON schemas.")] = False,
) -> None:
    """Show every tool with its permission level and arguments."""
    from hermes_local.runtime import build_registry

    registry = build_registry(tools_module or [])
    if as_json:
        typer.echo(json.dumps([t.schema() | {"permission": t.permission} for t in registry], indent=2))
        return
    for t in registry:
        props = t.parameters_schema().get("properties", {})
        required = set(t.parameters_schema().get("required", []))
        args = ", ".join(f"{p}: {s.get('type', 'any')}{'' if p in required else '?'}" for p, s in props.items())
        typer.echo(f"{t.name}({args})  [{t.permission}]  {t.description}")


@sessions_app.command("list")
def sessions_list() -> None:
    """List recorded sessions, oldest first."""
    from hermes_local.session import list_sessions

    for info in list_sessions():
        typer.echo(f"{info.id}  {info.stopped or 'unfinished':10}  {info.events:4} events  {info.goal[:60]}")


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="A session ID from `sessions list`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw events as JSON lines.")] = False,
) -> None:
    """Show what happened in a session: steps, tool calls, results, the answer."""
    from hermes_local.session import describe_events, read_events, session_path

    events = read_events(session_path(session_id))
    for line in (json.dumps(e, ensure_ascii=False) for e in events) if as_json else describe_events(events):
        typer.echo(line)


@memory_app.command("list")
def memory_list() -> None:
    """Facts remembered across sessions (written by the `remember` tool)."""
    from hermes_local.longterm import LongTermMemory

    facts = LongTermMemory().all()
    if not facts:
        typer.echo("(nothing remembered yet)")
    for fact in facts:
        typer.echo(f"{fact.id:4}  {fact.text}")


@memory_app.command("forget")
def memory_forget(fact_id: Annotated[int, typer.Argument(help="The number shown by `memory list`.")]) -> None:
    """Delete one remembered fact."""
    from hermes_local.longterm import LongTermMemory

    if not LongTermMemory().forget(fact_id):
        fail(f"no remembered fact {fact_id}; see `hermes-local memory list`")
    typer.echo(f"forgot {fact_id}")


def force_hub_offline(argv: list[str]) -> None:
    """Only `models download` may reach the hub; everything else runs with huggingface-hub offline.

    `doctor` is left alone so that it reports the user's own HF_HUB_OFFLINE setting (it never downloads).
    """
    if argv[:2] != ["models", "download"] and argv[:1] != ["doctor"]:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    force_hub_offline(sys.argv[1:])
    try:
        app()
    except HermesError as exc:  # raised outside a command (the group maps those inside)
        typer.echo(f"error: {exc.line}", err=True)
        sys.exit(exc.exit_code)
