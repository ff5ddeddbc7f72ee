"""The agent loop: render -> complete -> parse -> execute -> feed back, with its guards.

`Agent.run(goal)` returns a `RunResult`; `Agent.resume(events)` continues a logged session;
`Agent.chat(memory, message)` runs one turn of a multi-turn chat. Model mistakes (bad JSON,
unknown tools, bad arguments) go back to the model as tool results and the loop continues. Guards:
the context budget (compaction before ~75% of n_ctx), a goal reminder every few steps, no third
identical call in a row, a cap on consecutive failures, and one final-answer request at max_steps.
Progress is reported through `on_event(kind, payload)`; this module never formats terminal output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from hermes_local.llm import LLM, Usage, common_prefix_length
from hermes_local.memory import LedgerEntry, Memory, Turn, extract_plan
from hermes_local.parsing import ToolCall, parse_tool_calls
from hermes_local.prompts import Segments, chat_tokens, render
from hermes_local.tools.execution import Executor
from hermes_local.tools.registry import ToolResult

EventSink = Callable[[str, dict[str, Any]], None]
CALL_OPEN = "<tool_call>"
FINAL_ANSWER_REQUEST = (
    "You have reached the step limit. Do not call any more tools: reply now with your final answer "
    "to the goal from what you have found so far."
)
INTERRUPTED = "interrupted: the previous run was killed while this call was running; check its effect before retrying"
NOT_STARTED = "not run: the previous run was killed before this call started; call it again if it is still needed"


class ContextTooSmall(Exception):
    """The fixed prompt (system, tools, goal) alone does not fit n_ctx."""


@dataclass
class AgentConfig:
    max_steps: int = 8
    temperature: float = 0.2
    max_tokens: int = 512
    tool_choice: str = "auto"  # auto | required | none
    grammar: bool = True
    instructions: str = ""
    reminder_every: int = 3
    max_identical_calls: int = 3
    max_consecutive_failures: int = 5
    budget_fraction: float = 0.75  # compaction starts past this share of n_ctx
    compact_to_fraction: float = 0.5  # ...and shrinks the prompt to this share


@dataclass
class ToolCallRecord:
    step: int
    name: str
    arguments: dict[str, Any]
    ok: bool
    error_kind: str | None = None
    summary: str = ""
    truncated: bool = False  # closing mode ended this call early (issue 18)


@dataclass
class LLMCallRecord:
    step: int
    prompt_tokens: int
    prompt_tokens_evaluated: int
    prompt_tokens_new: int
    completion_tokens: int
    seconds: float
    prompt_seconds: float = 0.0


@dataclass
class RunResult:
    answer: str | None
    stopped: str  # "answer" | "max_steps" | "error"
    steps: int
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    llm_calls: list[LLMCallRecord] = field(default_factory=list)
    error: str | None = None
    session_id: str | None = None
    compactions: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "stopped": self.stopped,
            "steps": self.steps,
            "tool_calls": [
                {"name": c.name, "arguments": c.arguments, "ok": c.ok, "error_kind": c.error_kind}
                | ({"truncated": True} if c.truncated else {})
                for c in self.tool_calls
            ],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "prompt_tokens_evaluated": self.usage.prompt_tokens_evaluated,
                "completion_tokens": self.usage.completion_tokens,
                "seconds": round(self.usage.seconds, 3),
            },
            "llm_calls": [asdict(c) for c in self.llm_calls],
            "compactions": self.compactions,
            "error": self.error,
            "session_id": self.session_id,
        }


class Agent:
    def __init__(
        self,
        llm: LLM,
        executor: Executor,
        config: AgentConfig | None = None,
        *,
        on_event: EventSink | None = None,
        recall: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.llm = llm
        self.executor = executor
        self.config = config or AgentConfig()
        self.on_event = on_event or (lambda kind, payload: None)
        self.recall = recall
        self._previous_tokens: list[int] = []
        self._grammar_text: str | None = None
        self._last_truncated: str | None = None  # the last completion's closing reason, if any

    # -- prompt ----------------------------------------------------------------------------
    def system_prompt(self) -> Segments:
        tools = [] if self.config.tool_choice == "none" else self.executor.registry.schemas()
        return render("system.jinja", tools=tools, instructions=self.config.instructions)

    def new_memory(self, goal: str) -> Memory:
        recalled = self.recall(goal) if self.recall else []
        memory = Memory(system=self.system_prompt(), goal=goal, recalled=recalled)
        memory.on_turn = lambda turn: self.on_event("turn", turn.to_event())
        return memory

    def _grammar(self) -> str | None:
        if not self.config.grammar or self.config.tool_choice == "none" or not len(self.executor.registry):
            return None
        if self._grammar_text is None:
            from hermes_local.grammar import tool_call_grammar

            self._grammar_text = tool_call_grammar(list(self.executor.registry))
        return self._grammar_text

    def _prompt_tokens(self, memory: Memory, prefill: str) -> list[int]:
        return chat_tokens(memory.messages(), self.llm, prefill=prefill)

    def _fitted_prompt(self, memory: Memory, prefill: str, result: RunResult) -> tuple[list[int], int]:
        """Prompt tokens within budget (compacting memory if needed) and the max_tokens left."""
        n_ctx = self.llm.n_ctx
        max_new = self.config.max_tokens
        limit = int(n_ctx * self.config.budget_fraction) - max_new
        target = int(n_ctx * self.config.compact_to_fraction) - max_new
        before = memory.compacted_through_step, [(t.cap, t.summarized) for t in memory.turns]
        measured: list[int] = []

        def measure() -> int:
            measured[:] = self._prompt_tokens(memory, prefill)
            return len(measured)

        memory.fit(measure, limit, max(target, 1))  # its last measurement is of the final layout
        if (memory.compacted_through_step, [(t.cap, t.summarized) for t in memory.turns]) != before:
            result.compactions += 1
            self.on_event("compaction", {"through_step": memory.compacted_through_step})
        tokens = measured
        room = n_ctx - len(tokens) - 1
        if room < 16:
            raise ContextTooSmall(
                f"the prompt needs {len(tokens)} tokens but n_ctx is {n_ctx}; raise --n-ctx or shorten the task"
            )
        return tokens, min(max_new, room)

    def _complete(self, memory: Memory, step: int, tool_choice: str, result: RunResult) -> str:
        prefill = CALL_OPEN + "\n" if tool_choice == "required" else ""
        tokens, max_new = self._fitted_prompt(memory, prefill, result)
        grammar = self._grammar() if tool_choice != "none" else None
        completion = self.llm.complete(
            tokens,
            max_tokens=max_new,
            temperature=self.config.temperature,
            on_token=lambda piece: self.on_event("token", {"text": piece}),
            grammar=grammar,
            grammar_trigger=None if (grammar and tool_choice == "required") else (grammar and CALL_OPEN),
        )
        self._last_truncated = getattr(completion, "truncated", None)
        new = len(tokens) - common_prefix_length(tokens, self._previous_tokens)
        self._previous_tokens = tokens + completion.tokens
        u = completion.usage
        record = LLMCallRecord(
            step, u.prompt_tokens, u.prompt_tokens_evaluated, new, u.completion_tokens, u.seconds, u.prompt_seconds
        )
        result.llm_calls.append(record)
        for key in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens", "seconds", "prompt_seconds"):
            setattr(result.usage, key, getattr(result.usage, key) + getattr(u, key))
        self.on_event("llm_call", asdict(record) | {"finish_reason": completion.finish_reason})
        return prefill + completion.text

    # -- entry points ----------------------------------------------------------------------
    def run(self, goal: str) -> RunResult:
        memory = self.new_memory(goal)
        self.on_event("run_start", {"goal": goal, "recalled": memory.recalled})
        return self._loop(memory, RunResult(answer=None, stopped="max_steps", steps=0), first_step=1)

    def chat(self, memory: Memory | None, message: str) -> tuple[Memory, RunResult]:
        """One chat turn: the first message is the goal; later ones are appended user turns."""
        last_step = max((t.step for t in memory.turns), default=0) if memory else 0
        if memory is None:
            memory = self.new_memory(message)
        else:
            memory.add_user_note(last_step + 1, Segments.untrusted(message))
        result = RunResult(answer=None, stopped="max_steps", steps=0)
        result = self._loop(memory, result, first_step=last_step + 1, step_limit=last_step + self.config.max_steps)
        if result.answer:
            memory.add_assistant(result.steps, result.answer, [])
        return memory, result

    def resume(self, events: list[dict[str, Any]]) -> RunResult:
        """Continue a logged session: completed calls are not re-run; an in-flight call is interrupted."""
        start = next((e for e in events if e.get("kind") == "run_start"), None)
        if start is None:
            raise ValueError("the session log has no run_start event")
        memory = Memory(system=self.system_prompt(), goal=start["goal"], recalled=start.get("recalled") or [])
        for e in events:
            if e.get("kind") == "turn":
                memory.restore_turn(Turn.from_event(e))
        tool_steps = {t.step for t in memory.turns if t.role == "tool"}
        for e in events:
            if e.get("kind") != "tool_result" or e.get("name") == "invalid_tool_call":
                continue
            done = ToolResult(
                bool(e.get("ok")), e.get("summary", ""), e.get("data"), e.get("error"), e.get("error_kind")
            )
            if e.get("step") in tool_steps:
                memory.ledger.append(
                    LedgerEntry(e["step"], e["name"], e.get("arguments") or {}, done.ok, done.summary, done.error_kind)
                )
            if done.ok:
                self.executor.remember_done(e["name"], e.get("arguments") or {}, done)
        memory.on_turn = lambda turn: self.on_event("turn", turn.to_event())
        last_step = max((t.step for t in memory.turns), default=0)
        if memory.turns and memory.turns[-1].role == "assistant":
            self._settle_interrupted_step(memory, last_step, events)
        self.on_event("run_resumed", {"goal": memory.goal, "from_step": last_step + 1})
        result = RunResult(answer=None, stopped="max_steps", steps=last_step)
        return self._loop(memory, result, first_step=last_step + 1)

    def _settle_interrupted_step(self, memory: Memory, step: int, events: list[dict[str, Any]]) -> None:
        """Give the last logged step its tool turn: logged results, or interrupted/not-started errors."""
        text = next(e["text"] for e in reversed(events) if e.get("kind") == "assistant" and e.get("step") == step)
        parsed = parse_tool_calls(text, self.executor.registry.names())
        started = [e for e in events if e.get("kind") == "tool_call" and e.get("step") == step]
        finished = [e for e in events if e.get("kind") == "tool_result" and e.get("step") == step]
        outcomes: list[tuple[str, dict[str, Any], ToolResult]] = []
        for i, call in enumerate(parsed.calls):
            if i < len(finished):
                f = finished[i]
                res = ToolResult(
                    bool(f.get("ok")), f.get("summary", ""), f.get("data"), f.get("error"), f.get("error_kind")
                )
            elif i < len(started):
                res = ToolResult.failure("tool_error", INTERRUPTED, "interrupted by a crash")
            else:
                res = ToolResult.failure("tool_error", NOT_STARTED, "not run (crash)")
            outcomes.append((call.name, call.arguments, res))
        memory.add_tool_results(step, outcomes)

    # -- the loop --------------------------------------------------------------------------
    def _loop(self, memory: Memory, result: RunResult, first_step: int, step_limit: int | None = None) -> RunResult:
        limit = step_limit or self.config.max_steps
        tool_names = self.executor.registry.names()
        failures = 0
        try:
            for step in range(first_step, limit + 1):
                result.steps = step
                self.on_event("step_start", {"step": step})
                if self.config.reminder_every and step > 1 and (step - 1) % self.config.reminder_every == 0:
                    note = render("goal_reminder.jinja", goal=memory.goal, progress=memory.progress_line())
                    memory.add_user_note(step, note)
                text = self._complete(memory, step, self.config.tool_choice, result)
                current, todo, text = extract_plan(text)
                memory.note_plan(current, todo)
                self.on_event("assistant", {"step": step, "text": text})
                parsed = parse_tool_calls(text, tool_names)
                if self.config.tool_choice == "none" or (not parsed.calls and not parsed.errors):
                    result.answer, result.stopped = parsed.text, "answer"
                    break
                memory.add_assistant(step, parsed.text, parsed.calls)
                cut = parsed.calls[-1] if self._last_truncated and parsed.calls else None
                outcomes = [self._execute(step, call, memory, result, call is cut) for call in parsed.calls]
                for error in parsed.errors:
                    failure = ToolResult.failure("invalid_arguments", error, "unreadable tool call")
                    outcomes.append(("invalid_tool_call", {}, failure))
                    self.on_event("tool_result", {"step": step, "name": "invalid_tool_call", **failure.envelope()})
                memory.add_tool_results(step, outcomes)
                failures = 0 if any(r.ok for _, _, r in outcomes) else failures + 1
                if failures >= self.config.max_consecutive_failures:
                    result.stopped = "error"
                    result.error = f"{failures} steps in a row had only failed tool calls"
                    result.answer = self._final_answer(memory, step, result)
                    break
            else:
                result.answer = self._final_answer(memory, result.steps, result)
        except ContextTooSmall as exc:
            result.stopped, result.error = "error", str(exc)
        self.on_event("run_end", result.to_json())
        return result

    def _final_answer(self, memory: Memory, step: int, result: RunResult) -> str | None:
        memory.add_user_note(step, Segments.untrusted(FINAL_ANSWER_REQUEST))
        text = self._complete(memory, step, "none", result)
        answer = parse_tool_calls(extract_plan(text)[2]).text or None
        self.on_event("assistant", {"step": step, "text": text, "final": True})
        return answer

    def _execute(
        self, step: int, call: ToolCall, memory: Memory, result: RunResult, truncated: bool = False
    ) -> tuple[str, dict[str, Any], ToolResult]:
        cut = {"truncated": True} if truncated else {}
        self.on_event("tool_call", {"step": step, "name": call.name, "arguments": call.arguments, **cut})
        recent = [(c.name, c.arguments) for c in result.tool_calls[-(self.config.max_identical_calls - 1) :]]
        if len(recent) == self.config.max_identical_calls - 1 and all(r == (call.name, call.arguments) for r in recent):
            outcome = ToolResult.failure(
                "tool_error",
                f"You called {call.name} with the same arguments {self.config.max_identical_calls} times in a row; "
                "it was not run again. Change strategy or give the final answer.",
                "repeated call refused",
            )
        else:
            outcome = self.executor.execute(call.name, call.arguments, truncated=truncated)
        result.tool_calls.append(
            ToolCallRecord(step, call.name, call.arguments, outcome.ok, outcome.error_kind, outcome.summary, truncated)
        )
        self.on_event(
            "tool_result",
            {
                "step": step,
                "name": call.name,
                "arguments": call.arguments,
                "approval": self.executor.last_approval,
                **cut,
                **outcome.envelope(),
            },
        )
        return call.name, call.arguments, outcome
