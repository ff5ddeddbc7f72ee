"""`hermes-local schedule add|list|remove|run-now|daemon`: unattended runs at cron times.

`add NAME --cron "0 8 * * 1-5" TASK|WORKFLOW.toml [--workspace DIR] [--allow TOOL]... [--max-steps N]
[--tool-choice X] [--instructions TEXT|@FILE] [--db FILE] [--var NAME=VALUE]...` writes the schedule under
`$HERMES_LOCAL_HOME/schedules/` (a workflow file is checked now and kept by its absolute path); `list [--json]`
shows each one with its next time and last outcome (and each broken one: why it does not run); `remove NAME`
deletes it; `run-now NAME` runs it once at once, in this process; `daemon` loads the model and runs the schedules
until stopped (`serve` runs them too).
`--allow` is the schedule's own allow-list: its runs never ask anyone, and every other write/dangerous call is
denied and reported. Thin: the store is `service/schedules.py`, the firing `service/scheduler.py`.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from hermes_local.cli.common import (
    DbOpt,
    GpuOpt,
    InstructionsOpt,
    JsonOpt,
    ModelOpt,
    NCtxOpt,
    ToolChoiceOpt,
    ToolsModuleOpt,
    check_paths,
    notice,
    parse_vars,
    read_instructions,
    settings_from_flags,
)
from hermes_local.errors import UserError
from hermes_local.textsafe import terminal_safe

schedule_app = typer.Typer(help="Unattended runs at cron times (kept under $HERMES_LOCAL_HOME).", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(help="The schedule's name.")]


@schedule_app.command("add")
def add(
    name: NameArg,
    target: Annotated[str, typer.Argument(help="The task, or a workflow .toml file.")],
    cron: Annotated[str, typer.Option(help='When, as 5 cron fields in local time, e.g. "0 8 * * 1-5".')],
    workspace: Annotated[Path, typer.Option(help="Folder the run's tools may read and write.")] = Path("."),
    allow: Annotated[
        list[str] | None,
        typer.Option(help="A write/dangerous tool its runs may use (repeatable); every other one is denied."),
    ] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, max=100, help="Most model calls per run.")] = None,
    tool_choice: ToolChoiceOpt = None,
    instructions: InstructionsOpt = None,
    db: DbOpt = None,
    var: Annotated[list[str] | None, typer.Option(help="A workflow variable: NAME=VALUE (repeatable).")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a schedule of that name.")] = False,
) -> None:
    """Add schedule NAME: run TASK (or WORKFLOW.toml) at the --cron times, unattended."""
    from hermes_local.service import schedules
    from hermes_local.workflow.run import load_workflow

    check_paths(workspace=workspace, db=db)
    variables = parse_vars(var)
    if tool_choice not in (None, "auto", "required", "none"):
        raise UserError(f"--tool-choice {tool_choice!r}: use auto, required or none")
    workflow = None
    if target.endswith(".toml"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise UserError(f"workflow file {target} does not exist; give the path of a .toml workflow")
        load_workflow(path, var_overrides=variables)  # a broken file is refused now, not at 08:00
        workflow = str(path.resolve())
    elif db is not None or variables:
        raise UserError("--db and --var are for a workflow schedule (WORKFLOW.toml); a task uses the service's --db")
    schedule = schedules.Schedule(
        name=schedules.check_name(name),
        cron=schedules.check_cron(cron),
        task=None if workflow else target,
        workflow=workflow,
        workspace=str(workspace.expanduser().resolve()),  # `add` records the folder's identity: each run checks it
        allow=allow or [],
        max_steps=max_steps,
        tool_choice=tool_choice,  # type: ignore[arg-type]
        instructions=read_instructions(instructions),
        db=str(db.expanduser().resolve()) if db else None,
        vars=variables,
    )
    schedules.add(schedule, replace=replace)
    nxt = schedule.listing()["next"]
    typer.echo(f"schedule {name} added; next run {_when(nxt)} (runs under `serve` or `schedule daemon`)", err=True)


def _when(ts: float | None) -> str:
    import time

    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


@schedule_app.command("list")
def list_schedules(as_json: JsonOpt = False) -> None:
    """Show every schedule: its cron times, next run, last outcome and what it runs."""
    from hermes_local.service import schedules

    found, broken = schedules.scan()
    if as_json:
        views = [s.listing() for s in found] + [b.listing() for b in broken]
        typer.echo(json.dumps(sorted(views, key=lambda v: v["name"]), indent=2))
        return
    if not found and not broken:
        typer.echo('no schedules; add one with: hermes-local schedule add NAME --cron "0 8 * * 1-5" TASK')
        return
    for b in broken:
        typer.echo(terminal_safe(f"{b.name}  BROKEN, not run: {b.line}"))
    for s in found:
        view = s.listing()
        last = f"last {s.last_status} {_when(s.last_started)}" if s.last_status else "never run"
        session = f" (session {s.last_session})" if s.last_session else ""
        typer.echo(terminal_safe(f"{s.name}  [{s.cron}]  next {_when(view['next'])}  {last}{session}  {s.target}"))
        if s.last_note:
            typer.echo(terminal_safe(f"    {s.last_note}"))


@schedule_app.command("remove")
def remove(name: NameArg) -> None:
    """Delete schedule NAME (its past sessions stay)."""
    from hermes_local.service import schedules

    schedules.remove(name)
    typer.echo(f"schedule {name} removed", err=True)


def _scheduler(flags: dict[str, Any]) -> Any:
    """The model loaded once, a run manager over it and the scheduler, from the command's flags."""
    from hermes_local.runtime import build_registry
    from hermes_local.service.scheduler import Scheduler, serving_manager

    check_paths(tools_modules=flags.get("tools_module"))
    settings = settings_from_flags(flags)
    registry = build_registry(flags.get("tools_module") or [], settings, on_notice=notice)
    manager = serving_manager(settings, registry, Path.cwd(), on_info=lambda line: typer.echo(line, err=True))
    echo = lambda line: typer.echo(terminal_safe(line), err=True)  # noqa: E731
    return Scheduler(manager, on_line=echo), registry


@schedule_app.command("run-now")
def run_now(
    name: NameArg, model: ModelOpt = None, n_ctx: NCtxOpt = None, n_gpu_layers: GpuOpt = None,
    tools_module: ToolsModuleOpt = None,
) -> None:  # fmt: skip
    """Run schedule NAME once, now, unattended (as its cron times would); exit 1 unless it answered."""
    from hermes_local.service import schedules

    schedules.get(name)  # an unknown name, or a run of it going: exit 2 before the model loads
    schedules.check_idle(name)
    scheduler, registry = _scheduler(locals())
    try:
        done = scheduler.fire(name)
    finally:
        scheduler.manager.shutdown()
        registry.close()
    if done is None or done.last_status not in ("answer", "ok"):
        raise typer.Exit(1)


@schedule_app.command("daemon")
def daemon(
    model: ModelOpt = None, n_ctx: NCtxOpt = None, n_gpu_layers: GpuOpt = None, tools_module: ToolsModuleOpt = None,
    poll: Annotated[float, typer.Option(min=1, max=60, help="Seconds between looks at the schedules.")] = 20.0,
) -> None:  # fmt: skip
    """Load the model and run the schedules at their times until stopped (where no `serve` runs them)."""
    scheduler, registry = _scheduler(locals())
    scheduler.poll = poll

    def stop(signum: int, frame: Any) -> None:
        scheduler.stopping.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    typer.echo("schedule daemon running; Ctrl-C stops it", err=True)
    try:
        scheduler.run_forever()
    except KeyboardInterrupt:
        scheduler.stopping.set()
    finally:
        scheduler.manager.shutdown()
        scheduler.stop()
        registry.close()
