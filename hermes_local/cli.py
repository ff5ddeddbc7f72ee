"""The `hermes-local` command (typer). Thin: parse flags, build through `runtime`, print.

User mistakes end with one line on stderr naming the fix and exit code 2; no tracebacks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hermes_local.config import UserError, load_settings
from hermes_local.model_commands import doctor, models_app

app = typer.Typer(
    help="A local, offline task agent on llama.cpp (Hermes 2 Pro tool calling).\n\n"
    'Example: hermes-local run "What time is it? Note it in my memo."',
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tools_app = typer.Typer(help="Inspect the tools the agent can call.", no_args_is_help=True)
sessions_app = typer.Typer(help="Recorded runs under $HERMES_LOCAL_HOME/sessions.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(models_app, name="models")
app.add_typer(sessions_app, name="sessions")
app.command()(doctor)


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


class TerminalPrinter:
    """Renders agent events on stderr: streamed tokens, tool calls and their results."""

    def __init__(self, stream_tokens: bool) -> None:
        self.stream_tokens = stream_tokens

    def __call__(self, kind: str, payload: dict[str, Any]) -> None:
        err = sys.stderr
        if kind == "step_start":
            err.write(f"\n── step {payload['step']} ──\n")
        elif kind == "token" and self.stream_tokens:
            err.write(payload["text"])
        elif kind == "llm_call":
            err.write(
                f"\n[{payload['prompt_tokens']} prompt tokens, {payload['prompt_tokens_evaluated']} evaluated, "
                f"{payload['completion_tokens']} generated, {payload['seconds']:.1f}s]\n"
            )
        elif kind == "tool_call":
            err.write(f"→ {payload['name']}({json.dumps(payload['arguments'], ensure_ascii=False)})\n")
        elif kind == "tool_result":
            mark = "✓" if payload.get("ok") else "✗"
            err.write(f"  {mark} {payload.get('summary', '')}\n")
        err.flush()


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the agent should do, in plain words.")],
    model: Annotated[
        str | None,
        typer.Option(help="Registry name, path to a .gguf, or replay:FILE.jsonl (default: embedded SmolLM2)."),
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Most model calls before stopping (default 8).")] = None,
    n_ctx: Annotated[int | None, typer.Option(help="Context window in tokens (default 4096).")] = None,
    n_gpu_layers: Annotated[
        int | None, typer.Option(help="Layers offloaded to the GPU; -1 = all, 0 = CPU only.")
    ] = None,
    workspace: Annotated[Path, typer.Option(help="Folder the tools may read and write.")] = Path("."),
    tool_choice: Annotated[
        str | None, typer.Option(help="auto: model decides; required: every step calls a tool; none: no tools.")
    ] = None,
    no_grammar: Annotated[
        bool, typer.Option("--no-grammar", help="Do not constrain tool calls with a grammar.")
    ] = False,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default 0.2).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve every write/dangerous tool call.")] = False,
    allow: Annotated[list[str] | None, typer.Option(help="Approve this tool without asking (repeatable).")] = None,
    tools_module: Annotated[
        list[str] | None, typer.Option(help="Load @tool functions from a .py file or module (repeatable).")
    ] = None,
    db: Annotated[Path | None, typer.Option(help="SQLite database for query_database (opened read-only).")] = None,
    allow_host: Annotated[
        list[str] | None, typer.Option(help="Host http_get may reach (repeatable; default: none, offline).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with the result.")] = False,
) -> None:
    """Run the agent on TASK until it answers or reaches --max-steps."""
    from hermes_local.runtime import build_agent, build_registry, load_llm
    from hermes_local.session import SessionLog
    from hermes_local.tools import Approver

    try:
        settings = load_settings(
            dict(
                model=model,
                max_steps=max_steps,
                n_ctx=n_ctx,
                n_gpu_layers=n_gpu_layers,
                tool_choice=tool_choice,
                temperature=temperature,
                grammar=False if no_grammar else None,
            )
        )
        registry = build_registry(tools_module or [])
        llm = load_llm(settings)
        approver = Approver(approve_all=yes, allow=[*settings.allow_tools, *(allow or [])], deny=settings.deny_tools)
        session = SessionLog()
        printer = TerminalPrinter(stream_tokens=not as_json and sys.stderr.isatty())

        def on_event(kind: str, payload: dict[str, Any]) -> None:
            session.log(kind, payload)
            if not as_json:
                printer(kind, payload)

        agent = build_agent(
            llm, settings, workspace=workspace, registry=registry, approver=approver, on_event=on_event, db_path=db
        )
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    try:
        result = agent.run(task)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except AssertionError as exc:  # a replay file that ran out of outputs
        fail(str(exc), 1)
    result.session_id = session.id
    session.close()
    leftover = getattr(llm, "remaining", 0)
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        typer.echo(result.answer if result.answer is not None else f"(no answer: stopped at {result.stopped})")
    if leftover:
        fail(f"the replay file has {leftover} unused output(s); the run diverged from the recording", 1)
    if result.stopped == "error":
        raise typer.Exit(1)


@tools_app.command("list")
def tools_list(
    tools_module: Annotated[list[str] | None, typer.Option(help="Also load @tool functions from here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON schemas.")] = False,
) -> None:
    """Show every tool with its permission level and arguments."""
    from hermes_local.runtime import build_registry

    try:
        registry = build_registry(tools_module or [])
    except UserError as exc:
        fail(str(exc), exc.exit_code)
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


def main() -> None:
    try:
        app()
    except UserError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
