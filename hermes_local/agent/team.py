"""A team (issue 30): delegations as child sessions, their envelopes, and the specialists' own models.

`Team.delegate` is the runner behind the `delegate` tool (`tools/builtin/delegate.py`). A sub-run is an ordinary
`Agent` run, built by `make_agent` (the front door, `runtime/assemble.py`, from the parent run's wiring: the profile's
tools, instructions and step limit, the parent's labelled approver, sandbox and workspace), logged as a session of its
own whose id is derived from the parent's and the call (`<parent>.<agent>-<digest>`), whose first event names the
parent and the call, while the parent's log gets a `Delegation` event when it starts and ends. Asked again for the
same call (the parent was resumed), an ended child's envelope is read back from its log, never re-run, and an
unfinished child is resumed, so a finished child write is never repeated (the same call made again later in a run is
answered the same way, as a finished write is). Whatever happens, the caller gets an `Envelope`, never an exception;
each logged event of the child also reaches the caller's sink as a `ChildEvent` (its terminal, its stream), never its
log, except a plan-only child's `Proposal`, which goes into the caller's log labelled with the specialist (the run's
plan holds it). `Role` is an agent's place in a team, `apply_profile` a specialist's settings, `offer_delegate` the
wiring's one call that gives an agent the `delegate` tool. A specialist runs on its caller's model unless its profile
names another (`model`): `ModelShelf` keeps those of one run, each loaded once, by the wiring's loader, on first use.
The router at the front is `router.py`. Does not load models, print, or know the CLI."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from hermes_local.agent.loop import Agent, EventSink
from hermes_local.config import Settings
from hermes_local.events import Delegation, Event, Proposal, RunEnd, RunResumed, RunStart, ToolFinished, ToolOutcome
from hermes_local.llm import LLM
from hermes_local.outcome import arguments_digest
from hermes_local.profiles import DELEGATE, AgentProfile
from hermes_local.session import SessionLog, new_session_id, read_events, sessions_dir
from hermes_local.textsafe import terminal_safe
from hermes_local.tools.approval import Approver
from hermes_local.tools.builtin.delegate import Envelope, Status, delegate_tool, labelled_approver
from hermes_local.tools.builtin.interaction import FINAL_ANSWER
from hermes_local.tools.registry import ToolRegistry
from hermes_local.tools.toolsets import parse_spec

MAX_FINDINGS = 8
STATUS: dict[str, Status] = {"answer": "answered", "max_steps": "max_steps"}  # any other ending is an error


def envelope(
    stopped: str,
    answer: str | None,
    outcomes: list[ToolOutcome],
    steps: int,
    usage: dict[str, Any],
    tools: ToolRegistry,
    judged: tuple[str, str] = ("", ""),
) -> Envelope:
    """The envelope of a finished sub-run: `denied` when any call was denied, whatever the ending; `judged`: its
    outcome and evidence (`agent/evidence.py`), so the caller never takes an unverified answer as done."""
    denied = [o for o in outcomes if o.error_kind == "permission_denied"]
    status: Status = "denied" if denied else STATUS.get(stopped, "error")
    written = []
    for o in outcomes:
        t = tools.get(o.name)
        path = o.arguments.get(t.writes_path) if t is not None and t.writes_path and o.ok else None
        if isinstance(path, str) and path not in written:
            written.append(path)
    findings = [o.summary[:200] for o in outcomes if o.ok][:MAX_FINDINGS]
    findings += [f"{o.name} was denied ({o.approval or 'not approved'})" for o in denied][:MAX_FINDINGS]
    counts = {k: int(usage.get(k, 0)) for k in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens")}
    return Envelope(
        status=status,
        answer=answer,
        files_written=written,
        findings=findings,
        steps=steps,
        usage=counts,
        outcome=judged[0],
        evidence=judged[1],
    )


def goal_of(task: str, inputs: dict[str, Any] | None) -> str:
    """The specialist's goal: the sub-task, then its inputs as JSON."""
    return f"{task}\n\nInputs: {json.dumps(inputs, ensure_ascii=False, default=str)}" if inputs else task


@dataclass(frozen=True)
class Role:
    """Who an agent is in a team: its profile (None: the manager, or a run without a team), how deep it is
    nested, the names above it (it never delegates to them), its session id ("" when not logged), and the
    toolsets a router model narrowed its tools to (None: not narrowed)."""

    name: str | None = None
    depth: int = 0
    above: tuple[str, ...] = ()
    session: str = ""
    toolsets: tuple[str, ...] | None = None


def apply_profile(settings: Settings, role: Role, extra: str | None) -> tuple[Settings, str | None]:
    """The settings of `role`'s specialist (its tools, and max_steps, tool_choice, dialect, model when set; the rest
    inherited) and the request's `extra` instructions after the profile's own. A model of its own comes with its
    own dialect: the profile's, else the one found for that model (never the caller's `--dialect`)."""
    profile = settings.agents.get(role.name) if role.name else None
    if profile is None:
        return settings, extra
    update: dict[str, Any] = {"tools": profile_tools(profile)}
    update |= {k: v for k in ("max_steps", "tool_choice", "dialect") if (v := getattr(profile, k)) is not None}
    if own_model(settings, role.name) is not None:
        update |= {"model": profile.model, "dialect": profile.dialect}
    return settings.model_copy(update=update), "\n\n".join(t for t in (profile.instructions, extra) if t) or None


def own_model(settings: Settings, name: str | None) -> str | None:
    """The model profile `name` names when it is not the one of `settings` (its caller's), else None."""
    profile = settings.agents.get(name) if name else None
    return profile.model if profile is not None and profile.model and profile.model != settings.model else None


@dataclass
class ModelShelf:
    """The specialists' own models of one run (a profile's `model`: a registry name, a GGUF or `replay:FILE`), by
    name, each loaded by `load` once, on its first use, and shared by every later delegation (a replay goes on
    where the last one left it). The engines keep a GGUF's weights once per process besides."""

    load: Callable[[str], LLM]
    models: dict[str, LLM] = field(default_factory=dict)  # starts with the run's own model, under its name
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, spec: str) -> LLM:
        with self._lock:  # concurrent delegations: the first loads it, the others wait for it
            if spec not in self.models:
                self.models[spec] = self.load(spec)
            return self.models[spec]

    def clear(self) -> None:
        """The run ended: its models are dropped (the engines' per-process cache keeps loaded weights)."""
        with self._lock:
            self.models.clear()


def profile_tools(profile: AgentProfile) -> list[str]:
    """The `--tools` selection of a profile without `delegate` (offered apart); one of only `delegate` keeps
    `final_answer` (an empty selection would mean every tool)."""
    spec = parse_spec(profile.tools)
    return [t for t in spec if t != DELEGATE] or ([FINAL_ANSWER] if spec else [])


def offer_delegate(
    registry: ToolRegistry,
    settings: Settings,
    role: Role,
    build: Callable[[Role, ToolRegistry, Approver, EventSink], Agent],
    sink: EventSink,
    tools: ToolRegistry,
    approver: Callable[[], Approver],
) -> None:
    """Register `delegate` in `registry` when `role` may delegate: profiles exist besides itself and those above
    it, it is less than `max_depth` deep, and it is the manager or its profile lists `delegate`.
    `build(child_role, tools, approver, sink)` builds a specialist's agent over `tools` (the run's, whose end
    leaves the caller's MCP servers running) with the caller's `approver()`, labelled with the specialist."""
    profile = settings.agents.get(role.name) if role.name else None
    allowed = profile is None or DELEGATE in parse_spec(profile.tools)
    others = {n: p for n, p in settings.agents.items() if n != role.name and n not in role.above}
    if not others or not allowed or role.depth >= settings.max_depth or DELEGATE in settings.deny_tools:
        return
    above = (*role.above, role.name) if role.name else role.above

    def make(name: str, task: str, session: str, sink: EventSink) -> Agent:
        own = tools.subset(tools.names(), share_cleanup=False)
        return build(Role(name, role.depth + 1, above, session), own, labelled_approver(approver(), name, task), sink)

    team = Team(others, make, sink, tools, parent_session=role.session)
    registry.register(delegate_tool({n: p.description for n, p in others.items()}, team.delegate))


@dataclass
class ChildEvent(Event):
    """A specialist's event as its caller's stream shows it, tagged with the agent and its session (live only: the
    event itself is in the child's own log, so it is never written to the caller's)."""

    kind: ClassVar[str] = "child_event"
    logged: ClassVar[bool] = False
    agent: str
    child: str
    event: Event

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "agent": self.agent, "child": self.child, "event": self.event.to_dict()}


@dataclass
class Team:
    """The delegations of one run. `make_agent` builds the specialist's agent with its events going to the sink
    given (its own session log, and each logged one to `parent_sink` as a `ChildEvent`); `parent_sink` is the
    caller's event sink (its log, its terminal or stream)."""

    profiles: dict[str, AgentProfile]
    make_agent: Callable[[str, str, str, EventSink], Agent]  # (agent, task, its session id, its event sink)
    parent_sink: EventSink
    tools: ToolRegistry  # the run's tools, for what a finished call wrote
    parent_session: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _tell(self, event: Event) -> None:
        with self._lock:  # concurrent delegations report from their own threads
            self.parent_sink(event)

    def delegate(self, agent: str, task: str, inputs: dict[str, Any] | None = None) -> Envelope:
        """Run (or resume, or read back) the sub-run; an envelope whatever happens."""
        if agent not in self.profiles:
            return Envelope(status="error", answer=f"no specialist {agent!r}; choose one of {sorted(self.profiles)}")
        digest = arguments_digest(DELEGATE, {"agent": agent, "task": task, "inputs": inputs})
        child = f"{self.parent_session}.{agent}-{digest[:8]}" if self.parent_session else f"{new_session_id()}.{agent}"
        link = Delegation(agent, task, self.parent_session, child, digest)
        try:
            return self._run(link, goal_of(task, inputs))
        except Exception as exc:  # noqa: BLE001 - the manager gets a status, never an exception
            why = terminal_safe(" ".join(f"{type(exc).__name__}: {getattr(exc, 'line', exc)}".split()))[:500]
            self._tell(replace(link, status="error"))
            return Envelope(status="error", answer=f"the specialist {agent} failed: {why}")

    def _run(self, link: Delegation, goal: str) -> Envelope:
        path = sessions_dir() / f"{link.child}.jsonl"
        events = read_events(path) if path.is_file() else []
        last = next((e for e in reversed(events) if isinstance(e, RunStart | RunResumed | RunEnd)), None)
        if isinstance(last, RunEnd):  # it finished before the parent was stopped: its result, not a second run
            env = self._from_log(events, last)
            self._tell(replace(link, status=env.status))
            return env
        with SessionLog(link.child) as log:
            if not events:
                log(link)
            self._tell(link)

            def sink(event: Event) -> None:
                log(event)
                if isinstance(event, Proposal):  # the run's plan holds it too: `sessions apply PARENT` runs it
                    self._tell(replace(event, agent=event.agent or link.agent, child=event.child or link.child))
                elif event.logged or isinstance(event, ChildEvent):  # shown live by the caller, tagged
                    self._tell(ChildEvent(link.agent, link.child, event))

            with self.make_agent(link.agent, link.task, log.id, sink) as sub:
                started = any(isinstance(e, RunStart) for e in events)
                result = sub.resume(events) if started else sub.run(goal)
        usage = result.to_json()["usage"]
        judged = (result.outcome, result.evidence)
        env = envelope(result.stopped, result.answer, result.tool_calls, result.steps, usage, self.tools, judged)
        self._tell(replace(link, status=env.status))
        return env

    def _from_log(self, events: list[Event], end: RunEnd) -> Envelope:
        outcomes = [e.outcome for e in events if isinstance(e, ToolFinished)]
        steps = int(end.result.get("steps") or 0)
        usage = end.result.get("usage") if isinstance(end.result.get("usage"), dict) else {}
        judged = (str(end.result.get("outcome") or ""), str(end.result.get("evidence") or ""))
        return envelope(str(end.stopped), end.answer, outcomes, steps, usage or {}, self.tools, judged)
