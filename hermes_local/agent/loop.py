"""The agent loop: render -> complete -> parse -> execute -> feed back, with its guards.

`Agent.run(goal)` returns a `RunResult`; `Agent.resume(events)` continues a logged session (with a
message, a finished one); `Agent.chat(memory, message)` runs one turn of a multi-turn chat. Model mistakes (bad JSON,
unknown tools, bad arguments) go back to the model as tool results and the loop continues. Guards:
the context budget (compaction before ~75% of n_ctx), token budgets (`budget.TokenBudget`: stopped
"budget"), a goal reminder every few steps, the loop guard (`guards.LoopGuard`), the no-tool answer
guard (one bounce of an answer given without any tool call when the goal needs a tool; the next step
must call a tool; a goal that needs one starts with the call grammar on), the empty-reply guard (a
reply empty after parsing, or only a made-up tool result, is sent back once; the second ends the run
with stopped "empty"), a cap on consecutive failures, and one final-answer request at max_steps
(stopped "max_steps", a parroted request is no answer). Under tool_choice=required the model ends
the run with the `final_answer` tool (guarded like an answer when no tool has answered yet). One
turn's calls run through `turn.execute_turn`. Progress is reported as typed `events.Event` objects
through `on_event`. This module never formats terminal output.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from hermes_local.agent.answers import AnswerGuard
from hermes_local.agent.budget import DayUsage, TokenBudget
from hermes_local.agent.evidence import SUCCESS, Need, judge, real_calls, same_answer
from hermes_local.agent.guards import LoopGuard, first_step_note
from hermes_local.agent.ledger import episode_record
from hermes_local.agent.memory import ContextTooSmall, Memory, Turn, extract_plan, fit_prompt
from hermes_local.agent.redecode import LastCall, try_redecode
from hermes_local.agent.result import AgentConfig, RunResult, handoff, step_limit_line
from hermes_local.agent.resume import rebuild_memory
from hermes_local.agent.turn import execute_turn, is_parroted
from hermes_local.config import home_dir
from hermes_local.dialects import Dialect, require_same_dialect
from hermes_local.dialects.hermes import HermesDialect
from hermes_local.errors import GrammarTooLarge
from hermes_local.events import (
    AssistantText,
    BudgetWarning,
    Compaction,
    Event,
    Guarded,
    Redecoded,
    RunEnd,
    RunResumed,
    RunStart,
    StepStart,
    Token,
    ToolFinished,
    ToolOutcome,
    TurnAdded,
)
from hermes_local.llm import DEFAULT_STOP, LLM, CallOptions, Completion, common_prefix_length
from hermes_local.outcome import ToolResult
from hermes_local.prompts import Segments, render
from hermes_local.tools.builtin.interaction import FINAL_ANSWER, final_answer
from hermes_local.tools.execution import Executor

EventSink = Callable[[Event], None]
FINAL_ANSWER_REQUEST = (
    "You have reached the step limit. Do not call any more tools: reply now with your final answer "
    "to the goal from what you have found so far."
)


class Agent:
    """The agent loop over one model and one executor; a context manager that closes its resources."""

    def __init__(
        self,
        llm: LLM,
        executor: Executor,
        config: AgentConfig | None = None,
        *,
        on_event: EventSink | None = None,
        recall: Callable[[str], list[str]] | None = None,
        dialect: Dialect | None = None,
    ) -> None:
        self.llm = llm
        self.dialect = dialect or HermesDialect()
        self.executor = executor
        self.config = config or AgentConfig()
        self.on_event: EventSink = on_event or (lambda event: None)
        self.answers = AnswerGuard(self.config, lambda: self.executor.registry, lambda e: self.on_event(e))
        self.recall = recall
        self.learn: Callable[[dict[str, Any]], object] | None = None  # keeps the episode of a run (runtime sets it)
        self._previous_tokens: list[int] = []
        self._grammar_texts: dict[bool, str | None] = {}  # keyed by "without final_answer"
        self._last_truncated: str | None = None  # the last completion's closing reason, if any
        self._last_call: LastCall | None = None  # the last model call (a re-decode starts from it)
        self.closers: list[Callable[[], None]] = []
        self._failures_logged: set[str] = set()  # MCP servers logged as down (once per agent: a chat logs them once)
        self._sent_back: list[str] = []  # answers a continued session's log shows were sent back or unsupported
        self.loop_guard = LoopGuard(max_identical=self.config.max_identical_calls)
        day = DayUsage(home_dir() / "usage") if self.config.max_day_tokens else None
        self.budget = TokenBudget(self.config.max_run_tokens, self.config.max_day_tokens, day)
        denied: set[str] = executor.approver.denied  # deny_tools = ["final_answer"]: every step calls a tool
        if (
            self.config.tool_choice == "required"
            and executor.registry.get(FINAL_ANSWER) is None
            and FINAL_ANSWER not in denied
        ):
            registry = executor.registry.subset(executor.registry.names())  # same sources and cleanup
            registry.register(final_answer)  # the way to finish
            executor.registry = registry

    def close(self) -> None:
        """End of the run: stop what its tools started (MCP servers), close its stores. Safe to call twice."""
        while self.closers:
            self.closers.pop()()
        self.executor.registry.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _on_turn(self, turn: Turn) -> None:
        if turn.role != "assistant":  # assistant turns are rebuilt from AssistantText on resume
            self.on_event(TurnAdded(**turn.to_event()))

    # -- prompt ----------------------------------------------------------------------------
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools offered to the model: none with tool_choice "none", else the routed selection (or all)."""
        if self.config.tool_choice == "none":
            return []
        offered = self.config.offered_tools
        return [
            t.schema()
            for t in self.executor.registry
            if offered is None or t.name in offered or t.name == FINAL_ANSWER  # final_answer is always offered
        ]

    def system_prompt(self) -> Segments:
        """hermes-local's own rules and the user's instructions (the dialect adds the tool block)."""
        return render("system.jinja", tools=self.tool_schemas(), instructions=self.config.instructions)

    def new_memory(self, goal: str) -> Memory:
        recalled = self.recall(goal) if self.recall else []
        memory = Memory(system=self.system_prompt(), goal=goal, recalled=recalled, dialect=self.dialect)
        memory.on_turn = self._on_turn
        return memory

    def _grammar(self, *, without_final_answer: bool = False) -> str | None:
        """The call grammar over the registry; after a bounce, without final_answer (a real tool must come)."""
        if not self.config.grammar or self.config.tool_choice == "none" or not len(self.executor.registry):
            return None
        tools = [t for t in self.executor.registry if not (without_final_answer and t.name == FINAL_ANSWER)]
        if without_final_answer not in self._grammar_texts:  # too large (thousands of tools): parse and validate only
            with contextlib.suppress(GrammarTooLarge):
                self._grammar_texts[without_final_answer] = self.dialect.grammar(tools) if tools else None
            self._grammar_texts.setdefault(without_final_answer, None)
        return self._grammar_texts[without_final_answer]

    def _prompt_tokens(self, memory: Memory, prefill: str) -> list[int]:
        return self.dialect.tokens(memory.messages(), self.tool_schemas(), self.llm, prefill=prefill)

    def _fitted_prompt(self, memory: Memory, prefill: str, result: RunResult, *, last: bool) -> tuple[list[int], int]:
        """Prompt tokens within budget (compacting memory if needed) and the max_tokens left (`fit_prompt`)."""
        c, measure = self.config, lambda: self._prompt_tokens(memory, prefill)
        tokens, room, compacted = fit_prompt(
            memory, measure, self.llm.n_ctx, c.max_tokens, c.budget_fraction, c.compact_to_fraction, last=last
        )
        if compacted:
            result.compactions += 1
            self.on_event(Compaction(memory.compacted_through_step))
        return tokens, room

    def _complete(
        self,
        memory: Memory,
        step: int,
        tool_choice: str,
        result: RunResult,
        *,
        forced: bool = False,
        last: bool = False,
    ) -> str:
        """One model call; `forced` (the step after a bounce) leaves final_answer out of the grammar;
        `last`: the run's final call (see _fitted_prompt)."""
        required = tool_choice == "required"
        prefill = self.dialect.required_prefill if required else ""
        tokens, max_new = self._fitted_prompt(memory, prefill, result, last=last)
        trigger = None if required else self.dialect.call_open
        wanted = required or (tool_choice == "auto" and trigger)
        grammar = self._grammar(without_final_answer=forced) if wanted else None
        options = CallOptions(
            max_tokens=max_new,
            temperature=self.config.answer_temperature if tool_choice == "none" else self.config.temperature,
            stop=self.dialect.stop or DEFAULT_STOP,
            grammar=grammar,
            grammar_trigger=trigger if grammar else None,
            thoughts=self.dialect.all_thoughts(),
            max_reasoning_tokens=self.config.max_reasoning_tokens,
        )
        self.on_event(Token(prefill)) if prefill else None  # the reply begins with it (a terminal hides the markup)
        completion = self.llm.complete(tokens, options, on_token=lambda piece: self.on_event(Token(piece)))
        self._last_call = LastCall(tokens, options, completion, prefill)
        self._last_truncated = getattr(completion, "truncated", None)
        self._account(step, tokens, completion, prefill, result)
        if (warning := self.budget.warning()) is not None:
            self.on_event(BudgetWarning(step, warning))
        return prefill + completion.text

    def _account(self, step: int, prompt: list[int], completion: Completion, prefill: str, result: RunResult) -> None:
        """Log one model call (its new prompt tokens against the previous call's) and charge the token budget."""
        new = len(prompt) - common_prefix_length(prompt, self._previous_tokens)
        self._previous_tokens = prompt + completion.tokens
        self.on_event(result.add_call(step, completion.usage, new, completion.finish_reason, prefill))
        self.budget.charge(completion.usage.prompt_tokens_evaluated + completion.usage.completion_tokens)

    def _redecoded(self, step: int, text: str, result: RunResult) -> str:
        """`text`, or its call span decoded again under the grammar when it does not parse (agent/redecode.py)."""
        if not self.config.redecode:
            return text
        names = self.executor.registry.names()
        redo = try_redecode(
            self.llm,
            self._last_call,
            text,
            lambda reply: self.dialect.parse(extract_plan(reply)[2], names),
            self.dialect.required_prefill,
        )
        if redo is None:
            return text
        self._account(step, redo.prompt, redo.completion, self.dialect.required_prefill, result)
        self.on_event(Redecoded(step, redo.replaced, redo.written, redo.ok))
        return redo.reply

    # -- entry points ----------------------------------------------------------------------
    def run(self, goal: str) -> RunResult:
        memory = self.new_memory(goal)
        self.on_event(self._start(goal, memory.recalled))
        return self._learned(memory, self._loop(memory, self._new_result(0), first_step=1))

    def _learned(self, memory: Memory, result: RunResult) -> RunResult:  # the episode (no model call) -> `learn`
        if self.learn is not None:
            writes = {t.name: t.writes_path for t in self.executor.registry if t.writes_path}
            record = episode_record(memory.goal, memory.ledger, result.answer, result.stopped, writes)
            self.learn(record | {"outcome": result.outcome, "evidence": result.evidence})
        return result

    def _start(self, goal: str, recalled: list[str]) -> RunStart:  # with the folder and mode `sessions apply` reads
        where, plan, pin = str(self.executor.context.workspace or ""), self.executor.plan, self.executor.context.pin
        folder = pin.identity.to_dict() if pin is not None else None  # what resume, apply and undo check again
        return RunStart(goal, recalled, self.dialect.name, self.dialect.call_format, where, plan, folder)

    def _new_result(self, steps: int) -> RunResult:
        """A run's result so far, listing the MCP servers that did not start (logged once, one event each)."""
        result = RunResult(answer=None, stopped="max_steps", steps=steps, sent_back=list(self._sent_back))
        result.note_mcp_failures(self.executor.registry.failed_sources, self._failures_logged, self.on_event)
        return result

    def chat(self, memory: Memory | None, message: str) -> tuple[Memory, RunResult]:
        """One chat turn: the first message is the goal; later ones are appended user turns."""
        last_step = max((t.step for t in memory.turns), default=0) if memory else 0
        if memory is None:
            memory = self.new_memory(message)
            self.on_event(self._start(message, memory.recalled))
        else:
            memory.add_user_note(last_step + 1, Segments.untrusted(message))
        result = self._new_result(0)
        asked = message if last_step else ""
        result = self._loop(
            memory, result, first_step=last_step + 1, step_limit=last_step + self.config.max_steps, asked=asked
        )
        if result.answer:
            memory.add_assistant(result.steps, result.answer, [])
        return memory, result

    def resume(self, events: list[Event], message: str | None = None) -> RunResult:
        """Continue a logged session: completed calls are not re-run; an in-flight call is interrupted.
        With `message`, a finished session goes on with that new user message (`run --continue ID`)."""
        start = next((e for e in events if isinstance(e, RunStart)), None)
        if start is None:
            raise ValueError("the session log has no run_start event")
        require_same_dialect(start.dialect, start.tool_call_format, self.dialect)
        self.executor.plan = self.executor.plan or start.plan  # a plan-only run stays one when resumed
        memory = rebuild_memory(events, start, self.system_prompt(), self.dialect, self.executor, self._on_turn)
        last_step = max((t.step for t in memory.turns), default=0)
        self.on_event(RunResumed(memory.goal, last_step + 1))
        unsupported = [e for e in events if isinstance(e, RunEnd) and e.result.get("outcome") not in SUCCESS]
        self._sent_back = [e.answer for e in events if isinstance(e, Guarded) and e.answer]
        self._sent_back += [str(e.answer) for e in unsupported if e.answer]
        if message is not None:
            return self.chat(memory, message)[1]
        return self._learned(memory, self._loop(memory, self._new_result(last_step), first_step=last_step + 1))

    # -- the loop --------------------------------------------------------------------------
    def _judged(self, memory: Memory, result: RunResult, need: Need) -> None:
        """The run's outcome, decided once from what the tools did (`evidence.judge`), into `result`."""
        repeated = result.answer is not None and any(same_answer(result.answer, t) for t in result.sent_back)
        # this run's (or turn's) own calls when it made any; else what the session found before (a follow-up)
        calls = result.tool_calls if real_calls(result.tool_calls) else memory.ledger
        recorder = self.executor.checkpoints  # what the workspace's checkpoints say changed (a plan changes nothing)
        changed = set(recorder.changed) if recorder is not None and not self.executor.plan else None
        why = result.error or ""
        earlier = memory.ledger  # a follow-up's earlier messages may name files its earlier turns used
        verdict = judge(
            result.answer, result.stopped, calls, need, repeated=repeated, why=why, changed=changed, earlier=earlier
        )
        result.outcome, result.evidence = verdict.outcome, verdict.evidence

    def _loop(
        self, memory: Memory, result: RunResult, first_step: int, step_limit: int | None = None, asked: str = ""
    ) -> RunResult:
        limit = step_limit or self.config.max_steps
        need = self.answers.need = self.answers.need_of(memory.goal, asked)
        tool_names = self.executor.registry.names()
        self.executor.cache.invalidate()  # the per-run result cache starts empty
        # Decide before generating: a goal that needs a tool starts with the call grammar on (the trigger
        # pre-fired), so no free text is generated only for the answer guard to throw away.
        first_tool = self.answers.tool_needed(memory, result) if first_step == 1 else None
        failures, force_tool = 0, first_tool is not None
        if first_tool is not None:  # say which tool, as a bounce would: the grammar forces a call, the note picks it
            memory.add_user_note(1, Segments.untrusted(first_step_note(first_tool)))
        try:
            for step in range(first_step, limit + 1):
                result.steps = step
                self.on_event(StepStart(step))
                if self._out_of_budget(result):
                    break
                if self.config.reminder_every and step > 1 and (step - 1) % self.config.reminder_every == 0:
                    memory.add_user_note(step, memory.reminder_note())
                choice = "required" if force_tool and self._grammar() else self.config.tool_choice
                text = self._redecoded(step, self._complete(memory, step, choice, result, forced=force_tool), result)
                force_tool = False
                current, todo, plain = extract_plan(text)
                reply = self.dialect.parse(plain, tool_names)
                self.on_event(AssistantText(step, text, dropped=[list(d) for d in reply.dropped]))  # <plan> too
                memory.note_plan(current, todo, step)
                parsed = result.note_reply(step, reply, self.on_event)
                if self.config.tool_choice == "none" or (not parsed.calls and not parsed.errors):
                    bounce = self.answers.answer_or_bounce(memory, step, parsed, result)
                    if bounce is None:
                        break
                    force_tool = bounce
                    continue
                if self.answers.bounce_final_answer(memory, step, parsed.calls, parsed.errors, result):
                    force_tool = True
                    continue
                memory.add_reply(step, parsed)
                cut = parsed.calls[-1] if self._last_truncated and parsed.calls else None
                outcomes = execute_turn(self.executor, self.loop_guard, self.on_event, step, parsed.calls, result, cut)
                # a server that crashed for good during the turn
                result.note_mcp_failures(self.executor.registry.failed_sources, self._failures_logged, self.on_event)
                for error in parsed.errors:
                    failure = ToolResult.failure("invalid_arguments", error, "unreadable tool call")
                    outcome = ToolOutcome(step, "invalid_tool_call", {}, failure)
                    outcomes.append(outcome)
                    self.on_event(ToolFinished(outcome))
                memory.add_tool_results(step, outcomes)
                finished = next((o for o in outcomes if o.name == FINAL_ANSWER and o.ok), None)
                if finished is not None:
                    result.answer, result.stopped = str(finished.arguments.get("answer", "")), "answer"
                    break
                failures = 0 if any(o.ok for o in outcomes) else failures + 1
                if failures >= self.config.max_consecutive_failures:
                    result.stopped = "error"
                    result.error = f"{failures} steps in a row had only failed tool calls"
                    result.answer = self._final_answer(memory, step, result)
                    break
            else:
                result.error = step_limit_line(self.config.max_steps)
                if self.budget.exhausted() is None:
                    result.answer = self._final_answer(memory, result.steps, result)
        except ContextTooSmall as exc:
            result.stopped, result.error = "error", str(exc)
        if result.stopped == "max_steps" or failures >= self.config.max_consecutive_failures:  # it gave up
            result.handoff = handoff(memory.ledger, memory.goal, memory.plan_todo, result.error or result.stopped)
        self._judged(memory, result, need)
        self.on_event(RunEnd(result.to_json()))
        return result

    def _out_of_budget(self, result: RunResult) -> bool:
        """Whether a token budget is spent: then the run ends with stopped="budget" and says why."""
        if (why := self.budget.exhausted()) is not None:
            result.stopped, result.error = "budget", why
        return why is not None

    def _final_answer(self, memory: Memory, step: int, result: RunResult) -> str | None:
        memory.add_user_note(step, Segments.untrusted(FINAL_ANSWER_REQUEST))
        text = self._complete(memory, step, "none", result, last=True)
        reply = self.dialect.parse(extract_plan(text)[2])
        answer, dropped = reply.text or None, [list(d) for d in reply.dropped]
        if answer is not None and is_parroted(answer, FINAL_ANSWER_REQUEST):
            dropped.append(["it repeated the request for an answer", answer])
            answer = None
        self.on_event(AssistantText(step, text, final=True, dropped=dropped))
        result.note_reply(step, reply, self.on_event)
        return answer
