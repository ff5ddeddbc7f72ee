"""`hermes-local cache ...`: inspect and clear the persistent prompt cache (kvcache.py).

Mounted from app.py. Only lists and deletes files under `$HERMES_LOCAL_HOME/cache/kv/`; never loads a model.
"""

from __future__ import annotations

import typer

from hermes_local.engines.inprocess import kvcache

cache_app = typer.Typer(help="The prompt cache: saved KV state of prompt prefixes.", no_args_is_help=True)


@cache_app.command("clear")
def cache_clear() -> None:
    """Delete every saved prompt prefix state."""
    files, n_bytes = kvcache.clear()
    typer.echo(f"removed {files} file(s), {n_bytes / 2**20:.1f} MiB from {kvcache.cache_dir()}")


@cache_app.command("info")
def cache_info() -> None:
    """Where the prompt cache lives and how big it is."""
    directory = kvcache.cache_dir()
    files = list(directory.glob("*.kv")) if directory.is_dir() else []
    size = sum(f.stat().st_size for f in files)
    typer.echo(f"{directory}: {len(files)} file(s), {size / 2**20:.1f} MiB")
