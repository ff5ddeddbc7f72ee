"""The `hermes-local` command line: every terminal write of the package happens in this district.

`app.py` is the typer application and `main`; each other module holds one command family (`run.py` run
and chat, `models.py` models and doctor, `evals.py` eval/workflow/export, `mcp.py`, `prompt.py`,
`records.py` tools/sessions/memory, `cache.py`, `serve.py`), `common.py` the shared options and one-line
failures, `terminal.py` the printer of run events and the terminal asker. Holds no agent logic: commands
parse flags, build through `hermes_local.runtime`, and print.
"""

from hermes_local.cli.app import app, main

__all__ = ["app", "main"]
