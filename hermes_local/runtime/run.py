"""The one front door of a run: a `RunSpec` says what to run, `start_run` opens everything it needs, and the
`RunHandle` it returns owns all of it until it closes.

Every way to start a run goes through here: `hermes-local run`, `chat` and `prompt`, `serve`'s runs (and the
schedules it fires), `eval`, a workflow (its tool steps and its summary), `sessions apply`, and a team's children
(each started here with its caller's wiring, `RunHandle._spawn`). In this order `start_run` pins the workspace (a
folder swapped since it was pinned is refused, never followed; with `folder`, or the identity a resumed session
logged, the recorded path is opened again without following a symlink and must still be that folder), builds
the tool registry (unless the spec brings one) and checks the selection and the team against it, loads a deferred
model (its framing tokens checked before the weights), opens the session log, routes a team's task, and assembles the
agent. Whatever it opened is closed again when a later step fails, and by `RunHandle.close()` otherwise. Events fan
out to the typed `Sinks`: the session log (logged events only), a display (every event), and a token stream (each
streamed piece, pushed as it comes).

A spec without a model (`start_run(spec, None)`) opens the tool side only (pin, registry, executor, session log)
for the doors that run recorded calls rather than a model (`sessions apply`, a workflow's steps). Does not print,
parse flags or speak HTTP.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hermes_local.agent.loop import Agent, EventSink
from hermes_local.agent.memory import Memory
from hermes_local.agent.result import RunResult
from hermes_local.agent.router import front
from hermes_local.agent.team import ModelShelf, Role
from hermes_local.config import Settings, load_settings
from hermes_local.dialects import Dialect
from hermes_local.errors import UserError
from hermes_local.events import Event, RunStart, Token
from hermes_local.llm import LLM
from hermes_local.runtime.assemble import RunWiring, Seat, assemble
from hermes_local.runtime.model import Model, dialect_for, load_llm
from hermes_local.runtime.tools import build_registry, check_team, role_catalog
from hermes_local.sandbox.workspace import FolderId, PinnedWorkspace
from hermes_local.session import SessionLog
from hermes_local.tools import Approver, Executor, ToolRegistry, default_registry
from hermes_local.tools.registry import AskUser

LOCAL_OWNER = "local"  # the person at this machine's terminal (the CLI, a library caller)


@dataclass(kw_only=True)
class RunSpec:
    """What to run, and on whose behalf: everything a door knows about a run before it starts."""

    task: str = ""  # the goal ("" for a chat, a resume without a new message, or a tool-only run)
    settings: Settings | None = None  # the settings in force (None: `load_settings()`: config file, environment)
    overrides: Mapping[str, Any] = field(default_factory=dict)  # this run's own settings on top (max_steps, ...)
    workspace: Path | str | PinnedWorkspace | None = "."  # a path is pinned by `start_run`; a pin is checked (not
    # swapped); None: the folder a resumed session (`logged`) recorded, else "."
    folder: FolderId | None = None  # the identity a plan or a schedule recorded (a resumed session's: from `logged`)
    owner: str = LOCAL_OWNER  # who asked: the local user, or a digest of the serve token that did
    tools: ToolRegistry | None = None  # the run's registry (None: built from the settings and `tools_modules`)
    tools_modules: Sequence[str] = ()  # `--tools-module` files or modules, when the registry is built here
    approver: Approver | None = None  # who decides writes and dangerous calls (None: the settings' allow/deny lists)
    ask_user: AskUser | None = None  # who answers the `ask_user` tool (None: nobody; it is left out)
    plan: bool = False  # plan-only: reads run, writes and dangerous calls become proposals
    team: bool = False  # route the task to a specialist, or to the manager who delegates
    role: Role | None = None  # its place in a team, when the caller decided it (None: the front, or the router's pick)
    logged: Sequence[Event] = ()  # the events a resumed or continued session already holds (its team's pick too)
    db: Path | None = None  # the SQLite database `query_database` reads
    session_id: str | None = None  # the session to log to (None: a new one) and the id checkpoints are kept under
    log: bool = True  # keep a session log (False: an eval case, a prompt preview, a workflow's summary)
    parent: str | None = None  # the run this one serves (a team's child), when it has one
    instructions: str | None = None  # the request's own instructions, after the configured ones
    output_cap: int | None = None  # characters of a tool result kept (None: from the model's context size)
    on_notice: Callable[[str], None] | None = None  # the tools' one-line notices (e.g. a server that did not start)


@dataclass(frozen=True)
class Sinks:
    """Where a run's events go besides its session log: `display` gets every event (a terminal printer, a stream),
    `tokens` each piece of the model's reply as it is decoded, `guard` is called before each event (a cancelled
    service run raises there, so it stops at its next event)."""

    display: EventSink | None = None
    tokens: Callable[[str], None] | None = None
    guard: Callable[[], None] | None = None


class RunHandle:
    """One run and everything it owns: the pinned workspace, the registry, the session log, the agent (with its
    team's children) and their closers. A context manager; `close()` is safe to call twice."""

    def __init__(self, spec: RunSpec, model: Model | None, sinks: Sinks, caller: RunWiring | None = None) -> None:
        self.spec = spec
        self._caller = caller  # a specialist's run: its caller's wiring (model, settings, shelf, plan-only, ...)
        self.model = model
        self.sinks = sinks
        settings = spec.settings or load_settings()
        self.settings = settings.model_copy(update=dict(spec.overrides)) if spec.overrides else settings
        self.pin: PinnedWorkspace | None = None
        self.registry: ToolRegistry | None = None
        self.session: SessionLog | None = None
        self.agent: Agent | None = None
        self._executor: Executor | None = None  # a tool-only run's
        self._closers: list[Callable[[], None]] = []

    # -- opening ---------------------------------------------------------------------------------------------
    def _open(self) -> None:
        from hermes_local.prompts import check_overrides

        spec = self.spec
        if self.model is not None:
            check_overrides()  # a misnamed or broken prompt override is one line, before anything starts
        self.pin = self._pin(spec.workspace)
        self.registry = self._registry()
        if self.model is not None:
            self.model.prepare(self.settings, spec.on_notice)  # a deferred model loads now, after the checks
        if spec.log:
            self.session = SessionLog(spec.session_id)
            self._closers.append(self.session.close)
        if self.model is None:
            self._executor = self._tool_side()
        else:
            self.agent = self._assemble(self.model)

    def _pin(self, workspace: Path | str | PinnedWorkspace | None) -> PinnedWorkspace:
        if isinstance(workspace, PinnedWorkspace):
            workspace.check()  # the folder the run was accepted with, or a one-line refusal
            return workspace
        spec = self.spec
        what = f"session {spec.session_id}" if spec.session_id else "the run"
        folder = spec.folder or recorded_folder(spec.logged)
        if folder is None:
            pin = PinnedWorkspace.open("." if workspace is None else workspace)
            self._closers.append(pin.close)
            if spec.logged and spec.on_notice is not None:  # an older session: its folder as it is now
                spec.on_notice(f"note: {what} recorded no folder identity (an older version wrote it); it goes on in "
                               f"{pin.path} as that folder is now")  # fmt: skip
            return pin
        pin = PinnedWorkspace.reopen(folder, what)  # the folder recorded, or a one-line refusal: never redirected
        self._closers.append(pin.close)
        if workspace is not None and os.fspath(workspace) != folder.path and not _same_folder(workspace, pin):
            raise UserError(
                f"--workspace {workspace} is not the folder {what} ran in ({folder.path}); leave --workspace out "
                "to go on there, or start a new run in the other folder"
            )
        return pin

    def _registry(self) -> ToolRegistry:
        from hermes_local.tools.toolsets import check_spec

        if self.spec.tools is not None:
            return self.spec.tools
        spec = self.spec
        registry = build_registry(spec.tools_modules, self.settings, on_notice=spec.on_notice, workspace=self.pin)
        self._closers.append(registry.close)  # MCP servers started for this run stop with it
        if self.model is not None:  # what a model would be offered
            check_spec(registry, self.settings.tools)  # a mistyped --tools name is one line, before the model loads
            check_team(registry, self.settings)  # so is a profile naming a missing tool or model
        return registry

    @property
    def workspace(self) -> PinnedWorkspace:
        """The run's pinned workspace (the folder it was accepted with, used through its fd)."""
        if self.pin is None:
            raise RuntimeError("the run is not open")
        return self.pin

    @property
    def session_id(self) -> str | None:
        """The id the run is logged and checkpointed under (None: neither)."""
        return self.session.id if self.session is not None else self.spec.session_id

    def emit(self, event: Event) -> None:
        """The run's event sink: the guard, then the session log (logged events), the display, the token stream."""
        sinks = self.sinks
        if sinks.guard is not None:
            sinks.guard()
        if self.session is not None:
            self.session.log(event)
        if sinks.display is not None:
            sinks.display(event)
        if sinks.tokens is not None and isinstance(event, Token):
            sinks.tokens(event.text)

    def _assemble(self, model: Model) -> Agent:
        spec, llm = self.spec, model.loaded
        assert self.pin is not None and self.registry is not None
        role = spec.role or Role(session=self.session.id if self.session is not None else "")
        if spec.team and spec.role is None:  # the router picks who takes it (a resumed run keeps its logged pick)
            role = self._route(llm, model.dialect or dialect_for(self.settings, llm), role.session)
        seat = Seat(self.registry, spec.approver, self.emit, role, model.dialect, spec.instructions, self.session_id)
        if self._caller is not None:  # a specialist: its caller's wiring, in the workspace pin checked above
            return assemble(replace(self._caller, pin=self.pin), seat)
        shelf = ModelShelf(self._specialist_model, {self.settings.model: llm} if self.settings.model else {})
        self._closers.append(shelf.clear)
        wiring = RunWiring(
            llm, self.settings, self.pin, shelf, spec.db, spec.ask_user, spec.on_notice, spec.plan, owner=spec.owner
        )  # the owner: whose memory the run recalls and writes
        return assemble(replace(wiring, spawn=self._spawn), seat)

    def _route(self, llm: LLM, dialect: Dialect, session: str) -> Role:
        """Who takes a `--team` task (`agent.router.front`: the router's pick, or the one the log already holds).
        With `router_model`, a second small model loaded beside the main one (its own engine) picks, and also picks
        the toolsets the chosen role needs among those this run can use (its registry, its database, whether
        someone can answer `ask_user`), which its prompt is then narrowed to."""
        spec, settings = self.spec, self.settings
        if settings.router_model and not spec.logged:
            small = settings.model_copy(update={"model": settings.router_model, "n_ctx": 2048, "parallel": 1})
            llm = load_llm(small)
            dialect = dialect_for(small, llm)
        tools, db, person = self.registry or default_registry(), spec.db is not None, spec.ask_user is not None

        def catalog(chosen: str) -> dict[str, str]:
            return role_catalog(settings, tools, chosen, db=db, person=person)

        return front(spec.task, settings, llm, dialect, session, self.emit, list(spec.logged), catalog)

    def _spawn(self, caller: RunWiring, seat: Seat) -> Agent:
        """A specialist's run, started through the door with its caller's wiring: the same workspace (its pin
        checked again), owner, approval path (labelled), plan-only flag and database; logged by the team in the
        child session `seat.session_id`, its `parent` the session of the agent that delegated. The agent it
        returns owns the run."""
        spec = RunSpec(
            settings=caller.settings, workspace=caller.pin, owner=self.spec.owner, tools=seat.registry,
            approver=seat.approver, ask_user=caller.ask_user, plan=caller.plan_only, role=seat.role, db=caller.db,
            session_id=seat.session_id, log=False, parent=caller.session, on_notice=caller.on_notice,
        )  # fmt: skip
        child = _start(spec, Model(caller.llm, seat.dialect), Sinks(display=seat.sink), caller)
        return child.detach()

    def detach(self) -> Agent:
        """Hand the run's agent to the caller, who then owns the whole run: closing the agent closes the run."""
        agent, self.agent = self._agent(), None
        agent.closers.insert(0, self.close)  # runs last, after the agent's own closers
        return agent

    def _specialist_model(self, name: str) -> LLM:
        """A profile's own model, loaded once for the run (`ModelShelf`)."""
        return load_llm(self.settings.model_copy(update={"model": name}))

    def _tool_side(self) -> Executor:
        """The executor of a run without a model: the settings' approval policy over the registry, checkpointed
        under the session."""
        from hermes_local.longterm import LongTermMemory
        from hermes_local.runtime.tools import memory_scope
        from hermes_local.tools.setup import build_executor, tool_context

        assert self.pin is not None and self.registry is not None
        longterm = LongTermMemory(scope=memory_scope(self.settings, self.spec.owner, self.pin))
        self._closers.append(longterm.close)
        context = tool_context(self.settings, self.pin, longterm, db_path=self.spec.db, on_notice=self.spec.on_notice)
        if self.spec.output_cap is not None:
            context.output_cap = self.spec.output_cap
        return build_executor(self.settings, self.registry, context, self.spec.approver, session_id=self.session_id)

    # -- running ---------------------------------------------------------------------------------------------
    @property
    def executor(self) -> Executor:
        """The run's executor: its agent's, or a tool-only run's."""
        if self.agent is not None:
            return self.agent.executor
        assert self._executor is not None
        return self._executor

    def _agent(self) -> Agent:
        if self.agent is None:
            raise RuntimeError("this run was started without a model; it runs tool calls only (`executor`)")
        return self.agent

    def run(self) -> RunResult:
        """Run the spec's task to its end."""
        return self._named(self._agent().run(self.spec.task))

    def resume(self, events: Sequence[Event] | None = None, message: str | None = None) -> RunResult:
        """Continue the logged session (`events`, default the spec's `logged`): a killed run from where it stopped,
        or a finished one with `message` as a new turn."""
        from hermes_local.events import RunStart
        from hermes_local.longterm import untrusted_recall

        logged = list(self.spec.logged if events is None else events)
        agent = self._agent()
        start = next((e for e in logged if isinstance(e, RunStart)), None)
        if start is not None and untrusted_recall(start.recalled) and not agent.executor.approver.untrusted_from:
            agent.executor.approver.untrusted_from = "long-term memory recalled at the start of the resumed run"
        return self._named(agent.resume(logged, message=message))

    def chat(self, memory: Memory | None, message: str) -> tuple[Memory, RunResult]:
        """One turn of a conversation (`memory` None: the first)."""
        memory, result = self._agent().chat(memory, message)
        return memory, self._named(result)

    def proposals(self, result: RunResult) -> list[dict[str, Any]]:
        """A plan-only run's proposals in order as `sessions apply` runs them, its team's specialists' included
        (read from its session log; a run without one: its own)."""
        from hermes_local.agent.plan import plan_of
        from hermes_local.session import read_events

        if self.session is None:
            return result.proposals()
        return plan_of(self.session.id, read_events(self.session.path)).listing()

    def _named(self, result: RunResult) -> RunResult:
        if self.session is not None:
            result.session_id = self.session.id  # a hand-off then names `run --continue ID`
        return result

    # -- closing ---------------------------------------------------------------------------------------------
    def own(self, closer: Callable[[], None]) -> None:
        """Run `closer` when the run closes (after the agent, before what the run opened before it)."""
        self._closers.append(closer)

    def close(self) -> None:
        """Close the agent (its tools' servers, its stores), then what the run opened, newest first."""
        agent, self.agent = self.agent, None
        try:
            if agent is not None:
                agent.close()
        finally:
            while self._closers:
                with contextlib.suppress(Exception):
                    self._closers.pop()()

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def recorded_folder(events: Sequence[Event]) -> FolderId | None:
    """The identity of the folder a logged run recorded at its start (None: none logged, or an older log)."""
    start = next((e for e in events if isinstance(e, RunStart)), None)
    return FolderId.from_dict(start.folder) if start is not None else None


def _same_folder(path: Path | str, pin: PinnedWorkspace) -> bool:
    """Whether `path` (followed as a person typed it) names the pinned folder."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == (pin.dev, pin.ino)


def start_run(spec: RunSpec, model: Model | None, sinks: Sinks | None = None) -> RunHandle:
    """Open the run `spec` describes on `model` (None: its tool side only); see the module docstring. A user's
    mistake found on the way (a missing workspace, a mistyped tool, a model without the framing tokens, a broken
    prompt override) is one line (UserError) and leaves nothing open."""
    return _start(spec, model, sinks or Sinks(), None)


def _start(spec: RunSpec, model: Model | None, sinks: Sinks, caller: RunWiring | None) -> RunHandle:
    handle = RunHandle(spec, model, sinks, caller)
    try:
        handle._open()
    except BaseException:
        handle.close()
        raise
    return handle
