"""Which tools the model sees: toolsets (named groups), `--tools` selection, and routing for many tools.

A built-in tool names its toolset on its own definition (`Traits.toolset`: `files`, `db`, `shell`, `web`,
`memory`, `time`, `user`); each MCP server is a toolset named after it and each `--tools-module` file one named
after the file. `select_tools` keeps the tools named by `--tools` / config `tools` (toolset or tool names; empty =
all) minus `deny_tools`, so denied tools are absent from the prompt and the grammar, not just refused; `unusable`
names the built-ins that cannot work in a run because it lacks what they declare they need (`Traits.needs`: a
database, an allowed host, someone to ask), which are left out the same way. When more than
`max_tools_in_prompt` tools remain, `route()` offers only `open_toolset` plus one line per toolset in
the system prompt (a toolset's line names at most `NAMES_PER_TOOLSET` tools, so a server listing
thousands of tools cannot make the prompt overflow); calling `open_toolset(toolset)` returns that
toolset's full schemas as a tool result, appended where new tokens go, so the cached prompt prefix
survives; a team's `delegate` (issue 30) is offered in full beside it. Routing never refuses a call: every
enabled tool stays registered and runs whether or not its toolset was opened. `usable_tools` is a run's selection
(what `--tools` keeps, minus what is denied or cannot work); `narrow` keeps only the toolsets a team's router model
chose (issue 30), with `final_answer`; `toolset_catalog` is what it chooses from. Does not run tools or build prompts
(the agent renders `PromptPlan`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, create_model

from hermes_local.errors import UserError
from hermes_local.profiles import DELEGATE
from hermes_local.tools.registry import Tool, ToolRegistry
from hermes_local.tools.skills import OPEN_SKILL
from hermes_local.tools.traits import Need, Traits

OPEN_TOOLSET = "open_toolset"
# What enables a built-in tool that cannot work without something the user gives (`Traits.needs`, issue 27): left
# out of the prompt and the grammar when it is missing, and said so in `tools list`.
NEEDS: dict[Need, str] = {
    "database": "needs a database: pass --db FILE",
    "host": "needs an allowed host: pass --allow-host HOST or set allow_hosts in config.toml",
    "person": "needs someone to ask: only a run at a terminal (run, chat) can ask the user",
}
MEMORY_OFF = "is off: long-term memory is off (`memory on`, or drop --no-memory)"
ROUTING_NOTE = (
    "Tools are grouped in toolsets, listed below one per line. To see the full description and arguments "
    f"of a toolset's tools, call {OPEN_TOOLSET} with its name. You may call any listed tool directly when "
    "you know its arguments."
)


def group_of(registry: ToolRegistry, name: str) -> str:
    """The toolset a registered tool belongs to (`open_toolset` itself: "routing")."""
    if name in (OPEN_TOOLSET, OPEN_SKILL):
        return "routing"
    source = registry.source(name)
    if source.startswith("mcp:"):
        return source[len("mcp:") :]
    if source.startswith("module:"):
        spec = source[len("module:") :]
        return Path(spec).stem if spec.endswith(".py") else spec.rsplit(".", 1)[-1]
    t = registry.get(name)
    return t.traits.toolset.name if t is not None and t.traits.toolset is not None else "other"


def groups(registry: ToolRegistry) -> dict[str, list[str]]:
    """Toolset -> tool names, in registration order."""
    out: dict[str, list[str]] = {}
    for t in registry:
        if t.name not in (OPEN_TOOLSET, DELEGATE, OPEN_SKILL):  # always offered in full when routed
            out.setdefault(group_of(registry, t.name), []).append(t.name)
    return out


def parse_spec(spec: list[str] | None) -> list[str]:
    """`["files,time", "db"]` -> `["files", "time", "db"]` (the option is repeatable and comma-separated)."""
    return [part.strip() for item in spec or [] for part in item.split(",") if part.strip()]


def check_spec(registry: ToolRegistry, spec: list[str] | None) -> None:
    """A one-line `UserError` for a `--tools` name that is neither a toolset nor a tool of `registry`."""
    by_group = groups(registry)
    for entry in parse_spec(spec):
        if entry not in by_group and registry.get(entry) is None:
            raise UserError(
                f"--tools {entry!r} is neither a toolset ({', '.join(by_group) or 'none'}) nor a tool; "
                "see `hermes-local tools list`"
            )


def select_tools(
    registry: ToolRegistry, spec: list[str] | None, deny: list[str] | None = None, *, strict: bool = True
) -> ToolRegistry:
    """The registry narrowed to `spec` (toolset or tool names; empty = all) minus `deny`.

    With `strict`, a name that is neither a toolset nor a tool is a one-line `UserError`; without it
    (e.g. an eval case that has fewer tools than the suite) it is skipped.
    """
    if strict:
        check_spec(registry, spec)
    entries = parse_spec(spec)
    by_group = groups(registry)
    if not entries:
        chosen = set(registry.names())
    else:
        chosen = set()
        for entry in entries:
            if entry in by_group:
                chosen.update(by_group[entry])
            elif registry.get(entry) is not None:
                chosen.add(entry)
    return registry.subset(chosen - set(deny or []))


def usable_tools(
    registry: ToolRegistry, spec: list[str] | None, deny: list[str] | None, *, db: bool, hosts: bool, person: bool,
    memory: bool = True, on_notice: Callable[[str], None] | None = None) -> ToolRegistry:  # fmt: skip
    """A run's tools: `select_tools` (lenient) minus the `unusable` ones and, with `memory` off, `remember`; each
    left out is in `left_out` (a call to it is told why), and `on_notice` hears of those `spec` asked for by name."""
    chosen = select_tools(registry, spec, deny, strict=False)
    missing = unusable(chosen, db=db, hosts=hosts, person=person)
    if not memory:
        missing |= {t.name: MEMORY_OFF for t in chosen if t.traits.needs == "memory"}
    for name, why in missing.items():
        if on_notice is not None and set(parse_spec(spec)) & {name, group_of(chosen, name)}:
            on_notice(f"{name} is left out of this run: it {why}")  # asked for by --tools: say why it is not there
    out = chosen.subset([n for n in chosen.names() if n not in missing])
    out.left_out = missing
    return out


def unusable(registry: ToolRegistry, *, db: bool, hosts: bool, person: bool) -> dict[str, str]:
    """The built-in tools of `registry` that cannot work in this run -> why, naming what enables them
    (`db`: a database was given, `hosts`: an allowed host, `person`: someone to ask)."""
    have: dict[Need, bool] = {"database": db, "host": hosts, "person": person}
    return {
        t.name: NEEDS[need]
        for need, ok in have.items()
        if not ok
        for t in registry
        if t.traits.needs == need and registry.source(t.name) == "builtin"
    }


@dataclass
class PromptPlan:
    """What the system prompt offers: full schemas for `offered` (None = all) and extra instructions."""

    offered: list[str] | None = None
    instructions: str = ""

    @property
    def routed(self) -> bool:
        return self.offered is not None


NAMES_PER_TOOLSET = 20  # tool names a toolset's line lists; past it, a count (a server may list thousands)


def toolset_lines(registry: ToolRegistry) -> list[str]:
    """One line per toolset: its tool names (the first `NAMES_PER_TOOLSET`, then how many more) and what it is for."""
    return [f"- {group}: {line}" for group, line in toolset_catalog(registry).items()]


def toolset_catalog(registry: ToolRegistry, *, without: tuple[str, ...] = ()) -> dict[str, str]:
    """Toolset -> its tool names and what it is for, leaving out the tools in `without` (and a toolset they empty)."""
    out = {}
    builtin = {t.traits.toolset.name: t.traits.toolset.about for t in registry if _builtin_toolset(registry, t)}
    for group, every in groups(registry).items():
        names = [n for n in every if n not in without]
        if not names:
            continue
        about = builtin.get(group, "")
        if not about and registry.source(names[0]).startswith("mcp:"):
            about = f"tools of the {group} MCP server"
        shown = ", ".join(names[:NAMES_PER_TOOLSET])
        if len(names) > NAMES_PER_TOOLSET:
            shown += f" and {len(names) - NAMES_PER_TOOLSET} more (open the toolset to see them)"
        out[group] = shown + (f" ({about})" if about else "")
    return out


def _builtin_toolset(registry: ToolRegistry, t: Tool) -> bool:
    return t.traits.toolset is not None and registry.source(t.name) == "builtin"


def router_catalog(registry: ToolRegistry) -> dict[str, str]:
    """The toolsets a team's router model chooses among: every one but `final_answer`, which `narrow` always keeps."""
    return toolset_catalog(registry, without=tuple(t.name for t in registry if t.traits.ends_run))


def narrow(registry: ToolRegistry, toolsets: list[str] | tuple[str, ...]) -> ToolRegistry:
    """`registry` with only the tools of `toolsets` and `final_answer` (the router model's choice); each tool left
    out is in `left_out`, so a call to it is told it is not in this run."""
    chosen = ", ".join(toolsets) or "none"
    keep, missing = set(), dict(registry.left_out)
    for group, names in groups(registry).items():
        for name in names:
            if group in toolsets or _ends_run(registry, name):
                keep.add(name)
            else:
                missing[name] = f"is in the {group} toolset, which the router left out of this task (chosen: {chosen})"
    keep |= {n for n in registry.names() if n in (OPEN_TOOLSET, DELEGATE, OPEN_SKILL)}
    out = registry.subset([n for n in registry.names() if n in keep])
    out.left_out = missing
    return out


def _ends_run(registry: ToolRegistry, name: str) -> bool:
    t = registry.get(name)
    return t is not None and t.traits.ends_run


def route(registry: ToolRegistry, max_tools_in_prompt: int) -> PromptPlan:
    """Flat when few tools are enabled; otherwise register `open_toolset` and offer only it plus the toolset list."""
    counted = len(registry) - (registry.get(OPEN_SKILL) is not None)  # open_skill is offered either way
    if counted <= max_tools_in_prompt or registry.get(OPEN_TOOLSET) is not None:
        return PromptPlan()
    registry.register(open_toolset_tool(registry), source="builtin")
    text = "\n".join([ROUTING_NOTE, "Toolsets:", *toolset_lines(registry)])
    full = [OPEN_TOOLSET, *(name for name in (DELEGATE, OPEN_SKILL) if registry.get(name))]
    return PromptPlan(offered=full, instructions=text)


def open_toolset_tool(registry: ToolRegistry) -> Tool:
    """The `open_toolset(toolset)` tool over `registry`'s toolsets (schemas read when called)."""
    names = list(groups(registry))
    model = create_model(
        "open_toolset_arguments",
        __config__=ConfigDict(extra="forbid"),
        toolset=(Literal[tuple(names)], Field(description="Name of the toolset to open.")),  # type: ignore[arg-type]
    )

    def open_toolset(toolset: str) -> dict[str, Any]:
        members = groups(registry).get(toolset, [])
        return {"toolset": toolset, "tools": [t.schema()["function"] for n in members if (t := registry.get(n))]}

    return Tool(
        name=OPEN_TOOLSET,
        description="Show the full descriptions and arguments of the tools in one toolset.",
        function=open_toolset,
        arguments_model=model,
        permission="read",
        repeatable=True,
        provenance="trusted",  # the configured tools' own schemas, as the system prompt shows them
        traits=Traits(steers_run=True),  # it opens a toolset: never the tool a goal needs
    )
