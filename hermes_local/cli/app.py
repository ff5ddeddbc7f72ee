"""The `hermes-local` command (typer). Thin: parse flags, build through `runtime`, print.

User mistakes end with one line on stderr naming the fix and exit code 2; no tracebacks.
"""

from __future__ import annotations

import os
import sys

import typer

from hermes_local.cli.cache import cache_app
from hermes_local.cli.common import (
    HermesGroup,
)
from hermes_local.cli.evals import eval_command, sessions_export, workflow_app
from hermes_local.cli.mcp import mcp_app
from hermes_local.cli.memory import memory_app
from hermes_local.cli.models import doctor, models_app
from hermes_local.cli.plan import sessions_apply, sessions_rate
from hermes_local.cli.prompt import prompt_command
from hermes_local.cli.qualify import models_qualify  # noqa: F401 - registers `models qualify` on models_app
from hermes_local.cli.records import agents_app, sessions_app, tools_app
from hermes_local.cli.run import RUN_EXAMPLES, chat, run
from hermes_local.cli.schedule import schedule_app
from hermes_local.cli.serve import serve
from hermes_local.cli.skills import skills_app
from hermes_local.cli.stats import stats
from hermes_local.cli.undo import checkpoints_app, sessions_diff, sessions_undo
from hermes_local.errors import HermesError

app = typer.Typer(
    help="A local, offline task agent on llama.cpp (Hermes 2 Pro tool calling).\n\n"
    'Example: hermes-local run "What time is it? Note it in my memo."',
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=HermesGroup,
)
app.add_typer(tools_app, name="tools")
app.add_typer(models_app, name="models")
app.add_typer(mcp_app, name="mcp")
app.add_typer(sessions_app, name="sessions")
app.add_typer(memory_app, name="memory")
app.add_typer(agents_app, name="agents")
app.add_typer(skills_app, name="skills")
app.command()(doctor)
app.add_typer(workflow_app, name="workflow")
app.add_typer(cache_app, name="cache")
app.add_typer(schedule_app, name="schedule")
app.command("eval")(eval_command)
app.command("prompt")(prompt_command)
sessions_app.command("apply")(sessions_apply)
sessions_app.command("rate")(sessions_rate)
sessions_app.command("export")(sessions_export)
sessions_app.command("diff")(sessions_diff)
sessions_app.command("undo")(sessions_undo)
app.add_typer(checkpoints_app, name="checkpoints")
app.command()(serve)
app.command()(stats)
app.command(epilog=RUN_EXAMPLES)(run)
app.command()(chat)


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
