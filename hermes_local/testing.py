"""Test-only helpers: `ScriptedLLM` (the replay model with test assertions), `TalkativeLLM` and script writers.

`TalkativeLLM` stands in for a small model on the decide-before-generating path: left free it writes a
long guess, under a grammar from the first token it writes its scripted call.

`PacedLLM` streams its scripted replies at a set pause per piece (a model that takes time to write, for
tests of live tokens) and notes when each reply was done.

`ScriptedLLM` is `replay.ReplayLLM` plus `assert_all_used()`; `ScriptExhausted` is the replay
model's exhaustion error. `ScriptsByGoal` gives each run its own script, chosen by the run's goal, so runs that
go on at the same time (concurrent delegations of a team) each replay theirs, optionally after a delay per call
that stands in for the model's time. Nothing under `hermes_local/` imports this module: the product's replay
mode lives in `replay.py`.

`build_agent` opens a run through the front door (`runtime.start_run`) without a session log and hands back its
agent, owning the run's resources, for tests and scripts that drive the loop directly (`agent.run`, `.resume`,
`.executor`); the keyword names are those of `RunSpec`, plus the older `registry`, `db_path` and
`extra_instructions`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from hermes_local.agent.loop import Agent, EventSink
from hermes_local.config import Settings
from hermes_local.dialects import Dialect
from hermes_local.engines.replay import ReplayLLM, WordTokenizer, tool_call_text, write_replay
from hermes_local.errors import ReplayExhausted
from hermes_local.events import ToolOutcome
from hermes_local.llm import DEFAULT_OPTIONS, LLM, CallOptions, Completion, TokenCallback
from hermes_local.outcome import ToolResult
from hermes_local.runtime import Model, RunSpec, Sinks, start_run

__all__ = [
    "PacedLLM",
    "build_agent",
    "ScriptExhausted",
    "ScriptedLLM",
    "ScriptsByGoal",
    "TalkativeLLM",
    "WordTokenizer",
    "outcome",
    "tool_call_text",
    "write_replay",
]

ScriptExhausted = ReplayExhausted


class ScriptedLLM(ReplayLLM):
    """The replay model for tests: also fails when scripted outputs were left unused."""

    def assert_all_used(self) -> None:
        if self.remaining:
            raise AssertionError(f"ScriptedLLM: {self.remaining} scripted output(s) were never requested")


class TalkativeLLM(ScriptedLLM):
    """Unconstrained (free, or a lazy grammar) it answers with `guess` (a long made-up answer, as a small
    model does); constrained from the first token it replays its scripted outputs in order."""

    guess = " ".join(["It is probably ten o'clock."] * 60)

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        if not options.constrained:
            self.outputs.insert(self._cursor, self.guess)
        return super().complete(tokens, options, on_token=on_token)


class ScriptsByGoal(ScriptedLLM):
    """One script per run, by the start of its goal (the first user turn): `{"Write the minutes": [...], ...}`;
    `delay` seconds per call, slept outside the lock so concurrent runs wait together as on a batched engine."""

    _GOAL = re.compile(r"<\|im_start\|>user\n(.*?)(?:<\|im_end\|>|$)", re.S)

    def __init__(self, scripts: dict[str, Sequence[str]], *, delay: float = 0.0, **kwargs: Any) -> None:
        super().__init__([], **kwargs)
        self.scripts = {goal: ScriptedLLM(list(texts), tokenizer=self.inner) for goal, texts in scripts.items()}
        self.delay = delay
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return sum(s.remaining for s in self.scripts.values())

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        with self._lock:  # the word tokenizer hands out ids on first sight: one run at a time
            return super().tokenize(text, special=special)

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        with self._lock:
            found = self._GOAL.search(self.detokenize(list(tokens)))
            goal = found.group(1) if found else ""
            script = next((s for key, s in self.scripts.items() if goal.startswith(key)), None)
            if script is None:
                raise AssertionError(f"ScriptsByGoal: no script for the goal {goal[:80]!r}")
            completion = script.complete(tokens, options, on_token=on_token)
            self.calls.append(options)
        time.sleep(self.delay)
        return completion


class PacedLLM(ScriptedLLM):
    """Streams each scripted reply word by word, `pause` seconds before each word; `done_at` holds the
    `time.monotonic()` at which each reply was complete."""

    def __init__(self, outputs: Sequence[str], *, pause: float = 0.01, **kwargs: Any) -> None:
        super().__init__(outputs, **kwargs)
        self.pause = pause
        self.done_at: list[float] = []

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        def paced(piece: str) -> None:
            time.sleep(self.pause)
            if on_token is not None:
                on_token(piece)

        completion = super().complete(tokens, options, on_token=paced)
        self.done_at.append(time.monotonic())
        return completion


def outcome(step: int, name: str, arguments: dict[str, Any], ok: bool, error_kind: str | None = None) -> ToolOutcome:
    """A `ToolOutcome` for checks that only look at the call and whether it worked."""
    result = ToolResult(ok, "", error_kind=error_kind)  # type: ignore[arg-type]
    return ToolOutcome(step, name, arguments, result)


_OLD_NAMES = {"registry": "tools", "db_path": "db", "extra_instructions": "instructions"}


def build_agent(
    llm: LLM, settings: Settings, *, on_event: EventSink | None = None, dialect: Dialect | None = None, **spec: Any
) -> Agent:
    """The agent of a run opened by `start_run(RunSpec(settings=settings, log=False, **spec), Model(llm, dialect),
    Sinks(display=on_event))`; closing the agent closes the run (its pin, registry, models)."""
    fields = {_OLD_NAMES.get(name, name): value for name, value in spec.items()}
    handle = start_run(RunSpec(settings=settings, log=False, **fields), Model(llm, dialect), Sinks(display=on_event))
    return handle.detach()
