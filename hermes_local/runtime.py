"""Wiring: settings -> the model, an LLM, a tool registry, an executor and an `Agent`.

Shared by the CLI, the service and Python callers so all build runs the same way. `find_model` resolves `--model`
once (registry entry, file, GGUF header) into a `ModelSource` that the tokenizer, the dialect choice and the engine
(`engines.load_engine`, which keeps one loaded model per process) all take. Does not print anything and holds no
logic worth testing on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_local.agent.loop import Agent, AgentConfig, EventSink
from hermes_local.agent.router import front
from hermes_local.agent.team import ModelShelf, Role, apply_profile, offer_delegate, own_model
from hermes_local.config import RunWatch, Settings, settings_for
from hermes_local.dialects import Dialect, require_framing, select_dialect
from hermes_local.dialects.gguf import GGUFDialect
from hermes_local.engines import EngineModel, load_embedder, load_engine
from hermes_local.engines.replay import is_replay_spec
from hermes_local.errors import UserError
from hermes_local.llm import LLM
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.tools import Approver, ToolRegistry, default_registry
from hermes_local.tools.modules import load_tools_module
from hermes_local.tools.registry import AskUser, tool_warnings
from hermes_local.tools.setup import build_executor, tool_context
from hermes_local.tools.snapshot import steps_to
from hermes_local.tools.toolsets import narrow, route, router_catalog, usable_tools

if TYPE_CHECKING:
    from hermes_local.longterm import LongTermMemory
    from hermes_local.models.gguf import GGUFHeader
    from hermes_local.models.registry import ModelChoice

ENTRY_LOAD_OPTIONS = ("n_ctx", "n_gpu_layers", "main_gpu", "tensor_split", "rpc_servers")


@dataclass(frozen=True)
class ModelSource:
    """The model of a run, found once (`find_model`) and handed to the tokenizer, the dialect and the engine."""

    spec: str | None  # `--model` as given
    replay: bool = False  # `replay:FILE`: recorded outputs, no model file
    choice: ModelChoice | None = None  # the models.toml entry `spec` named
    path: Path | None = None  # the GGUF on disk (in-process engine)
    header: GGUFHeader | None = None  # its header, parsed and checked once

    def engine_model(self, settings: Settings) -> EngineModel:
        """What the engine loads: the file, the names a server may report for it, and the registry entry's
        `n_ctx`, `n_gpu_layers`, `main_gpu`, `tensor_split` and `rpc_servers` unless the user set them
        (flag, env or config file)."""
        names: list[str] = [self.spec] if self.spec else []
        load: dict[str, Any] = {}
        if self.choice is not None:
            names += [self.choice.name, self.choice.spec.file]
            for name in ENTRY_LOAD_OPTIONS:
                value = getattr(self.choice.entry, name)
                if name not in settings.model_fields_set and value is not None:
                    load[name] = value
        return EngineModel(path=self.path, header=self.header, names=tuple(names), load=load)


def find_model(settings: Settings) -> ModelSource:
    """`settings.model` resolved once: the replay marker; for a remote engine the registry entry it names
    (the server holds the file); otherwise the GGUF on disk, its registry entry and its checked header."""
    if is_replay_spec(settings.model) or settings.engine != "llama-cpp":
        return _named_model(settings)
    from hermes_local.models.registry import resolve

    path, choice, header = resolve(settings.model)
    return ModelSource(settings.model, choice=choice, path=path, header=header)


def load_llm(
    settings: Settings, on_info: Callable[[str], None] | None = None, source: ModelSource | None = None, *,
    case_id: str | None = None) -> LLM:  # fmt: skip
    """The run's engine (`engines.load_engine`) for `source` (default: `find_model(settings)`).

    `replay:FILE` -> the replay model (`replay:DIR`: the recording of eval case `case_id`); a remote
    `settings.engine` -> its HTTP engine; otherwise the GGUF, loaded once per process. `on_info` receives
    the memory estimate before the weights are loaded.
    """
    source = source or find_model(settings)
    return load_engine(settings, source.engine_model(settings), on_info=on_info, case_id=case_id)


def load_tokenizer(settings: Settings, source: ModelSource | None = None) -> LLM:
    """The model's tokenizer only (llama.cpp vocab_only: no weights), the replay model, or the remote engine
    (the server tokenizes; connecting also checks it serves the right model)."""
    source = source or find_model(settings)
    return load_engine(settings, source.engine_model(settings), vocab_only=True)


def dialect_for(settings: Settings, llm: LLM, source: ModelSource | None = None, *, check: bool = False) -> Dialect:
    """The prompt format: `--dialect`, else the registry's `chat_format`, else the GGUF's metadata; its call
    syntax from the registry's `tool_call_format` (see `calls/formats.py`).

    `source` is the run's `find_model` result; without it, the registry entry `settings.model` names.
    The GGUF header is the source's, else that of the file the engine says it serves (`model_path`).
    With `check`, a real model whose vocabulary lacks the dialect's framing tokens is refused (one line,
    exit 2, naming --dialect); the replay model has no real vocabulary and is never refused.
    """
    if source is None:
        source = _named_model(settings)
    if source.replay:
        return select_dialect(settings.dialect or "hermes")
    header = source.header
    served = getattr(llm, "model_path", None)
    if header is None and served and Path(served).is_file():
        from hermes_local.models.gguf import read_header

        header = read_header(served)
    choice = source.choice
    chat_format = choice.entry.chat_format if choice else None
    call_format = choice.entry.tool_call_format if choice else None
    dialect = select_dialect(
        settings.dialect, chat_format=chat_format, header=header, llm=llm, tool_call_format=call_format
    )
    if isinstance(dialect, GGUFDialect) and header is not None and hasattr(llm, "detokenize"):
        ids = [header.metadata.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot")]
        dialect.add_stops(llm.detokenize([i]) for i in ids if isinstance(i, int))  # the GGUF's EOS/EOT texts
    if check:
        require_framing(dialect, llm)
    return dialect


def _named_model(settings: Settings) -> ModelSource:
    """The registry entry `settings.model` names, looked up without finding its file (already loaded)."""
    if is_replay_spec(settings.model):
        return ModelSource(settings.model, replay=True)
    from hermes_local.models.registry import lookup

    return ModelSource(settings.model, choice=lookup(settings.model) if settings.model else None)


def check_tool_use(dialect: Dialect, settings: Settings) -> None:
    """Refuse (one line) `tool_choice = "required"` for a model whose tool_call_format is "none"."""
    if dialect.call_format == "none" and settings.tool_choice == "required":
        raise UserError(
            f'{settings.model} has tool_call_format = "none" in models.toml, so it cannot call tools; '
            "drop --tool-choice required, or set its tool_call_format in $HERMES_LOCAL_HOME/models.toml"
        )


def team_role(
    task: str,
    settings: Settings,
    llm: LLM,
    dialect: Dialect,
    session: str,
    sink: EventSink,
    logged: list | None = None,
    *,
    tools: ToolRegistry | None = None,
    db: bool = False,
    person: bool = False,
) -> Role:
    """Who takes a `--team` task (`agent.router.front`: the router's pick, or the one `logged` holds), for cli, service
    and eval. With `router_model`, a second small model loaded beside the main one (its own engine) picks, and also
    picks the toolsets the chosen role needs among those it would see of `tools` (the run's registry; `db`: a
    database was given, `person`: someone can answer `ask_user`), which its prompt is then narrowed to."""
    if settings.router_model and not logged:
        small = settings.model_copy(update={"model": settings.router_model, "n_ctx": 2048, "parallel": 1})
        llm = load_llm(small)
        dialect = dialect_for(small, llm)

    def catalog(chosen: str) -> dict[str, str]:
        return role_catalog(settings, tools or default_registry(), chosen, db=db, person=person)

    return front(task, settings, llm, dialect, session, sink, logged or [], catalog)


def role_catalog(
    settings: Settings, tools: ToolRegistry, chosen: str, *, db: bool, person: bool = False
) -> dict[str, str]:
    """The toolsets (name -> what they hold) a team's `chosen` role (a profile or "manager") would see of `tools` in
    a run (`db`: a database given, `person`: someone to ask): what a router model chooses among."""
    own, _ = apply_profile(settings, Role(chosen if chosen in settings.agents else None), None)
    hosts = bool(own.allow_hosts)
    return router_catalog(usable_tools(tools, own.tools, own.deny_tools, db=db, hosts=hosts, person=person))


def build_registry(
    tools_modules: Iterable[str] = (),
    settings: Settings | None = None,
    *,
    on_notice: Callable[[str], None] | None = None,
    workspace: Path | PinnedWorkspace | None = None,
) -> ToolRegistry:
    """Built-ins, `remember`, `--tools-module` tools and (with `settings`) the MCP servers' tools, with sources.

    MCP servers start here, once for the run; `registry.close()` (called by `Agent.close()`) stops them.
    A server that fails to start is one `on_notice` line and its tools are left out. Stdio servers run in
    the command sandbox (`settings.sandbox`), in their `cwd` or else `workspace` (through its fd when pinned).
    """
    from hermes_local.longterm import LONGTERM_TOOLS

    registry = default_registry()
    for t in LONGTERM_TOOLS:
        registry.register(t)
    for spec in tools_modules:
        for t in load_tools_module(spec):
            registry.register(t, source=f"module:{spec}")
            for warning in tool_warnings(t):  # a user's tool: its name and description
                if on_notice is not None:
                    on_notice(f"warning: {warning}")
    if settings is not None and settings.mcp.servers:
        from hermes_local.tools.mcp import McpManager

        manager = McpManager(
            settings.mcp.servers,
            allow_hosts=list(settings.allow_hosts),
            on_notice=on_notice,
            sandbox=SandboxPolicy.from_settings(settings),
            workspace=workspace,
            # a server that fails to start, or later crashes for good: logged by the agent as McpServerFailed
            on_down=lambda name, error: registry.failed_sources.__setitem__(f"mcp:{name}", error),
        )
        registry.add_closer(manager.close)
        try:
            for t, source in manager.tools():
                registry.register(t, source=source)
        except BaseException:
            registry.close()
            raise
    return registry


def memory_store(settings: Settings, path: Path | None = None) -> LongTermMemory:
    """The run's long-term memory (`path`, default memory.db in the home) with the embedding model the settings
    find (`longterm.open_memory`)."""
    from hermes_local.longterm import open_memory

    return open_memory(settings, load_embedder, path)


def build_agent(
    llm: LLM,
    settings: Settings,
    *,
    workspace: Path | PinnedWorkspace,
    registry: ToolRegistry | None = None,
    approver: Approver | None = None,
    on_event: EventSink | None = None,
    db_path: Path | None = None,
    dialect: Dialect | None = None,
    ask_user: AskUser | None = None,
    plan: bool = False,
    on_notice: Callable[[str], None] | None = None,
    extra_instructions: str | None = None,
    role: Role | None = None,
    session_id: str | None = None,
) -> Agent:
    """The agent of one run: `registry`'s tools as the settings select them, confined to `workspace`.
    With `plan` it is a plan-only run (`run --plan`): reads run, writes and dangerous calls become proposals.

    `workspace` is pinned here (opened once, closed with the agent), or is the caller's `PinnedWorkspace`
    (the service pins it when the run is accepted): refused when it was swapped since, never followed.

    `dialect` defaults to `dialect_for(settings, llm)`. The system turn carries the user's standing
    rules (`settings.instructions`), then the tool routing note, then `extra_instructions` (a request's own).
    `ask_user` answers the `ask_user` tool (None: nobody to ask); `on_notice` receives the tools' one-line
    notices; `session_id` (the log's) turns checkpoints on and names the run's episode in long-term memory.
    `role`: its place in a team (`agent/team.py`); with profiles it may be offered `delegate` (same sandbox and
    workspace; a specialist runs on its profile's `model`, loaded once for the run, else on its caller's), and a
    router model's toolsets narrow its tools.
    """
    from hermes_local.prompts import check_overrides

    check_overrides()
    pin, opened = pinned(workspace)
    own = {settings.model: llm} if settings.model else {}  # a profile naming the run's model shares it
    shelf = ModelShelf(lambda spec: load_llm(settings.model_copy(update={"model": spec})), own)  # specialists' own
    try:
        agent = _build_agent(
            llm,
            settings,
            pin,
            registry,
            approver,
            on_event,
            db_path,
            dialect,
            ask_user,
            on_notice,
            extra_instructions,
            role or Role(),
            plan_only=plan,
            close_pin=opened,
            session_id=session_id,
            shelf=shelf,
        )
    except BaseException:
        if opened:
            pin.close()
        raise
    agent.closers.append(shelf.clear)
    return agent


def pinned(workspace: Path | PinnedWorkspace) -> tuple[PinnedWorkspace, bool]:
    """(the pinned workspace, whether it was opened here): a path is opened now, a pin is checked (not swapped)."""
    if isinstance(workspace, PinnedWorkspace):
        workspace.check()
        return workspace, False
    return PinnedWorkspace.open(workspace), True


def _build_agent(
    llm: LLM,
    settings: Settings,
    pin: PinnedWorkspace,
    registry: ToolRegistry | None,
    approver: Approver | None,
    on_event: EventSink | None,
    db_path: Path | None,
    dialect: Dialect | None,
    ask_user: AskUser | None,
    on_notice: Callable[[str], None] | None,
    extra_instructions: str | None,
    role: Role,
    *,
    plan_only: bool = False,
    close_pin: bool,
    session_id: str | None = None,
    shelf: ModelShelf,
) -> Agent:
    from hermes_local.config import home_dir

    own = own_model(settings, role.name)  # a specialist's profile names a model other than its caller's
    if own is not None:
        llm, dialect = shelf.get(own), None  # loaded once for the run (`ModelShelf`), in its own dialect
    settings, extra_instructions = apply_profile(settings, role, extra_instructions)  # a specialist's own settings
    if not dialect or (role.name and settings.dialect):
        dialect = dialect_for(settings, llm, check=own is not None)  # its own model's framing tokens, checked
    check_tool_use(dialect, settings)
    longterm = memory_store(settings)
    remembering = settings.memory and longterm.enabled  # off: no recall, no episode, no `remember`
    context = tool_context(settings, pin, longterm, db_path=db_path, n_ctx=llm.n_ctx, on_notice=on_notice)
    context.ask_user = ask_user
    # --tools / config `tools` and deny_tools decide what exists for this run, minus the tools that cannot work in it
    # (no --db, no allowed host, nobody to ask); a router model may narrow it to toolsets; routing decides the rest.
    full = registry or default_registry()
    usable = dict(db=db_path is not None, hosts=bool(settings.allow_hosts), person=ask_user is not None)
    registry = usable_tools(
        full, settings.tools, settings.deny_tools, **usable, memory=remembering, on_notice=on_notice
    )
    if role.toolsets is not None:
        registry = narrow(registry, role.toolsets)

    def specialist(child: Role, tools: ToolRegistry, ask: Approver, sink: EventSink) -> Agent:  # same workspace
        args = (tools, ask, sink, db_path, dialect, ask_user, on_notice, None, child)  # a plan-only run's too
        return _build_agent(
            llm, settings, pin, *args, plan_only=plan_only, close_pin=False, session_id=child.session, shelf=shelf
        )  # on this model, unless the child's profile names its own

    sink = on_event or (lambda event: None)
    offer_delegate(registry, settings, role, specialist, sink, full, lambda: executor.approver)  # built just below
    plan = route(registry, settings.max_tools_in_prompt)
    executor = build_executor(settings, registry, context, approver, plan=plan_only, session_id=session_id)
    # The user's standing rules (--instructions / config) first, then routing's note on the tool catalog
    # (none for a model whose tool_call_format is "none": models.toml says it cannot call tools, it only answers),
    # then the request's own instructions.
    no_tools = dialect.call_format == "none"
    routing = "" if no_tools else plan.instructions
    instructions = "\n\n".join(text for text in (settings.instructions, routing, extra_instructions) if text)
    config = settings_for(AgentConfig, settings, instructions=instructions, offered_tools=plan.offered)
    if no_tools:
        config.tool_choice = "none"
    on_event = steps_to(executor.checkpoints, on_event)  # the checkpoint recorder learns each call's step
    recall = longterm.recall if remembering else None
    agent = Agent(llm, executor, config, on_event=on_event, recall=recall, dialect=dialect)
    if remembering and not role.name:  # the run's own episode; a specialist's sub-run is part of it
        failed = settings.memory_failed == "mark"
        agent.learn = partial(longterm.add_episode, session_id=session_id, keep_failed=failed, on_error=on_notice)
    agent.closers.append(longterm.close)
    agent.closers.append(RunWatch().end)  # a safety setting lowered on disk meanwhile waits for a person's yes
    if close_pin:
        agent.closers.append(pin.close)
    try:
        agent.system_prompt()  # a prompt override that fails to render is the user's to fix, now
    except Exception as exc:  # noqa: BLE001 - jinja raises many kinds
        agent.close()
        raise UserError(
            f"the system prompt does not render ({type(exc).__name__}: {exc}); check {home_dir() / 'prompts'}"
        ) from exc
    return agent
