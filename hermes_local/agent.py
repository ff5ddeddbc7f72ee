"""The agent loop: render -> complete -> parse -> execute -> feed back, with its guards.

`Agent.run(goal)` returns a `RunResult`. Model mistakes (bad JSON, unknown tools, bad arguments)
go back to the model as tool results and the loop continues. Progress is reported through
`on_event(kind, payload)`; this module never formats terminal output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from hermes_local.llm import LLM, Usage
from hermes_local.memory import Memory
from hermes_local.parsing import ToolCall, parse_tool_calls
from hermes_local.prompts import Segments, render, to_tokens
from hermes_local.tools.execution import Executor
from hermes_local.tools.registry import ToolResult

EventSink = Callable[[str, dict[str, Any]], None]
CALL_OPEN = "<tool_call>"


@dataclass
class AgentConfig:
    max_steps: int = 8
    temperature: float = 0.2
    max_tokens: int = 512
    tool_choice: str = "auto"  # auto | required | none
    grammar: bool = True
    instructions: str = ""


@dataclass
class ToolCallRecord:
    step: int
    name: str
    arguments: dict[str, Any]
    ok: bool
    error_kind: str | None = None
    summary: str = ""


@dataclass
class LLMCallRecord:
    step: int
    prompt_tokens: int
    prompt_tokens_evaluated: int
    prompt_tokens_new: int
    completion_tokens: int
    seconds: float


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

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "stopped": self.stopped,
            "steps": self.steps,
            "tool_calls": [
                {"name": c.name, "arguments": c.arguments, "ok": c.ok, "error_kind": c.error_kind}
                for c in self.tool_calls
            ],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "prompt_tokens_evaluated": self.usage.prompt_tokens_evaluated,
                "completion_tokens": self.usage.completion_tokens,
                "seconds": round(self.usage.seconds, 3),
            },
            "llm_calls": [asdict(c) for c in self.llm_calls],
            "error": self.error,
            "session_id": self.session_id,
        }


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class Agent:
    def __init__(
        self,
        llm: LLM,
        executor: Executor,
        config: AgentConfig | None = None,
        *,
        on_event: EventSink | None = None,
    ) -> None:
        self.llm = llm
        self.executor = executor
        self.config = config or AgentConfig()
        self.on_event = on_event or (lambda kind, payload: None)
        self._previous_tokens: list[int] = []
        self._grammar_text: str | None = None

    # -- helpers ---------------------------------------------------------------------------
    def _tools_offered(self, tool_choice: str) -> list[dict[str, Any]]:
        return [] if tool_choice == "none" else self.executor.registry.schemas()

    def system_prompt(self) -> Segments:
        return render(
            "system.jinja",
            tools=self._tools_offered(self.config.tool_choice),
            instructions=self.config.instructions,
        )

    def _grammar(self) -> str | None:
        if not self.config.grammar or self.config.tool_choice == "none" or not len(self.executor.registry):
            return None
        if self._grammar_text is None:
            from hermes_local.grammar import tool_call_grammar

            self._grammar_text = tool_call_grammar(list(self.executor.registry))
        return self._grammar_text

    def _complete(self, memory: Memory, step: int, tool_choice: str, result: RunResult) -> str:
        prefill = CALL_OPEN + "\n" if tool_choice == "required" else ""
        segments = render("chatml.jinja", messages=memory.messages(), add_generation_prompt=True, prefill=prefill)
        tokens = to_tokens(segments, self.llm)
        grammar = self._grammar() if tool_choice != "none" else None
        completion = self.llm.complete(
            tokens,
            max_tokens=min(self.config.max_tokens, max(1, self.llm.n_ctx - len(tokens) - 1)),
            temperature=self.config.temperature,
            on_token=lambda piece: self.on_event("token", {"text": piece}),
            grammar=grammar,
            grammar_trigger=None if (grammar and tool_choice == "required") else (grammar and CALL_OPEN),
        )
        new = len(tokens) - _common_prefix(tokens, self._previous_tokens)
        self._previous_tokens = tokens + completion.tokens
        u = completion.usage
        record = LLMCallRecord(step, u.prompt_tokens, u.prompt_tokens_evaluated, new, u.completion_tokens, u.seconds)
        result.llm_calls.append(record)
        for key in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens", "seconds"):
            setattr(result.usage, key, getattr(result.usage, key) + getattr(u, key))
        self.on_event("llm_call", asdict(record) | {"finish_reason": completion.finish_reason})
        return prefill + completion.text

    # -- the loop --------------------------------------------------------------------------
    def run(self, goal: str) -> RunResult:
        memory = Memory(system=self.system_prompt(), goal=goal)
        result = RunResult(answer=None, stopped="max_steps", steps=0)
        self.on_event("run_start", {"goal": goal})
        tool_names = self.executor.registry.names()
        for step in range(1, self.config.max_steps + 1):
            result.steps = step
            self.on_event("step_start", {"step": step})
            text = self._complete(memory, step, self.config.tool_choice, result)
            self.on_event("assistant", {"step": step, "text": text})
            if self.config.tool_choice == "none":
                parsed = parse_tool_calls(text, tool_names)
                result.answer, result.stopped = parsed.text, "answer"
                break
            parsed = parse_tool_calls(text, tool_names)
            if not parsed.calls and not parsed.errors:
                result.answer, result.stopped = parsed.text, "answer"
                break
            memory.add_assistant(step, parsed.text, parsed.calls)
            outcomes = [self._execute(step, call, result) for call in parsed.calls]
            for error in parsed.errors:
                failure = ToolResult.failure("invalid_arguments", error, "unreadable tool call")
                outcomes.append(("invalid_tool_call", {}, failure))
                self.on_event("tool_result", {"step": step, "name": "invalid_tool_call", **failure.envelope()})
            memory.add_tool_results(step, outcomes)
        self.on_event("run_end", result.to_json())
        return result

    def _execute(self, step: int, call: ToolCall, result: RunResult) -> tuple[str, dict[str, Any], ToolResult]:
        self.on_event("tool_call", {"step": step, "name": call.name, "arguments": call.arguments})
        outcome = self.executor.execute(call.name, call.arguments)
        result.tool_calls.append(
            ToolCallRecord(step, call.name, call.arguments, outcome.ok, outcome.error_kind, outcome.summary)
        )
        self.on_event(
            "tool_result",
            {"step": step, "name": call.name, "approval": self.executor.last_approval, **outcome.envelope()},
        )
        return call.name, call.arguments, outcome
