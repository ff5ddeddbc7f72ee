"""The typed facts of a run: the `Event` classes, each defined once (and `ToolOutcome`, re-exported from
the ground module `outcome.py`: the one record of a tool call).

The agent emits events; the session log writes them (`to_dict`), and everything that reads a run back — resume, the
terminal printer, `sessions show`, evaluation, session export, the service's event stream — gets the same objects from
`event_from_dict`. Tool arguments longer than `LOGGED_ARGUMENT_CHARS` are abbreviated in tool events (the full text is
in the step's `assistant` event) with a hash of the full arguments kept for resume; a plan-only run's `Proposal` keeps
them whole. Does not write files or format terminal output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hermes_local.outcome import LOGGED_ARGUMENT_CHARS as LOGGED_ARGUMENT_CHARS  # re-exported
from hermes_local.outcome import ToolOutcome, abbreviate_arguments


class Event:
    """Base of every run event: `kind` names it in the log; `to_dict`/`from_dict` round-trip it."""

    kind: ClassVar[str] = ""
    logged: ClassVar[bool] = True  # token events are shown live but not written to the session log
    short_arguments: ClassVar[bool] = False  # `arguments` logged through `abbreviate_arguments`

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, **dataclasses.asdict(self)}  # type: ignore[call-overload]
        if self.short_arguments:
            d["arguments"] = abbreviate_arguments(d["arguments"])
        if d.get("truncated") is False:  # a call the decoder closed early is marked; the others carry nothing
            del d["truncated"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class RunStart(Event):
    """A run began with this goal (and these recalled long-term facts), in this dialect and call format."""

    kind: ClassVar[str] = "run_start"
    goal: str
    recalled: list[str] = field(default_factory=list)
    dialect: str = ""  # "" in logs written before the dialect was recorded
    tool_call_format: str = ""
    workspace: str = ""  # the run's folder ("" in older logs): `sessions apply|rate|export` find it here
    plan: bool = False  # a plan-only run (`run --plan`): its write/dangerous calls are `Proposal`s
    folder: dict[str, Any] | None = None  # the folder's identity (`sandbox.workspace.FolderId`; None in older logs)


@dataclass
class RunResumed(Event):
    """A logged run was continued from `from_step`."""

    kind: ClassVar[str] = "run_resumed"
    goal: str
    from_step: int


@dataclass
class StepStart(Event):
    """An agent step (one model call and its tool calls) began."""

    kind: ClassVar[str] = "step_start"
    step: int


@dataclass
class TurnAdded(Event):
    """A user or tool turn was added to the history (assistant turns are rebuilt from `AssistantText`)."""

    kind: ClassVar[str] = "turn"
    role: str
    step: int
    content: list[list[Any]]
    responses: list[dict[str, Any]] | None = None
    note: list[list[Any]] | None = None  # a tool turn's closing progress block (also inside `content`)


@dataclass
class LLMCall(Event):
    """One model call and its token usage."""

    kind: ClassVar[str] = "llm_call"
    step: int
    prompt_tokens: int
    prompt_tokens_evaluated: int
    prompt_tokens_new: int
    completion_tokens: int
    seconds: float
    prompt_seconds: float = 0.0
    finish_reason: str = "stop"
    prefill: str = ""  # what the reply began with, written by us (a forced or required call's opening tag)

    def record(self) -> dict[str, Any]:
        """The `llm_calls` entry of `--json` (everything but the kind, finish reason and prefill)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("finish_reason", "prefill")}


@dataclass
class AssistantText(Event):
    """What the model wrote at a step (`final`: the answer requested at the step limit)."""

    kind: ClassVar[str] = "assistant"
    step: int
    text: str
    final: bool = False
    dropped: list[list[str]] = field(default_factory=list)  # [why, text] of parts neither call, thought nor answer


@dataclass
class Reasoning(Event):
    """The thought of the reply at a step (kept out of the answer; shown dimmed on a terminal)."""

    kind: ClassVar[str] = "reasoning"
    step: int
    text: str


@dataclass
class RehearsedCall(Event):
    """A call the model wrote inside a thought: read, logged, never run."""

    kind: ClassVar[str] = "rehearsed_call"
    short_arguments: ClassVar[bool] = True
    step: int
    name: str
    arguments: dict[str, Any]


@dataclass
class Redecoded(Event):
    """A reply's call span that did not parse, decoded again under the call grammar in the same step: what the
    model wrote first (`replaced`), what it wrote the second time (`text`), and whether that is a valid call
    (`ok`; if not, the step goes on with the text before the span)."""

    kind: ClassVar[str] = "redecoded"
    step: int
    replaced: str
    text: str
    ok: bool


@dataclass
class Token(Event):
    """A piece of streamed model output (shown live, never logged)."""

    kind: ClassVar[str] = "token"
    logged: ClassVar[bool] = False
    text: str


@dataclass
class ToolCallStarted(Event):
    """A validated-or-not tool call is about to run (logged before it runs, for crash recovery)."""

    kind: ClassVar[str] = "tool_call"
    short_arguments: ClassVar[bool] = True
    step: int
    name: str
    arguments: dict[str, Any]
    truncated: bool = False  # closing mode ended the call (issue 18)


@dataclass
class ToolFinished(Event):
    """A tool call finished (or was refused): its `ToolOutcome`."""

    kind: ClassVar[str] = "tool_result"
    outcome: ToolOutcome

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.outcome.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(ToolOutcome.from_dict(d))


@dataclass
class Guarded(Event):
    """A reply sent back once, naming the likely tool (or ""); `reason`: no_tool, empty (after parsing) or echoed."""

    kind: ClassVar[str] = "guarded"
    step: int
    tool: str
    answer: str
    reason: str = "no_tool"


@dataclass
class BudgetWarning(Event):
    """A token budget (`max_run_tokens`, `max_day_tokens`) is 80 % used."""

    kind: ClassVar[str] = "budget_warning"
    step: int
    message: str


@dataclass
class Compaction(Event):
    """History through `through_step` was folded into the summary to fit the context."""

    kind: ClassVar[str] = "compaction"
    through_step: int


@dataclass
class McpServerFailed(Event):
    """A configured MCP server did not start, or crashed and could not restart; the run went on without its tools."""

    kind: ClassVar[str] = "mcp_failed"
    server: str
    error: str  # one line: what failed and the server's stderr tail


@dataclass
class RunEnd(Event):
    """The run stopped; `result` is the object `run --json` prints."""

    kind: ClassVar[str] = "run_end"
    result: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.result}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls({k: v for k, v in d.items() if k not in ("kind", "ts")})

    stopped = property(lambda self: self.result.get("stopped"))  # str | None
    answer = property(lambda self: self.result.get("answer"))  # str | None


@dataclass
class HookRan(Event):
    """A user's hook answered (`tools/hooks.py`): allow, block, ask, or error (it failed; a pre_tool call blocked)."""

    kind: ClassVar[str] = "hook"
    step: int
    hook: str  # its name (config `name`, else the command's first word)
    event: str  # pre_tool | post_tool | stop | session_end
    tool: str
    decision: str
    reason: str = ""


@dataclass
class Routed(Event):
    """A team run's router chose who takes the task (`chosen`: a profile or "manager") among `candidates`, and why;
    `router_model` also chose the `toolsets` its prompt carries (None: every tool of the role; older logs too)."""

    kind: ClassVar[str] = "routed"
    router: str  # rules | model | router_model
    chosen: str
    candidates: list[str]
    reason: str
    toolsets: list[str] | None = None


@dataclass
class Delegation(Event):
    """A team's delegation, in the parent's log as it starts and ends (`status`) and first in the child's (ids)."""

    kind: ClassVar[str] = "delegation"
    agent: str
    task: str
    parent: str
    child: str
    call: str
    status: str = ""  # "" while running; then the envelope's status (`call`: the delegate call's digest)


@dataclass
class WorkflowEvent(Event):
    """A workflow's start, step or end (`kind` is workflow_start / workflow_step / workflow_end)."""

    kind: ClassVar[str] = "workflow"
    name: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.name, **self.data}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(str(d["kind"]), {k: v for k, v in d.items() if k not in ("kind", "ts")})


@dataclass
class Proposal(Event):
    """A write/dangerous call of a plan-only run: recorded with its whole arguments for review, not run."""

    kind: ClassVar[str] = "proposal"
    step: int  # the step of the agent that proposed it (a specialist's own step)
    name: str
    arguments: dict[str, Any]  # whole, never abbreviated: `sessions apply` runs exactly this
    agent: str = ""  # a team child's proposal in its caller's log: the specialist ("" : the run's own)
    child: str = ""  # and the child's session


@dataclass
class Applied(Event):
    """`sessions apply`: proposal number `index` (from 1) started (`outcome` None) or finished with `outcome`."""

    kind: ClassVar[str] = "applied"
    index: int
    outcome: dict[str, Any] | None = None  # the `ToolOutcome.to_dict()` of the call, once it finished


@dataclass
class Rating(Event):
    """The user's verdict on the run (`sessions rate ID good|bad --note TEXT`); the last one counts."""

    kind: ClassVar[str] = "rating"
    verdict: str
    note: str = ""


@dataclass
class Unknown(Event):
    """An event of a kind this version does not know (kept so logs from other versions still read)."""

    kind: ClassVar[str] = "unknown"
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


EVENT_TYPES: dict[str, type[Event]] = {
    t.kind: t
    for t in (RunStart, RunResumed, StepStart, TurnAdded, LLMCall, AssistantText, Reasoning, RehearsedCall, Token)
    + (ToolCallStarted, ToolFinished, Guarded, BudgetWarning, Compaction, McpServerFailed, RunEnd)
    + (Proposal, Applied, Rating, Routed, Delegation, HookRan, Redecoded)
}
WORKFLOW_KINDS = frozenset({"workflow_start", "workflow_step", "workflow_end"})


def event_from_dict(d: dict[str, Any]) -> Event:
    """The typed event for a logged dict; raises ValueError when a known kind has the wrong shape."""
    kind = d.get("kind")
    if kind in WORKFLOW_KINDS:
        return WorkflowEvent.from_dict(d)
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return Unknown(dict(d))
    try:
        event = cls.from_dict(d)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed {kind} event: {exc}") from exc
    _check_types(event)
    return event


def _check_types(event: Event) -> None:
    """Reject fields of the wrong basic type (a tampered log), so readers can trust the objects."""
    for f in dataclasses.fields(event):  # type: ignore[arg-type]
        value = getattr(event, f.name)
        basic: dict[str, type | tuple[type, ...]] = {"int": int, "str": str, "float": (int, float), "bool": bool}
        expected = basic.get(str(f.type))
        if expected is not None and (not isinstance(value, expected) or (expected is int and isinstance(value, bool))):
            raise ValueError(f"malformed {event.kind} event: {f.name} is {type(value).__name__}")
