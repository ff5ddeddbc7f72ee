"""`hermes-local sessions diff|undo ID` and `hermes-local checkpoints info|clear`: thin, over `tools/effects/undo.py`.

Mounted from app.py. The workspace comes from the session's checkpoints, so these work from any folder (the
folder the session recorded, checked by its identity: a swapped one is refused, exit 2);
what they print is terminal-safe (file contents are the model's and the tools', never trusted). An undo that
refused some paths prints them and exits 1; user mistakes (unknown session, nothing to undo) exit 2.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from hermes_local.cli.common import SessionArg, notice
from hermes_local.textsafe import terminal_safe

checkpoints_app = typer.Typer(
    help="Checkpoints: what runs changed in their workspaces (for `sessions diff|undo`).", no_args_is_help=True
)


def sessions_diff(
    session_id: SessionArg,
    step: Annotated[int | None, typer.Option(help="Only what this step changed (default: the whole run).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per changed path.")] = False,
) -> None:
    """Show what a session changed in its workspace: a unified diff for text, size and hash for the rest."""
    from hermes_local.tools.effects.undo import diff_text, session_diff

    diffs = session_diff(session_id, step, on_note=notice)
    if as_json:
        for d in diffs:
            typer.echo(json.dumps(d.to_json(), ensure_ascii=True))
        return
    if not diffs:
        typer.echo("no changes" + (f" at step {step}" if step is not None else ""), err=True)
        return
    typer.echo(terminal_safe(diff_text(diffs), keep_newlines=True), nl=False)


def sessions_undo(
    session_id: SessionArg,
    to_step: Annotated[
        int | None, typer.Option(help="Restore the workspace to before this step (default: before the run).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Also restore files changed since the run.")] = False,
    redo: Annotated[bool, typer.Option("--redo", help="Undo the last undo (bring the run's changes back).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was done as one JSON object.")] = False,
) -> None:
    """Put the workspace back as before the run (or step N), removing what it made; refuses files changed since.

    --force also restores files changed since the run; the undo is recorded, and --redo brings the run's
    changes back. Works from any folder: the workspace comes from the session."""
    from hermes_local.tools.effects.undo import undo_session

    report = undo_session(session_id, to_step, force=force, redo=redo, on_note=notice)
    if as_json:
        typer.echo(json.dumps(report.to_json(), ensure_ascii=True))
    else:
        for path in report.restored:
            typer.echo(f"restored {terminal_safe(path)}")
        for path in report.removed:
            typer.echo(f"removed  {terminal_safe(path)}")
        for path, why in report.refused:
            typer.echo(f"refused  {terminal_safe(path)}: {terminal_safe(why)}", err=True)
        done = len(report.restored) + len(report.removed)
        where = terminal_safe(report.workspace)
        typer.echo(f"undo recorded as step {report.step} of {session_id}: {done} path(s) changed in {where}", err=True)
        if not report.refused and report.step and done:
            typer.echo(f"redo with: hermes-local sessions undo {session_id} --redo", err=True)
    if report.refused:
        raise typer.Exit(1)


@checkpoints_app.command("info")
def checkpoints_info() -> None:
    """Where checkpoints live, how big they are, and how many sessions they cover."""
    from hermes_local.tools.effects.checkpoints import CheckpointStore

    store = CheckpointStore()
    objects, size = store.size()
    typer.echo(f"{store.root}: {len(store.sessions())} session(s), {objects} object(s), {size / 2**20:.1f} MiB")


@checkpoints_app.command("clear")
def checkpoints_clear() -> None:
    """Delete every checkpoint (runs so far can no longer be diffed or undone)."""
    from hermes_local.tools.effects.checkpoints import CheckpointStore

    store = CheckpointStore()
    objects, size = store.clear()
    typer.echo(f"removed {objects} object(s), {size / 2**20:.1f} MiB from {store.root}")
