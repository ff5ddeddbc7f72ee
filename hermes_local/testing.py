"""Test-only helpers: `ScriptedLLM` (the replay model with test assertions) and script writers.

`ScriptedLLM` is `replay.ReplayLLM` plus `assert_all_used()`; `ScriptExhausted` is the replay
model's exhaustion error. Nothing under `hermes_local/` imports this module: the product's replay
mode lives in `replay.py`.
"""

from __future__ import annotations

from typing import Any

from hermes_local.engines.replay import ReplayExhausted, ReplayLLM, WordTokenizer, tool_call_text, write_replay
from hermes_local.events import ToolOutcome
from hermes_local.tools.registry import ToolResult

__all__ = ["ScriptExhausted", "ScriptedLLM", "WordTokenizer", "outcome", "tool_call_text", "write_replay"]

ScriptExhausted = ReplayExhausted


class ScriptedLLM(ReplayLLM):
    """The replay model for tests: also fails when scripted outputs were left unused."""

    def assert_all_used(self) -> None:
        if self.remaining:
            raise AssertionError(f"ScriptedLLM: {self.remaining} scripted output(s) were never requested")


def outcome(step: int, name: str, arguments: dict[str, Any], ok: bool, error_kind: str | None = None) -> ToolOutcome:
    """A `ToolOutcome` for checks that only look at the call and whether it worked."""
    result = ToolResult(ok, "", error_kind=error_kind)  # type: ignore[arg-type]
    return ToolOutcome(step, name, arguments, result)
