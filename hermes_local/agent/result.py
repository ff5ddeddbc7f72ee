"""The shape of one run as the loop sees it: `AgentConfig` (how it behaves) and `RunResult` (what it ended with).

`RunResult.to_json()` is the object `run --json` prints, the service's `result` and the `run_end` event.
`add_call` and `note_reply` count a model call and a reply's thoughts (and the calls rehearsed in them)
into the result. A run that gave up (the step limit, the failure cap, a loop) carries a `handoff` (from the
ledger: what was done, what failed, what is left) and `handoff_lines` says it to a person, naming
`run --continue ID "hint"`. Split from `loop.py` so the loop stays small; holds no behaviour beyond that
bookkeeping.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes_local.agent.ledger import key_argument, ledger_line
from hermes_local.calls.parse import ParseResult
from hermes_local.events import Event, LLMCall, McpServerFailed, Reasoning, RehearsedCall, ToolOutcome
from hermes_local.llm import Usage
from hermes_local.textsafe import terminal_safe

# Why a reply was sent back once (`RunResult.guarded`): an answer given without the tool the goal needs, an answer
# after calls that all failed, an answer whose figures appear in no tool result, a reply that was empty after
# parsing, or one whose only content was a tool result the model made up itself.
ANSWER_BOUNCES = ("no_tool", "no_success", "figures", "files")
BOUNCE_REASONS = (*ANSWER_BOUNCES, "repeated", "empty", "echoed")  # repeated: an answer sent back, said again

# How a run ended -> the process exit code a script can rely on (README "Exit codes").
# 2 is a refused input (a bad flag, name, file or setting: `UserError`), 130 an interrupt.
EXIT_CODES: dict[str, int] = {
    "answer": 0,  # the model answered (with evidence: outcome done or answered)
    "error": 1,  # the run failed (engine, replay, too many failures, the model said it could not)
    "max_steps": 3,  # the task took more steps than --max-steps allows
    "empty": 4,  # the model gave no answer, even after one bounce
    "budget": 5,  # a token budget (max_run_tokens / max_day_tokens) ended the run
}
OUTCOME_EXIT_CODES: dict[str, int] = {
    "done": 0,
    "answered": 0,
    "unverified": 6,  # an answer the evidence does not support (see agent/evidence.py)
    "denied": 7,  # the calls the goal needed were refused
}


def exit_code_for(stopped: str, outcome: str = "") -> int:
    """The exit code of a run that ended with `outcome` (how it `stopped` says which failure; an unknown reason
    counts as an error). Without an outcome (an older log), by `stopped` alone."""
    if outcome in OUTCOME_EXIT_CODES:
        return OUTCOME_EXIT_CODES[outcome]
    if outcome == "failed":
        return EXIT_CODES.get(stopped, 1) or 1
    return EXIT_CODES.get(stopped, 1)


@dataclass
class AgentConfig:
    """How the loop behaves; built from `Settings` by `from_settings` (same field names)."""

    max_steps: int = 8
    temperature: float = 0.2  # tool-call steps
    answer_temperature: float = 0.7  # the final-answer request (and tool_choice=none)
    answer_guard: bool = True  # bounce one answer given without any tool call when the goal needs a tool
    redecode: bool = True  # a call that does not parse is decoded again under the grammar (agent/redecode.py)
    max_tokens: int = 512
    max_reasoning_tokens: int = 0  # a thought's budget before its closing marker is forced (0: max_tokens // 2)
    tool_choice: str = "auto"  # auto | required | none
    grammar: bool = True
    instructions: str = ""
    offered_tools: list[str] | None = None  # tools with full schemas in the prompt (None = all; see toolsets.py)
    reminder_every: int = 3
    max_identical_calls: int = 3
    max_consecutive_failures: int = 5
    budget_fraction: float = 0.75  # compaction starts past this share of n_ctx
    compact_to_fraction: float = 0.5  # ...and shrinks the prompt to this share
    max_run_tokens: int | None = None  # tokens one run may use (evaluated prompt + generated); None = no limit
    max_day_tokens: int | None = None  # tokens all runs of one day may use (kept under $HERMES_LOCAL_HOME/usage)


@dataclass
class RunResult:
    """What a run ended with: the answer, why it stopped, every tool outcome and model call, usage."""

    answer: str | None
    stopped: str  # a key of EXIT_CODES: "answer" | "max_steps" | "empty" | "budget" | "error"
    steps: int
    tool_calls: list[ToolOutcome] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    llm_calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    session_id: str | None = None
    compactions: int = 0
    guarded: list[dict[str, Any]] = field(default_factory=list)  # bounces: {step, reason, tool} (see BOUNCE_REASONS)
    mcp_failed: dict[str, str] = field(default_factory=dict)  # MCP server -> why it is down (start or crash)
    reasoning: list[Reasoning] = field(default_factory=list)  # each reply's thought
    rehearsed: list[RehearsedCall] = field(default_factory=list)  # calls written inside a thought (never run)
    handoff: dict[str, Any] | None = None  # a run that gave up: `handoff()` (why, done, failed, left)
    outcome: str = ""  # decided once from evidence when the run ends (`evidence.judge`): done, answered, ...
    evidence: str = ""  # the one line that backs the outcome ("no tool call succeeded: read_file not_found")
    sent_back: list[str] = field(default_factory=list)  # answers sent back (this run's, a continued log's)

    def add_call(
        self, step: int, usage: Usage, prompt_tokens_new: int, finish_reason: str, prefill: str = ""
    ) -> LLMCall:
        """Count one model call into the run's usage; returns its `LLMCall` event."""
        record = LLMCall(
            step,
            usage.prompt_tokens,
            usage.prompt_tokens_evaluated,
            prompt_tokens_new,
            usage.completion_tokens,
            usage.seconds,
            usage.prompt_seconds,
            finish_reason,
            prefill,
        )
        self.llm_calls.append(record)
        for key in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens", "seconds", "prompt_seconds"):
            setattr(self.usage, key, getattr(self.usage, key) + getattr(usage, key))
        return record

    def proposals(self) -> list[dict[str, Any]]:
        """A plan-only run's proposed calls, in order, as `sessions apply` runs them: `{"name", "arguments"}`."""
        return [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls if c.approval == "proposed"]

    def bounced(self, *reasons: str) -> bool:
        """Whether a reply of this run was already sent back for one of `reasons`."""
        return any(g["reason"] in reasons for g in self.guarded)

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.stopped, self.outcome)

    def outcome_line(self) -> str:
        """`outcome: unverified (no tool call succeeded: read_file not_found ×2)`, terminal-safe."""
        return terminal_safe(
            f"outcome: {self.outcome or self.stopped} ({self.evidence})"
            if self.evidence
            else f"outcome: {self.outcome or self.stopped}"
        )

    def ending_line(self) -> str:
        """One line for a run that ended without an answer: why, and what the run did do (its tool calls)."""
        why = {
            "empty": "the model gave an empty reply, also after it was asked again",
            "max_steps": "the task took more steps than allowed",
            "budget": "the token budget ran out",
        }.get(self.stopped, self.error or self.stopped)
        return f"(no answer: {why}; {done_line(self.tool_calls)})"

    def note_reply(self, step: int, parsed: ParseResult, sink: Callable[[Event], None]) -> ParseResult:
        """Keep and report (to `sink`) the reply's thought and the calls rehearsed in it; returns `parsed`."""
        if parsed.reasoning:
            self.reasoning.append(Reasoning(step, parsed.reasoning))
            sink(self.reasoning[-1])
        for call in parsed.rehearsed:
            self.rehearsed.append(RehearsedCall(step, call.name, call.arguments))
            sink(self.rehearsed[-1])
        return parsed

    def note_mcp_failures(self, failed: dict[str, str], logged: set[str], sink: Callable[[Event], None]) -> None:
        """Put every MCP server that is down (did not start, or crashed and could not be restarted) into
        `mcp_failed`, and report (to `sink`) a McpServerFailed event for each one not in `logged` (then added)."""
        for source, error in list(failed.items()):
            if not source.startswith("mcp:"):
                continue
            server = source.removeprefix("mcp:")
            self.mcp_failed[server] = error
            if server not in logged:
                logged.add(server)
                sink(McpServerFailed(server, error))

    def _handoff(self) -> dict[str, Any] | None:
        """The hand-off with the command that goes on from it (once the session is known)."""
        if self.handoff is None or not self.session_id:
            return self.handoff
        return self.handoff | {"continue": continue_command(self.session_id)}

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "outcome": self.outcome,
            "evidence": self.evidence,
            "stopped": self.stopped,
            "steps": self.steps,
            "tool_calls": [c.brief() for c in self.tool_calls],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "prompt_tokens_evaluated": self.usage.prompt_tokens_evaluated,
                "completion_tokens": self.usage.completion_tokens,
                "seconds": round(self.usage.seconds, 3),
            },
            "llm_calls": [c.record() for c in self.llm_calls],
            "compactions": self.compactions,
            "guarded": list(self.guarded),
            "mcp_failed": [{"server": name, "error": error} for name, error in self.mcp_failed.items()],
            "reasoning": [{"step": r.step, "text": r.text} for r in self.reasoning],
            "rehearsed_calls": [{"step": c.step, "name": c.name, "arguments": c.arguments} for c in self.rehearsed],
            "error": self.error,
            "session_id": self.session_id,
            "handoff": self._handoff(),
        }


def done_line(calls: list[ToolOutcome]) -> str:
    """What a run did, in a few words: "it called read_file notes.txt (ok), write_file report.md (failed)"."""
    if not calls:
        return "it made no tool calls"
    states = ["ok" if c.ok else c.error_kind or "failed" for c in calls]
    shown = [f"{c.name} {key_argument(c)}".strip() + f" ({state})" for c, state in zip(calls[:6], states, strict=False)]
    more = f" and {len(calls) - 6} more" if len(calls) > 6 else ""
    return f"it called {', '.join(shown)}{more}"


def step_limit_line(max_steps: int) -> str:
    """What the user reads when a run reached its step limit (stopped="max_steps")."""
    return (
        f"the task took more steps than allowed (--max-steps {max_steps}); split it into smaller tasks, "
        "or raise --max-steps"
    )


HANDOFF_SHOWN = 8  # done / failed lines shown at most (the newest)


def handoff(entries: list[ToolOutcome], goal: str, todo: str, why: str) -> dict[str, Any]:
    """What a run that gave up leaves for a person, from its ledger: why it stopped, the calls that worked and
    those that failed (ledger lines, the newest `HANDOFF_SHOWN`), and what is left (the model's last to-do)."""
    calls = [o for o in entries if o.name != "invalid_tool_call"]
    if any(o.error_kind == "loop" for o in calls[-3:]):
        why += "; the model kept repeating a call (refused as a loop)"
    done = [ledger_line(o, goal, detailed=False) for o in calls if o.ok]
    failed = [ledger_line(o, goal) for o in calls if not o.ok]
    unreadable = len(entries) - len(calls)
    if unreadable:
        failed.append(f"{unreadable} tool call(s) the model wrote could not be read")
    left = " ".join(todo.split()) or f"the rest of the goal: {' '.join(goal.split())[:200]}"
    done, failed = _counted(done), _counted(failed)
    return {"why": why, "done": done[-HANDOFF_SHOWN:], "failed": failed[-HANDOFF_SHOWN:], "left": left[:300]}


def _counted(lines: list[str]) -> list[str]:
    """Lines said once each, in order of their last time, a repeated one with its count: a step of 26 identical
    refused calls is one line "... (×26)", not 8 copies hiding the rest."""
    counts = Counter(lines)
    last = list(dict.fromkeys(reversed(lines)))[::-1]
    return [f"{line} (×{counts[line]})" if counts[line] > 1 else line for line in last]


def continue_command(session_id: str) -> str:
    return f'hermes-local run --continue {session_id} "a hint for what to do next"'


def handoff_lines(data: dict[str, Any], session_id: str | None) -> list[str]:
    """The hand-off said plainly, terminal-safe: why the run stopped, done, failed, left, how to go on."""
    lines = [f"hand-off: the run stopped: {data.get('why') or 'it gave up'}"]
    for key in ("done", "failed"):
        items = data.get(key) or ["nothing"]
        lines += [f"  {key}: {items[0]}"] + [f"        {item}" for item in items[1:]]
    lines.append(f"  left: {data.get('left', '')}")
    if session_id:
        lines.append(f"  take it from here with: {continue_command(session_id)}")
    return [terminal_safe(line) for line in lines]
