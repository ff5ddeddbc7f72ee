"""`hermes-local run` and `hermes-local chat`: one task, or a conversation, through the agent.

Parses the flags, opens the run through `runtime.start_run` (the one front door), prints events as they come
(`terminal.TerminalPrinter`: thoughts dimmed unless `--quiet`) and the answer at the end, once: when
stdout is the terminal that already showed the answer streamed, it is not printed again. Holds no agent
logic; `app.py` registers these.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hermes_local.cli.common import (
    AllowHostOpt,
    AllowOpt,
    AnswerGuardOpt,
    AnswerTemperatureOpt,
    DbOpt,
    DialectOpt,
    DraftOpt,
    EngineOpt,
    EngineUrlOpt,
    GpuOpt,
    InstructionsOpt,
    ModelOpt,
    NCtxOpt,
    NoGrammarOpt,
    NoMemoryOpt,
    NoPromptCacheOpt,
    SandboxOpt,
    TemperatureOpt,
    ToolChoiceOpt,
    ToolsModuleOpt,
    ToolsOpt,
    TrustContentOpt,
    WorkspaceOpt,
    YesOpt,
    announce_shielded,
    check_paths,
    fail,
    notice,
    settings_from_flags,
)
from hermes_local.config import Settings
from hermes_local.errors import EngineError
from hermes_local.textsafe import terminal_safe

if TYPE_CHECKING:
    from hermes_local.agent.result import RunResult
    from hermes_local.cli.terminal import TerminalPrinter
    from hermes_local.runtime import RunHandle


def _start(
    settings: Settings,
    *,
    workspace: Path | None,
    yes: bool,
    tools_module: list[str] | None,
    db: Path | None,
    as_json: bool,
    printer: TerminalPrinter,
    task: str = "",
    session_id: str | None = None,
    team: bool = False,
    logged: list | None = None,
    plan: bool = False,
) -> RunHandle:
    """The run of `run` and `chat`, through the front door (`runtime.start_run`): the terminal answers approvals
    and `ask_user`, events go to the session log and the printer. User mistakes exit 2 with one line."""
    from hermes_local.cli.asker import ask_user, terminal_approver
    from hermes_local.runtime import Model, RunSpec, Sinks, start_run

    approver = terminal_approver(settings, yes=yes)
    spec = RunSpec(
        task=task,
        settings=settings,
        workspace=workspace,
        tools_modules=tools_module or [],
        approver=approver,
        ask_user=ask_user if approver.interactive else None,  # a person at the terminal can answer it
        plan=plan,  # plan-only: writes and commands become proposals
        team=team,
        logged=logged or [],
        db=db,
        session_id=session_id,  # checkpoints (`sessions diff|undo ID`); the episode long-term memory keeps names it
        on_notice=notice,
    )
    model = Model.deferred(on_info=None if as_json else lambda line: typer.echo(line, err=True))
    handle = start_run(spec, model, Sinks(display=None if as_json else printer))
    announce_shielded(handle.workspace)  # the run's first line says what of the agent's own the workspace holds
    return handle


def live_printer(*, as_json: bool = False, quiet: bool = False, verbose: bool = False) -> TerminalPrinter:
    """The progress printer: tokens streamed when stderr is a terminal (not with --json), thoughts unless
    quiet, and with `verbose` what the model wrote at each step."""
    from hermes_local.cli.terminal import TerminalPrinter

    stream = not as_json and sys.stderr.isatty()
    return TerminalPrinter(stream_tokens=stream, show_thoughts=not quiet, verbose=verbose)


def shown_once(printer: TerminalPrinter, answer: str | None) -> bool:
    """The answer was streamed on the terminal that stdout also is: printing it again would show it twice."""
    return printer.showed(answer) and sys.stdout.isatty()


QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Do not show the model's thoughts as it writes.")]

RUN_EXAMPLES = (
    "Examples:\n\n"
    'hermes-local run "What time is it? Note it in my memo."\n\n'
    'hermes-local run "Summarise notes.txt into report.md" --workspace ~/work --allow write_file\n\n'
    'hermes-local run "Top 5 customers by revenue" --db shop.sqlite'
    " --model hermes-2-pro-llama-3-8b --n-gpu-layers -1\n\n"
    "hermes-local run --resume 20261130-101500-abc123\n\n"
    'hermes-local run --plan "Tidy up notes.md"   (proposes its changes; apply with: hermes-local sessions apply ID)'
)


def run(
    words: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[TASK]", help='What the agent should do, in plain words; "-" reads it from stdin: - "INSTRUCTION"'
        ),
    ] = None,
    model: ModelOpt = None,
    engine: EngineOpt = None,
    engine_url: EngineUrlOpt = None,
    dialect: DialectOpt = None,
    max_steps: Annotated[int | None, typer.Option(help="Most model calls before stopping (default 8).")] = None,
    n_ctx: NCtxOpt = None,
    n_gpu_layers: GpuOpt = None,
    draft_model: DraftOpt = None,
    main_gpu: Annotated[int | None, typer.Option(help="GPU that holds the model (with one GPU: 0).")] = None,
    tensor_split: Annotated[
        str | None, typer.Option(help="Share of the model per GPU, e.g. 0.6,0.4 (several GPUs).")
    ] = None,
    rpc_servers: Annotated[
        str | None, typer.Option(help="llama.cpp RPC backends host:port,host:port (passed through).")
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="Folder the tools may read and write (default: here; --resume: the session's).")
    ] = None,
    tool_choice: ToolChoiceOpt = None,
    no_grammar: NoGrammarOpt = False,
    no_memory: NoMemoryOpt = False,
    temperature: TemperatureOpt = None,
    answer_temperature: AnswerTemperatureOpt = None,
    answer_guard: AnswerGuardOpt = None,
    instructions: InstructionsOpt = None,
    no_prompt_cache: NoPromptCacheOpt = False,
    yes: YesOpt = False,
    allow: AllowOpt = None,
    trust_content: TrustContentOpt = None,
    tools_module: ToolsModuleOpt = None,
    db: DbOpt = None,
    allow_host: AllowHostOpt = None,
    sandbox: SandboxOpt = None,
    tools: ToolsOpt = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue session ID (see `sessions list`); completed calls are not re-run.")
    ] = None,
    continue_id: Annotated[
        str | None,
        typer.Option(
            "--continue",
            metavar="ID",
            help='Follow a finished session ID with TASK as a new message (same memory); --continue "MESSAGE" '
            "follows this workspace's last run.",
        ),
    ] = None,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan", help="Plan only: reads run, writes and commands are proposed (apply: `sessions apply ID`)."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with the result.")] = False,
    team: Annotated[
        bool, typer.Option("--team", help="Route TASK to an [agents.NAME] specialist, or to the manager who delegates.")
    ] = False,
    quiet: QuietOpt = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show what the model wrote at each step (as `sessions show`).")
    ] = False,
) -> None:
    """Run the agent on TASK until it answers or reaches --max-steps (or continue one with --resume ID).

    TASK "-" reads the task from stdin (`- "INSTRUCTION"` puts the instruction before the piped text); --continue
    ID follows a finished session with TASK as a new message (`--continue "MESSAGE"`: this workspace's last run).
    """
    from hermes_local.cli.task_input import is_session, joined, last_run_here, task_and_events
    from hermes_local.session import delegations, recorded_dialect, session_path

    task = joined(words or [])
    if continue_id and task is None and not is_session(continue_id):  # `run --continue "and now?"`
        task, continue_id = continue_id, last_run_here(workspace or Path("."))
    task, events = task_and_events(task, resume, continue_id)
    session_id = resume or continue_id  # it goes on in the folder the session recorded (checked again by the door)
    check_paths(workspace=workspace, db=db, tools_modules=tools_module)  # before the model and any output
    if session_id and dialect is None:
        dialect = recorded_dialect(events)  # the logged turns are in that dialect; another --dialect is refused
    settings = settings_from_flags(locals())
    printer = live_printer(as_json=as_json, quiet=quiet, verbose=verbose)
    handle = _start(
        settings,
        workspace=workspace,
        yes=yes,
        tools_module=tools_module,
        db=db,
        as_json=as_json,
        printer=printer,
        task=task or "",
        session_id=session_id,
        team=team or any(e.kind == "routed" for e in events),  # a resumed team run keeps its pick
        logged=events,
        plan=plan,
    )
    session_id = handle.session_id
    try:
        with handle:
            if events:
                result = handle.resume(message=task if continue_id else None)
            else:
                result = handle.run()
            planned = handle.executor.plan  # also a resumed plan-only run
    except KeyboardInterrupt:
        fail(f"interrupted; continue with: hermes-local run --resume {session_id}", 130)
    except EngineError as exc:  # a remote engine went away mid-run: the session log is complete so far
        fail(f"{exc.line}; continue with: hermes-local run --resume {session_id}", exc.exit_code)
    if as_json:
        children = delegations(session_path(result.session_id or ""))  # a team run: each delegation's agent, child
        extra = ({"proposals": handle.proposals(result)} if planned else {}) | (
            {"delegations": children} if children else {}
        )
        typer.echo(json.dumps(result.to_json() | extra, ensure_ascii=True))
    else:
        if planned:  # the diff first: the model's words after it, labelled as its claim (nothing changed yet)
            _after_run(result, planned)
        answered = bool(result.answer and result.answer.strip())  # never a blank line on stdout
        if not answered:
            typer.echo(result.ending_line())
        elif planned:
            typer.echo("the model's claim (nothing was changed): " + terminal_safe(result.answer or ""))
        else:  # "" when this terminal already showed it streamed: end its line
            shown = "" if shown_once(printer, result.answer) else terminal_safe(result.answer or "", keep_newlines=True)
            typer.echo(shown)
        if result.error:
            typer.echo(f"stopped: {terminal_safe(result.error)}", err=True)
        typer.echo(result.outcome_line(), err=True)  # what the evidence says, whatever the model claimed
        if not planned:
            _after_run(result, planned)
    leftover = getattr(handle.model.llm if handle.model else None, "remaining", 0)
    if leftover:
        fail(f"the replay file has {leftover} unused output(s); the run diverged from the recording", 1)
    _exit_with(result.exit_code)


def _after_run(result: RunResult, planned: bool) -> None:
    """A plan-only run's proposals (diffs, the list, how to apply them); a run that gave up, its hand-off."""
    from hermes_local.agent.result import handoff_lines
    from hermes_local.cli.plan import show_plan

    if planned and result.session_id and show_plan(result.session_id):
        typer.echo(f"nothing was changed; apply these with: hermes-local sessions apply {result.session_id}", err=True)
    if result.handoff is not None:
        typer.echo("\n".join(handoff_lines(result.handoff, result.session_id)), err=True)


def _exit_with(code: int) -> None:
    """Exit with the code of how the run ended (README "Exit codes": done/answered 0, unverified 6, ...)."""
    if code:
        raise typer.Exit(code)


def chat(
    model: ModelOpt = None,
    engine: EngineOpt = None,
    engine_url: EngineUrlOpt = None,
    dialect: DialectOpt = None,
    max_steps: Annotated[int | None, typer.Option(help="Most model calls per message (default 8).")] = None,
    n_ctx: NCtxOpt = None,
    n_gpu_layers: GpuOpt = None,
    draft_model: DraftOpt = None,
    workspace: WorkspaceOpt = Path("."),
    tool_choice: ToolChoiceOpt = None,
    no_grammar: NoGrammarOpt = False,
    no_memory: NoMemoryOpt = False,
    temperature: TemperatureOpt = None,
    answer_temperature: AnswerTemperatureOpt = None,
    answer_guard: AnswerGuardOpt = None,
    instructions: InstructionsOpt = None,
    yes: YesOpt = False,
    allow: AllowOpt = None,
    trust_content: TrustContentOpt = None,
    tools_module: ToolsModuleOpt = None,
    db: DbOpt = None,
    allow_host: AllowHostOpt = None,
    sandbox: SandboxOpt = None,
    tools: ToolsOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Interactive multi-turn chat with tools. /reset starts over, /exit (or Ctrl-D) quits."""
    check_paths(workspace=workspace, db=db, tools_modules=tools_module)
    settings = settings_from_flags(locals())
    printer = live_printer(quiet=quiet)
    handle = _start(
        settings, workspace=workspace, yes=yes, tools_module=tools_module, db=db, as_json=False, printer=printer
    )
    with handle:
        _converse(handle, printer)


def _converse(handle: RunHandle, printer: TerminalPrinter) -> None:
    """The chat's loop: a line from stdin, the agent's turn, its answer; /reset and /exit."""
    memory = None
    llm = handle.model.llm if handle.model else None
    name = llm.description if llm is not None else "?"
    typer.echo(f"hermes-local chat on {name} (session {handle.session_id}); /reset, /exit", err=True)
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
            memory, result = handle.chat(memory, message)
        except KeyboardInterrupt:
            typer.echo("\n(interrupted)", err=True)
            continue
        answered = bool(result.answer and result.answer.strip())
        shown = (result.answer or "") if answered else result.ending_line()
        streamed = answered and shown_once(printer, result.answer)
        typer.echo("" if streamed else terminal_safe(shown, keep_newlines=True))
        if result.outcome not in ("done", "answered"):
            typer.echo(result.outcome_line(), err=True)
