"""`hermes-local tools list`, `agents list` and `sessions list|show`: what exists and what happened.

Thin typer commands that read the registry, the profiles and the session logs and print them terminal-safe.
`app.py` mounts the three sub-apps (`memory.py` has the long-term memory's). Does not run the agent.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from hermes_local.cli.common import (
    AllowHostOpt,
    DbOpt,
    SessionArg,
    ToolsModuleOpt,
    ToolsOpt,
    notice,
    settings_from_flags,
)
from hermes_local.textsafe import terminal_safe

tools_app = typer.Typer(help="Inspect the tools the agent can call.", no_args_is_help=True)
sessions_app = typer.Typer(help="Recorded runs under $HERMES_LOCAL_HOME/sessions.", no_args_is_help=True)
agents_app = typer.Typer(help="The specialists of a team: [agents.NAME] profiles in config.toml.", no_args_is_help=True)


@tools_app.command("list")
def tools_list(
    tools_module: ToolsModuleOpt = None,
    tools: ToolsOpt = None,
    db: DbOpt = None,
    allow_host: AllowHostOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON schemas.")] = False,
) -> None:
    """Show every tool the model can use: toolset, source (builtin / module / mcp:NAME), permission, arguments;
    a tool that cannot work in a run like this (no --db, no allowed host, nobody to ask) is marked off, with what
    turns it on."""
    import sys

    from hermes_local.runtime import build_registry
    from hermes_local.tools.toolsets import group_of, route, select_tools, unusable

    settings = settings_from_flags(locals())
    full = build_registry(tools_module or [], settings, on_notice=notice)
    registry = select_tools(full, settings.tools, settings.deny_tools)
    try:
        off = unusable(registry, db=db is not None, hosts=bool(settings.allow_hosts), person=sys.stdin.isatty())
        usable = registry.subset([n for n in registry.names() if n not in off])
        plan = route(usable, settings.max_tools_in_prompt)
        if as_json:
            rows = [
                t.schema()
                | {"permission": t.permission, "source": registry.source(t.name), "toolset": group_of(registry, t.name)}
                | ({"off": off[t.name]} if t.name in off else {})
                for t in registry
            ]
            typer.echo(json.dumps(rows, indent=2))
            return
        for t in [*registry, *(u for u in usable if registry.get(u.name) is None)]:  # open_toolset when routed
            props = t.parameters_schema().get("properties", {})
            required = set(t.parameters_schema().get("required", []))
            args = ", ".join(f"{p}: {s.get('type', 'any')}{'' if p in required else '?'}" for p, s in props.items())
            where = f"{group_of(registry, t.name)}, {registry.source(t.name)}"
            state = f"  (off: {off[t.name]})" if t.name in off else ""
            typer.echo(terminal_safe(f"{t.name}({args})  [{t.permission}] [{where}]  {t.description}{state}"))
        if plan.routed:
            typer.echo(
                f"({len(usable) - 1} tools > max_tools_in_prompt={settings.max_tools_in_prompt}: the prompt lists "
                f"toolsets and offers {plan.offered[0] if plan.offered else ''})",
                err=True,
            )
    finally:
        registry.close()


@agents_app.command("list")
def agents_list(
    tools_module: ToolsModuleOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the profiles as JSON.")] = False,
) -> None:
    """Show each [agents.NAME] profile with the tools it gets; one naming a missing tool or model is refused."""
    from hermes_local.agent.team import profile_tools
    from hermes_local.profiles import DELEGATE
    from hermes_local.runtime import build_registry, check_team
    from hermes_local.tools.toolsets import parse_spec, select_tools

    settings = settings_from_flags(locals())
    registry = build_registry(tools_module or [], settings, on_notice=notice)
    try:
        check_team(registry, settings)
        rows = []
        for name, p in settings.agents.items():
            names = select_tools(registry, profile_tools(p), settings.deny_tools, strict=False).names()
            names += [DELEGATE] if DELEGATE in parse_spec(p.tools) else []
            rows.append({"name": name, **p.model_dump(), "resolved_tools": names})
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
        elif not rows:
            typer.echo("(no [agents.NAME] profiles in config.toml; see README, Teams)")
        for row in [] if as_json else rows:
            steps = f", max_steps {row['max_steps']}" if row["max_steps"] else ""
            steps += f", model {row['model']}" if row["model"] else ""  # its own, loaded beside the run's
            typer.echo(
                terminal_safe(
                    f"{row['name']}: {row['description']}  [tools: {', '.join(row['resolved_tools'])}{steps}]"
                )
            )
    finally:
        registry.close()


@tools_app.command("check")
def tools_check(
    module: Annotated[str, typer.Argument(help="A .py file (or importable module) of @tool functions.")],
    dialect: Annotated[
        str | None, typer.Option(help="Render the offer in this dialect (default: the settings', else hermes).")
    ] = None,
) -> None:
    """For each @tool in MODULE: its JSON schema, how the prompt offers it in the dialect, and what to fix."""
    from hermes_local.dialects import get_dialect
    from hermes_local.prompts import Segments
    from hermes_local.tools.modules import load_tools_module
    from hermes_local.tools.registry import tool_warnings

    settings = settings_from_flags(locals())
    chosen = get_dialect(settings.dialect or "hermes")
    found = load_tools_module(module)
    warned = 0
    for t in found:
        typer.echo(terminal_safe(f"== {t.name}  [{t.permission}]"))
        typer.echo(json.dumps(t.schema(), indent=2, ensure_ascii=False))
        system = [{"role": "system", "content": Segments.untrusted("")}]
        offer = chosen.render(system, [t.schema()], add_generation_prompt=False).text
        typer.echo(f"-- in the {chosen.name} prompt:")
        typer.echo(terminal_safe(offer, keep_newlines=True))
        for warning in tool_warnings(t):
            typer.echo(terminal_safe(f"warning: {warning}"), err=True)
            warned += 1
    typer.echo(f"{len(found)} tool(s), {warned} warning(s)", err=True)


@sessions_app.command("list")
def sessions_list() -> None:
    """List recorded sessions, newest first: id, outcome (from evidence), seconds taken, goal, workspace and a
    preview of the answer."""
    from hermes_local.session import list_sessions

    for info in reversed(list_sessions()):
        end = info.end or {}
        outcome = str(end.get("outcome") or info.stopped or "unfinished")
        logged = end.get("usage")
        usage: dict = logged if isinstance(logged, dict) else {}
        took = f"{float(usage.get('seconds') or 0):7.1f}s" if info.end else " " * 8
        goal = terminal_safe(" ".join(info.goal.split())[:60])
        answer = terminal_safe(" ".join(str(end.get("answer") or "").split())[:60])
        where = f"  in {terminal_safe(info.workspace)}" if info.workspace else ""
        typer.echo(f"{info.id}  {outcome:10}  {took}  {goal}{where}" + (f"  -> {answer}" if answer else ""))


@sessions_app.command("show")
def sessions_show(
    session_id: SessionArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw events as JSON lines.")] = False,
    raw: Annotated[
        bool, typer.Option("--raw", help="Also print each step's new prompt text and the model's raw reply.")
    ] = False,
) -> None:
    """Show what happened in a session, step by step: what the model wrote (thought, plan, calls, text), the tool
    results and the tokens; --raw adds the exact prompt text each step added and the raw reply."""
    from hermes_local.session import describe_events, read_events, session_path

    events = read_events(session_path(session_id), on_skip=notice)
    if as_json:
        for event in events:
            typer.echo(json.dumps(event.to_dict(), ensure_ascii=True))
    elif raw:
        _show_raw(session_id, events)
    else:
        for line in describe_events(events):
            typer.echo(line)


def _show_raw(session_id: str, events: list) -> None:
    """`sessions show --raw`: each step's lines, then the prompt text it added and the reply, verbatim."""
    import os

    from hermes_local.cli.prompt import step_prompts
    from hermes_local.events import AssistantText
    from hermes_local.session import describe_event

    prompts, before = step_prompts(session_id), ""
    for event in events:
        line = describe_event(event)
        if line is not None:
            typer.echo(line)
        if isinstance(event, AssistantText):
            prompt = prompts.get(event.step, "") if not event.final else ""
            if prompt:
                new = prompt[len(os.path.commonprefix([prompt, before])) :]
                typer.echo("   ── prompt (new text) ──\n" + terminal_safe(new, keep_newlines=True))
                before = prompt
            typer.echo("   ── raw reply ──\n" + terminal_safe(event.text, keep_newlines=True))
            before += event.text
