"""`sessions apply ID` and `sessions rate ID`, and what `run --plan` shows at its end (typer, thin).

`show_plan` prints a plan-only session's proposals: file writes as unified diffs against the current files,
every other call with its arguments (`agent/plan.py` computes both, terminal-safe). `sessions_apply` runs the
proposals in order in the session's own workspace (any current folder; the folder the run recorded, checked by
its identity: a folder moved away or replaced since is refused in one line, exit 2) through the normal approval of a
terminal (`--yes`, `--allow`, or the question), each recorded in the session log. `sessions_rate` stores the
user's verdict in the log (`session.rate_session`). Holds no logic; `app.py` mounts these.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from hermes_local.cli.common import (
    AllowOpt,
    SessionArg,
    ToolsModuleOpt,
    TrustContentOpt,
    YesOpt,
    notice,
    settings_from_flags,
)
from hermes_local.textsafe import terminal_safe


def show_plan(session_id: str) -> int:
    """Print the proposals of a plan-only session (diffs, then the list); returns how many there are."""
    from hermes_local.agent.plan import change_lines, plan_of, proposal_lines, proposed_changes, workspace_reader
    from hermes_local.session import read_events, session_path

    plan = plan_of(session_id, read_events(session_path(session_id), on_skip=notice))
    if not plan.proposals:
        typer.echo("(plan-only run: nothing was proposed)")
        return 0
    with workspace_reader(plan, notice) as read:  # the folder the run recorded (a swapped one is refused)
        changes = proposed_changes(plan.pending(), read)  # what applying now would change
    for change in changes:
        typer.echo("\n".join(change_lines(change)))
    typer.echo(f"proposed ({len(plan.proposals)}, in {terminal_safe(plan.workspace)}):")
    for line in proposal_lines(plan):
        typer.echo(f"  {line}")
    return len(plan.proposals)


def sessions_apply(
    session_id: SessionArg,
    yes: YesOpt = False,
    allow: AllowOpt = None,
    trust_content: TrustContentOpt = None,
    tools_module: ToolsModuleOpt = None,
) -> None:
    """Run the proposals of a plan-only session (`run --plan`) in order, in its workspace, through normal
    approval; each is recorded in the session, so applying again never repeats one that worked."""
    from hermes_local.agent.plan import apply_proposals, plan_of
    from hermes_local.cli.asker import terminal_approver
    from hermes_local.runtime import RunSpec, start_run
    from hermes_local.session import read_events, session_path

    settings = settings_from_flags(locals())
    plan = plan_of(session_id, read_events(session_path(session_id), on_skip=notice))
    if not plan.proposals:
        typer.echo(f"session {session_id} proposed nothing; there is nothing to apply", err=True)
        return
    show_plan(session_id)
    spec = RunSpec(
        settings=settings,
        workspace=Path(plan.workspace),
        folder=plan.folder,  # reopened by the identity the run recorded: a swapped folder is refused, exit 2
        tools_modules=tools_module or [],
        approver=terminal_approver(settings, yes=yes),
        session_id=session_id,  # logged in the plan's own session, and checkpointed under it
        on_notice=notice,
    )
    with start_run(spec, None) as handle:  # the tool side only: the proposals are the calls
        executor, log, used = handle.executor, handle.emit, str(handle.workspace.path)
        items = apply_proposals(plan, executor, log, executor.checkpoints.at if executor.checkpoints else None)
    failed = 0
    for item in items:
        o, who = item.outcome, f"[{item.proposal.agent}] " if item.proposal.agent else ""  # a specialist's proposal
        failed += not o.ok
        if o.ok:
            typer.echo(
                terminal_safe(f"✓ {item.index}. {who}{o.summary}" + (" (applied before)" if item.earlier else ""))
            )
        elif o.error_kind == "permission_denied" and o.approval in FIXES:
            typer.echo(terminal_safe(f"✗ {item.index}. {who}{o.name}: not approved: {_fix(o.name, o.approval)}"))
        else:
            typer.echo(terminal_safe(f"✗ {item.index}. {who}{o.name}: {o.error_kind}: {(o.error or '')[:300]}"))
    where = terminal_safe(used)  # the folder actually used
    typer.echo(f"applied {len(items) - failed} of {len(items)} proposal(s) in {where}", err=True)
    if failed:
        raise typer.Exit(1)


FIXES = {  # how a call was not approved -> what approves it, for a person (the tool's message is for the model)
    "no_terminal": "nobody to ask; pass --yes (writes) or --allow {name}",
    "needs_allow": "a dangerous tool; pass --allow {name}",
    "untrusted_content": "the run read untrusted content; apply on a terminal to be asked, or --trust-content",
    "executes_later": "it writes a file that runs code later; apply on a terminal to be asked",
    "denied_by_policy": "deny_tools in your configuration refuses it",
    "user": "you said no",
}


def _fix(name: str, how: str) -> str:
    """What approves a proposal that was not approved (any other refusal prints the tool's own reason)."""
    return FIXES[how].format(name=name)


def sessions_rate(
    session_id: SessionArg,
    verdict: Annotated[str, typer.Argument(help="good or bad", metavar="good|bad")],
    note: Annotated[str | None, typer.Option(help="What was wrong (or right) with the result.")] = None,
) -> None:
    """Record your verdict on a run in its session (the last one counts); `sessions export --as-case` and
    `eval --from-sessions --rated bad` read it."""
    from hermes_local.longterm import LongTermMemory
    from hermes_local.session import rate_session

    rating = rate_session(session_id, verdict, note or "")
    with contextlib.closing(LongTermMemory()) as memory:
        memory.rated(session_id, rating.verdict)  # a bad run's episode is never recalled
    typer.echo(f"rated session {session_id} {rating.verdict}", err=True)
