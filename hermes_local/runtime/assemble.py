"""The agent of one seat of a run: the run's own, or a specialist's in a team, assembled the same way.

`assemble(wiring, seat)` builds an `Agent` from what the whole run shares (`RunWiring`: the model, the settings,
the pinned workspace, the database, who answers `ask_user`, the notice line, plan-only, the specialists' models)
and what is this agent's own (`Seat`: its tools, approver, event sink, role in the team, dialect, instructions and
session). A specialist's run is started through the front door too (`RunWiring.spawn`, which `run.py` sets): the
`delegate` tool this module offers hands it its caller's wiring and its own seat, so every guarantee of a run
holds for its children. Only `run.py` calls it (the one
front door, `start_run`). Does not pin the workspace, open the session log or print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_local.agent.loop import Agent, AgentConfig, EventSink
from hermes_local.agent.team import ModelShelf, Role, apply_profile, offer_delegate, own_model
from hermes_local.config import RunWatch, Settings, home_dir, settings_for
from hermes_local.dialects import Dialect
from hermes_local.errors import UserError
from hermes_local.llm import LLM
from hermes_local.runtime.model import check_tool_use, dialect_for, qualified_settings
from hermes_local.runtime.tools import memory_store
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.tools import Approver, ToolRegistry, default_registry
from hermes_local.tools.effects.snapshot import steps_to
from hermes_local.tools.hooks import Hooks
from hermes_local.tools.registry import AskUser
from hermes_local.tools.setup import build_executor, tool_context
from hermes_local.tools.skills import offer_skills
from hermes_local.tools.toolsets import narrow, route, usable_tools

if TYPE_CHECKING:
    from hermes_local.longterm import LongTermMemory

# (the caller's wiring, the specialist's seat) -> its agent, started as a run of its own through `start_run`
Spawn = Callable[["RunWiring", "Seat"], Agent]

RUN = ("tool_choice", "max_tools_in_prompt")  # run settings `models qualify` may recommend (load ones: model.py)


@dataclass(frozen=True)
class RunWiring:
    """What every agent of one run shares (its own and its specialists')."""

    llm: LLM
    settings: Settings
    pin: PinnedWorkspace
    shelf: ModelShelf  # the specialists' own models, each loaded once for the run
    db: Path | None = None
    ask_user: AskUser | None = None  # who answers the `ask_user` tool (None: nobody)
    on_notice: Callable[[str], None] | None = None  # the tools' one-line notices
    plan_only: bool = False  # reads run, writes and dangerous calls become proposals
    spawn: Spawn | None = None  # starts a specialist's run through the front door (None: assembled here)
    session: str | None = None  # a specialist's caller: the session of the agent that delegates
    owner: str = ""  # whose run it is ("": the local user; else a serve token's digest): whose memory it uses


@dataclass(frozen=True)
class Seat:
    """One agent's own part of the run: its tools, approval path, event sink, place in the team and session."""

    registry: ToolRegistry | None
    approver: Approver | None
    sink: EventSink
    role: Role = Role()
    dialect: Dialect | None = None  # None: chosen for the seat's model
    instructions: str | None = None  # a request's own, after the configured rules and the routing note
    session_id: str | None = None  # checkpoints; the run's episode in long-term memory


def assemble(wiring: RunWiring, seat: Seat) -> Agent:
    """The agent of `seat`: `seat.registry`'s tools as the settings select them, confined to the pinned workspace,
    on the run's model unless the seat's profile names its own (`ModelShelf`), with `delegate` offered when the team
    allows it. A prompt override that fails to render is one line (UserError) and nothing is left open."""
    llm, dialect, role = wiring.llm, seat.dialect, seat.role
    own = own_model(wiring.settings, role.name)  # a specialist's profile names a model other than its caller's
    if own is not None:
        llm, dialect = wiring.shelf.get(own), None  # loaded once for the run (`ModelShelf`), in its own dialect
    settings, instructions = apply_profile(wiring.settings, role, seat.instructions)  # a specialist's own settings
    qualified = {k: v for k, v in qualified_settings(settings, getattr(llm, "model_path", None)).items() if k in RUN}
    if qualified:  # `models qualify` recorded these for this model file; the user's own settings win
        settings = settings.model_copy(update=qualified)
    if not dialect or (role.name and settings.dialect):
        dialect = dialect_for(settings, llm, check=own is not None)  # its own model's framing tokens, checked
    check_tool_use(dialect, settings)
    longterm = memory_store(settings, owner=wiring.owner, workspace=wiring.pin, on_notice=wiring.on_notice)
    remembering = settings.memory and longterm.enabled  # off: no recall, no episode, no `remember`
    notice = wiring.on_notice
    context = tool_context(settings, wiring.pin, longterm, db_path=wiring.db, n_ctx=llm.n_ctx, on_notice=notice)
    context.ask_user = wiring.ask_user
    # --tools / config `tools` and deny_tools decide what exists for this run, minus the tools that cannot work in it
    # (no --db, no allowed host, nobody to ask); a router model may narrow it to toolsets; routing decides the rest.
    full = seat.registry or default_registry()
    usable = dict(db=wiring.db is not None, hosts=bool(settings.allow_hosts), person=wiring.ask_user is not None)
    registry = usable_tools(full, settings.tools, settings.deny_tools, **usable, memory=remembering, on_notice=notice)
    if role.toolsets is not None:
        registry = narrow(registry, role.toolsets)

    def specialist(child: Role, tools: ToolRegistry, ask: Approver, sink: EventSink) -> Agent:  # same workspace
        # on its caller's model, settings and dialect, unless the child's profile names its own model
        caller = replace(wiring, llm=llm, settings=settings, session=seat.session_id)
        own_seat = Seat(tools, ask, sink, child, dialect, session_id=child.session)
        agent = wiring.spawn(caller, own_seat) if wiring.spawn is not None else assemble(caller, own_seat)
        executor.join(agent.executor, child.name or "")  # one run: its writes done, its checkpoints
        return agent

    offer_delegate(registry, settings, role, specialist, seat.sink, full, lambda: executor.approver)  # built below
    skills = offer_skills(registry, wiring.pin.path, settings.deny_tools, None if role.name else notice)
    plan = route(registry, settings.max_tools_in_prompt)
    executor = build_executor(
        settings, registry, context, seat.approver, plan=wiring.plan_only, session_id=seat.session_id
    )
    # The user's standing rules (--instructions / config) first, then routing's note on the tool catalog and the
    # skills' catalog (none for a model whose tool_call_format is "none": models.toml says it cannot call tools, it
    # only answers), then the request's own instructions.
    no_tools = dialect.call_format == "none"
    routing = "" if no_tools else plan.instructions
    skills = "" if no_tools or settings.tool_choice == "none" else skills  # names and one line each (tools/skills.py)
    joined = "\n\n".join(text for text in (settings.instructions, routing, skills, instructions) if text)
    config = settings_for(AgentConfig, settings, instructions=joined, offered_tools=plan.offered)
    if no_tools:
        config.tool_choice = "none"
    on_event = steps_to(executor.checkpoints, seat.sink)  # the checkpoint recorder learns each call's step
    if settings.hooks:  # the user's [[hooks]]: run sandboxed on pre_tool, post_tool, stop and session_end
        executor.hooks = Hooks(settings.hooks, context.sandbox, wiring.pin, seat.session_id or "", seat.sink)
        on_event = executor.hooks.watch(on_event)
    recall = partial(_recall, longterm, executor.approver) if remembering else None
    agent = Agent(llm, executor, config, on_event=on_event, recall=recall, dialect=dialect)
    if remembering and not role.name:  # the run's own episode; a specialist's sub-run is part of it
        failed = settings.memory_failed == "mark"
        agent.learn = partial(longterm.add_episode, session_id=seat.session_id, keep_failed=failed, on_error=notice)
    agent.closers.append(longterm.close)
    if executor.hooks is not None:
        agent.closers.append(executor.hooks.session_end)
    agent.closers.append(RunWatch().end)  # a safety setting lowered on disk meanwhile waits for a person's yes
    try:
        agent.system_prompt()  # a prompt override that fails to render is the user's to fix, now
    except Exception as exc:  # noqa: BLE001 - jinja raises many kinds
        agent.close()
        raise UserError(
            f"the system prompt does not render ({type(exc).__name__}: {exc}); check {home_dir() / 'prompts'}"
        ) from exc
    return agent


def _recall(longterm: LongTermMemory, approver: Approver, goal: str) -> list[str]:
    """The lines a run with `goal` starts with (once). A recalled item that is not trusted is untrusted content
    the run has read: from here on a dangerous call or `remember` is asked again, as after an untrusted result."""
    hits = longterm.hits(goal)
    tainted = next((h.item for h in hits if not h.item.trusted), None)
    if tainted is not None and not approver.untrusted_from:
        what = "an episode of a run that read untrusted content" if tainted.kind == "episode" else "an unstated fact"
        approver.untrusted_from = f"long-term memory (recalled item {tainted.id}, {what})"
    return [h.line for h in hits]
