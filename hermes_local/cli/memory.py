"""`hermes-local memory list|show|search|add|export|forget|failed|off|on`: the long-term memory, facts and episodes.

Thin typer commands over `longterm.LongTermMemory`, on the local user's items only (a serve token's runs keep
theirs apart); every text from the store (model answers, goals, tool findings) is printed terminal-safe.
`search QUERY` builds the store as a run in `--workspace` does (`runtime.memory_store`) and prints exactly what a
run with that goal there would recall. `add TEXT` is a fact the user states: trusted. Does not run the agent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from hermes_local.cli.common import JsonOpt, WorkspaceOpt, fail, notice, settings_from_flags
from hermes_local.textsafe import terminal_safe

memory_app = typer.Typer(
    help="Long-term memory: facts (the `remember` tool) and episodes (one per finished run).", no_args_is_help=True
)
IdArg = Annotated[int, typer.Argument(help="The number shown by `memory list`.")]
EmbeddingOpt = Annotated[
    str | None,
    typer.Option(help='Embedding model (registry name or .gguf; "none": words only). Default: as runs use.'),
]


def _store() -> Any:
    from hermes_local.longterm import LongTermMemory

    return LongTermMemory()


def _echo_all(items: Sequence[Any], as_json: bool, empty: str, line: Callable[[Any], str]) -> None:
    """A listing: one JSON array of `to_json()`s with --json, else a terminal-safe `line` per item (`empty` if none)."""
    if as_json:
        typer.echo(json.dumps([i.to_json() for i in items], ensure_ascii=True))
        return
    if not items:
        typer.echo(empty)
    for item in items:
        typer.echo(line(item))


def _line(item: Any) -> str:
    day = time.strftime("%Y-%m-%d", time.localtime(item.created))
    marks = "".join(f" [{m}]" for m in (item.status, item.trust) if m not in ("ok", "trusted"))
    if item.kind == "fact":  # a fact's line breaks are shown as breaks, never as escapes
        return f"{item.id:4}  fact{marks}  {terminal_safe(item.text, keep_newlines=True)}"
    goal = terminal_safe(str(item.data.get("goal") or ""), keep_newlines=True)
    answer = terminal_safe(str(item.data.get("answer") or ""), keep_newlines=True)
    answer = answer if len(answer) <= 80 else answer[:79] + "…"
    outcome = f"  [{terminal_safe(str(item.data['outcome']))}]" if item.data.get("outcome") else ""
    session = terminal_safe(str(item.session_id))
    return f"{item.id:4}  episode{marks}{outcome}  {day}  {goal} -> {answer}  (session {session})"


@memory_app.command("list")
def memory_list(as_json: JsonOpt = False) -> None:
    """Facts and episodes, oldest first (episodes: date, goal -> answer, session; [failed], [untrusted])."""
    _echo_all(_store().items(), as_json, "(nothing remembered yet)", _line)


@memory_app.command("show")
def memory_show(item_id: IdArg, as_json: JsonOpt = False) -> None:
    """One fact or episode in full (an episode: goal, answer, findings, files written, tools, session)."""
    item = _store().get(item_id)
    if item is None:
        fail(f"no remembered fact or episode {item_id}; see `hermes-local memory list`")
    if as_json:
        typer.echo(json.dumps(item.to_json(), ensure_ascii=True))
        return
    for key, value in item.to_json().items():
        shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        typer.echo(f"{key}: {terminal_safe(shown, keep_newlines=key == 'answer')}")


@memory_app.command("search")
def memory_search(
    query: Annotated[str, typer.Argument(help="A goal, as you would give it to `run`.")],
    embedding_model: EmbeddingOpt = None,
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """What a run with this goal in --workspace would recall: one ranked list after the relevance floor."""
    from hermes_local.runtime import memory_store

    settings = settings_from_flags(locals())
    store = memory_store(settings, workspace=workspace, on_notice=notice)
    hits = store.hits(query) if settings.memory and store.enabled else []
    _echo_all(
        hits,
        as_json,
        "(nothing relevant: a run with this goal recalls nothing)",
        lambda hit: f"{hit.item.id:4}  {terminal_safe(hit.line)}",
    )


@memory_app.command("add")
def memory_add(
    fact: Annotated[str, typer.Argument(help="One short sentence, e.g. 'Reports go in reports/ as Markdown'.")],
    workspace: WorkspaceOpt = Path("."),
) -> None:
    """Remember a fact you state: trusted, and recalled in every workspace (a fact the model keeps with
    `remember` is trusted only when you approved that very call)."""
    from hermes_local.longterm import LongTermMemory
    from hermes_local.runtime import memory_scope

    settings = settings_from_flags({})
    try:
        item_id = LongTermMemory(scope=memory_scope(settings, workspace=workspace)).add(fact, trust="trusted")
    except ValueError as exc:
        fail(f"{exc}; remember one short sentence instead")
    typer.echo(f"remembered {item_id}: {terminal_safe(' '.join(fact.split()))}")


@memory_app.command("export")
def memory_export(as_json: JsonOpt = False) -> None:
    """Everything, for a backup: one JSON object per line (--json: one JSON array)."""
    items = [i.to_json() for i in _store().items()]
    if as_json:
        typer.echo(json.dumps(items, ensure_ascii=True))
        return
    for item in items:
        typer.echo(json.dumps(item, ensure_ascii=True))


@memory_app.command("forget")
def memory_forget(item_id: IdArg) -> None:
    """Delete one fact or episode."""
    if not _store().forget(item_id):
        fail(f"no remembered fact or episode {item_id}; see `hermes-local memory list`")
    typer.echo(f"forgot {item_id}")


@memory_app.command("failed")
def memory_failed(item_id: IdArg) -> None:
    """Mark an episode bad: it stays listed and is never recalled."""
    if not _store().mark_failed(item_id):
        fail(f"no episode {item_id}; see `hermes-local memory list`")
    typer.echo(f"episode {item_id} is marked failed; it will not be recalled")


@memory_app.command("off")
def memory_off() -> None:
    """Stop using long-term memory: runs recall nothing, keep no episode and have no `remember` tool."""
    _store().set_enabled(False)
    typer.echo("long-term memory is off (what it holds is kept; `hermes-local memory on` turns it back on)")


@memory_app.command("on")
def memory_on() -> None:
    """Use long-term memory again."""
    _store().set_enabled(True)
    typer.echo("long-term memory is on")
