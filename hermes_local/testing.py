"""Test-only helpers: `ScriptedLLM` (the replay model with test assertions), `TalkativeLLM` and script writers.

`TalkativeLLM` stands in for a small model on the decide-before-generating path: left free it writes a
long guess, under a grammar from the first token it writes its scripted call.

`PacedLLM` streams its scripted replies at a set pause per piece (a model that takes time to write, for
tests of live tokens) and notes when each reply was done.

`ScriptedLLM` is `replay.ReplayLLM` plus `assert_all_used()`; `ScriptExhausted` is the replay
model's exhaustion error. Nothing under `hermes_local/` imports this module: the product's replay
mode lives in `replay.py`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hermes_local.engines.replay import ReplayExhausted, ReplayLLM, WordTokenizer, tool_call_text, write_replay
from hermes_local.events import ToolOutcome
from hermes_local.llm import DEFAULT_OPTIONS, CallOptions, Completion, TokenCallback
from hermes_local.tools.registry import ToolResult

__all__ = [
    "PacedLLM",
    "ScriptExhausted",
    "ScriptedLLM",
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
