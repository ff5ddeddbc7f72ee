"""CLI commands for evaluation and workflows (typer): `eval`, `workflow run`, `sessions export`.

Thin: parse flags, call `evals/suite.py` / `workflow/run.py`, print. `app.py` mounts them. User mistakes end with
one line on stderr and exit 2; a failing case or workflow step exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from hermes_local.cli.common import (
    AllowOpt,
    DbOpt,
    DialectOpt,
    GpuOpt,
    InstructionsOpt,
    SessionArg,
    ToolsModuleOpt,
    ToolsOpt,
    WorkspaceOpt,
    check_paths,
    fail,
    notice,
    parse_vars,
    settings_from_flags,
)

workflow_app = typer.Typer(help="Run TOML workflows: tool steps in dependency order, no model.", no_args_is_help=True)


# -- eval ---------------------------------------------------------------------------------------
def eval_command(
    cases: Annotated[Path | None, typer.Argument(help="A JSONL file with one case per line.")] = None,
    from_sessions: Annotated[
        bool, typer.Option("--from-sessions", help="Build the suite from recorded sessions rated with --rated.")
    ] = False,
    rated: Annotated[
        str | None, typer.Option(help="With --from-sessions: the sessions rated good or bad (`sessions rate`).")
    ] = None,
    suite_dir: Annotated[
        Path | None,
        typer.Option("--suite-dir", help="With --from-sessions: write the suite here (its replay files in replay/)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Registry name, .gguf path, or replay:DIR holding <case_id>.jsonl files.")
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Runs per case; a case passes only if all pass (pass^k).")] = 1,
    jobs: Annotated[
        int,
        typer.Option(
            min=1, max=64, help="Runs at once on one loaded model (decoded together as sequences of one batch)."
        ),
    ] = 1,
    report: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "--report",
            help="Where to write the JSON report (default: $HERMES_LOCAL_HOME/evals/<time>-<cases>.json).",
        ),
    ] = None,
    case: Annotated[list[str] | None, typer.Option(help="Run only this case ID (repeatable).")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Default step limit for cases without max_steps.")] = None,
    n_ctx: Annotated[int | None, typer.Option(help="Context window in tokens.")] = None,
    n_gpu_layers: GpuOpt = None,
    tool_choice: Annotated[
        str | None, typer.Option(help="auto | required | none for every case (default: the setting).")
    ] = None,
    instructions: InstructionsOpt = None,
    tools: ToolsOpt = None,
    dialect: DialectOpt = None,
) -> None:
    """Run every case of CASES.jsonl in a fresh temporary workspace and score it; exit 1 if any case fails.

    --from-sessions --rated bad builds the suite from the runs you rated bad (`sessions rate ID bad`) first."""
    from hermes_local.evals.cases import load_cases
    from hermes_local.evals.suite import eval_tools, format_table, run_suite, suite_report
    from hermes_local.tools.toolsets import check_spec

    settings = settings_from_flags(locals())
    cases = _cases_file(cases, from_sessions, rated, suite_dir)
    with eval_tools(settings, on_notice=notice) as everything:  # MCP servers: once for the eval run
        check_spec(everything, settings.tools)  # each case then keeps the named tools it has
        suite = load_cases(cases, only=case, registry=everything)
        reports = run_suite(suite, settings, repeat=repeat, on_progress=notice, jobs=jobs)
    data = suite_report(reports, cases_file=cases, model=settings.model, repeat=repeat)
    report = report or default_report_path(cases)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
    typer.echo(format_table(reports, data["summary"]))
    typer.echo(f"report: {report}")
    if data["summary"]["failed"]:
        raise typer.Exit(1)


def _cases_file(cases: Path | None, from_sessions: bool, rated: str | None, folder: Path | None) -> Path:
    """CASES, or the suite `--from-sessions --rated good|bad` builds under $HERMES_LOCAL_HOME/evals/."""
    import time

    from hermes_local.config import home_dir
    from hermes_local.evals.export import suite_from_sessions

    if not from_sessions:
        if cases is None or rated is not None:
            fail("give a CASES.jsonl file, or --from-sessions --rated bad (rated runs as a suite)")
        return cases
    if cases is not None or rated not in ("good", "bad"):
        fail("--from-sessions builds the suite itself: give --rated good or --rated bad, and no CASES file")
    folder = folder or home_dir() / "evals" / f"sessions-{rated}-{time.strftime('%Y%m%d-%H%M%S')}"
    built, count, warnings = suite_from_sessions(rated, folder)
    for warning in warnings:
        notice(f"warning: {warning}")
    notice(f"suite of {count} session(s) rated {rated}: {built} (replay them with --model replay:{folder / 'replay'})")
    return built


def for_a_person(message: str) -> str:
    """A tool's error as a person reads it: without the closing advice meant for the model ("tell the user")."""
    import re

    return re.sub(r"[;,:]?\s*(?:try again later or )?tell the user[^.;]*\.?\s*$", "", message).strip()


def default_report_path(cases: Path) -> Path:
    """Where an eval report goes without --out: under $HERMES_LOCAL_HOME/evals/, never the current folder."""
    import time

    from hermes_local.config import home_dir

    return home_dir() / "evals" / f"{time.strftime('%Y%m%d-%H%M%S')}-{cases.stem}.json"


# -- sessions export ------------------------------------------------------------------------------
def sessions_export(
    session_id: SessionArg,
    as_case: Annotated[bool, typer.Option("--as-case", help="Write an eval case plus its replay file.")] = False,
    output: Annotated[Path | None, typer.Option(help="Append the case to this JSONL file (default: print it).")] = None,
    case_id: Annotated[str | None, typer.Option("--id", help="Case ID (default: session-<ID>).")] = None,
    replay_dir: Annotated[
        Path | None, typer.Option(help="Where <case_id>.jsonl goes (default: replay/ next to --output, or ./replay).")
    ] = None,
) -> None:
    """Export a recorded session: raw events as JSON lines, or with --as-case an eval case that replays it."""
    from hermes_local.engines.replay import write_replay
    from hermes_local.evals.export import append_case, session_to_case
    from hermes_local.session import read_events, session_path

    events = read_events(session_path(session_id), on_skip=notice)
    if not as_case:
        for event in events:
            typer.echo(json.dumps(event.to_dict(), ensure_ascii=True))
        return
    case, texts, warnings = session_to_case(events, case_id or f"session-{session_id}", session_id)
    folder = replay_dir or ((output.parent if output else Path(".")) / "replay")
    if output:
        append_case(output, case)
    replay = write_replay(folder / f"{case['id']}.jsonl", texts)
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    if output:
        typer.echo(f"appended case {case['id']} to {output}", err=True)
    else:
        typer.echo(json.dumps(case, ensure_ascii=False))
    typer.echo(f"replay file: {replay} (run with --model replay:{folder})", err=True)


# -- workflow run -------------------------------------------------------------------------------
@workflow_app.command("run")
def workflow_run(
    file: Annotated[Path, typer.Argument(help="The workflow TOML file.")],
    resume: Annotated[
        bool, typer.Option("--resume", help="Rerun from the failed step, reusing completed step outputs.")
    ] = False,
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve every write/dangerous tool call.")] = False,
    allow: AllowOpt = None,
    tools_module: ToolsModuleOpt = None,
    var: Annotated[list[str] | None, typer.Option(help="Set a workflow variable: NAME=VALUE (repeatable).")] = None,
    allow_imports: Annotated[
        bool, typer.Option("--allow-imports", help="Let the file's tools_modules import and run Python code.")
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="Model for a summarize step: registry name, .gguf path or replay:FILE.")
    ] = None,
    n_ctx: Annotated[int | None, typer.Option(help="Context window for the summarize step.")] = None,
) -> None:
    """Run FILE.toml: each step calls one tool with params filled from earlier steps; exit 1 if a step fails."""
    from hermes_local.cli.asker import terminal_approver
    from hermes_local.runtime import load_llm
    from hermes_local.workflow.run import load_workflow, run_workflow

    if db is not None and not resume and not db.expanduser().exists():
        fail(f"--db {db} does not exist; create it first (for scripts/examples/daily_report.toml: "
             f"python scripts/examples/make_orders_db.py {db})")  # fmt: skip
    # before any step runs; a --resume may reuse the outputs of queries whose database is gone
    check_paths(workspace=workspace, db=None if resume else db, tools_modules=tools_module)
    variables = parse_vars(var)
    settings = settings_from_flags(locals())
    wf = load_workflow(file, tools_modules=tools_module or [], var_overrides=variables, allow_imports=allow_imports)
    if db is None and not resume and wf.needs("database"):
        fail(f"workflow {wf.name} queries a database: pass --db FILE (for scripts/examples/daily_report.toml create "
             "one first with: python scripts/examples/make_orders_db.py orders.sqlite)")  # fmt: skip
    approver = terminal_approver(settings, yes=yes)

    def show(o) -> None:
        mark = {"ok": "✓", "reused": "↺", "failed": "✗", "skipped": "-"}[o.status]
        detail = o.summary if o.status != "failed" else f"{o.error_kind}: {for_a_person(o.error or '')}"
        extra = " (reused)" if o.status == "reused" else ""
        typer.echo(f"{mark} {o.id} [{o.tool}]{extra} {detail}")

    result = run_workflow(
        wf,
        settings,
        workspace=workspace,
        db_path=db,
        approver=approver,
        resume=resume,
        llm_factory=lambda: load_llm(settings),
        on_step=show,
        on_notice=notice,
    )
    if result.ok:
        typer.echo(f"workflow {wf.name} completed (session {result.session_id})", err=True)
        return
    failed = ", ".join(o.id for o in result.failed)
    typer.echo(
        f"workflow {wf.name} failed at step {failed} (session {result.session_id}); "
        f"fix it and rerun the same command with --resume",
        err=True,
    )
    raise typer.Exit(1)
