"""The `hermes-local stats [--since 7d] [--json]` command: how the agent has been doing, from the session logs.

Prints the figures `evals/stats.py` gathers (runs, success rate, outcomes, per-tool failures, tokens and
seconds per run, approvals); `--json` prints them as one object (with `runs` and `success_rate`). Holds no
counting logic.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from hermes_local.cli.common import JsonOpt
from hermes_local.textsafe import terminal_safe

SinceOpt = Annotated[
    str | None, typer.Option(help="Only runs started this long ago or later: 30m, 12h, 7d, 2w (default: all).")
]


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.0f}%"


def stats(since: SinceOpt = None, as_json: JsonOpt = False) -> None:
    """Runs, success rate, tool failures, tokens, seconds and approvals, aggregated from the session logs."""
    from hermes_local.evals.stats import gather, parse_since

    figures = gather(parse_since(since) if since else None)
    if as_json:
        typer.echo(json.dumps(figures, indent=2))
        return
    typer.echo(_report(figures, since))


def _report(f: dict[str, Any], since: str | None) -> str:
    window = f"in the last {terminal_safe(since)}" if since else "in all sessions"
    if not f["runs"]:
        return f"no runs {window} (sessions are kept under $HERMES_LOCAL_HOME/sessions)"
    outcomes = ", ".join(f"{name} {n}" for name, n in f["outcomes"].items() if n)
    results = ", ".join(f"{name} {n}" for name, n in f["results"].items() if n)
    lines = [
        f"{f['runs']} runs {window} ({f['sessions']} sessions): {results}",
        f"stopped: {outcomes}",
        f"success rate: {_percent(f['success_rate'])} done or answered with evidence "
        f"(of finished runs: {_percent(f['success_rate_finished'])})",
    ]
    tokens, seconds = f["tokens_per_run"], f["seconds_per_run"]
    lines.append(
        f"per run: {tokens['prompt']['mean']:.0f} prompt + {tokens['completion']['mean']:.0f} generated tokens, "
        f"{seconds['wall']['mean']:.1f} s (median {seconds['wall']['median']:.1f} s; "
        f"model {seconds['model']['mean']:.1f} s)"
    )
    a = f["approvals"]
    lines.append(
        f"approvals: {a['asked']} asked, {a['allowed']} allowed, {a['denied']} denied, {a['timed_out']} timed out; "
        f"{a['refused_unasked']} refused without asking"
    )
    if f["tools"]:
        lines.append("tools (calls, failed, refused, failure rate of the calls that ran):")
        width = min(40, max(len(name) for name in f["tools"]))
        for name, c in f["tools"].items():
            shown = terminal_safe(name[:40]).ljust(width)  # names the model wrote: shown safe and short
            counts = f"{c['calls']:>5} {c['failed']:>5} {c['refused']:>5}"
            lines.append(f"  {shown}  {counts}  {_percent(c['failure_rate'])}")
    for name, decisions in f.get("hooks", {}).items():  # the user's [[hooks]]: what each decided
        counted = ", ".join(f"{n} {terminal_safe(d[:10])}" for d, n in sorted(decisions.items()))
        lines.append(f"hook {terminal_safe(name[:40])}: {counted}")
    return "\n".join(lines)
