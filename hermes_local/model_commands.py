"""`hermes-local models ...` and `hermes-local doctor`: the model registry seen from the terminal.

Thin typer commands over `hermes_local.models`; no logic worth testing lives here.
"""

from __future__ import annotations

import typer

from hermes_local.config import UserError

models_app = typer.Typer(help="Model registry: list, info, download.", no_args_is_help=True)


@models_app.command("list")
def models_list() -> None:
    """Show the models hermes-local knows and whether each is installed."""
    from hermes_local.models import EMBEDDED_INSTALL_HINT, embedded_model_path

    try:
        path = embedded_model_path()
        typer.echo(f"smollm2 (embedded default)  installed  {path}")
    except UserError:
        typer.echo(f"smollm2 (embedded default)  not installed  ({EMBEDDED_INSTALL_HINT})")


def doctor() -> None:
    """Check this installation: Python, llama.cpp build, GPU offload, models, offline status."""
    typer.echo("doctor: not implemented yet")
    raise typer.Exit(1)
