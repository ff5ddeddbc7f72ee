"""Live progress on a terminal: the `TerminalPrinter` event sink (stderr).

Streamed tokens are written as they arrive, then one `sessions show` line per step, model call, tool
call, tool result and compaction (with `verbose`, also what the model wrote: thought, plan, calls,
text). Everything that reaches the terminal goes through `textsafe.terminal_safe`, so model, file or
tool text cannot send escape sequences or bidi controls.
Does not log or decide anything.
"""

from __future__ import annotations

import sys
from typing import TextIO

from hermes_local.events import (
    AssistantText,
    Compaction,
    Event,
    Guarded,
    LLMCall,
    StepStart,
    Token,
    ToolCallStarted,
    ToolFinished,
)
from hermes_local.session import describe_event
from hermes_local.textsafe import terminal_safe

SHOWN_LIVE = (StepStart, LLMCall, ToolCallStarted, ToolFinished, Guarded, Compaction)


class TerminalPrinter:
    """Shows agent events on stderr as they happen: streamed tokens, then the `sessions show` lines."""

    def __init__(self, stream_tokens: bool, stream: TextIO | None = None, *, verbose: bool = False) -> None:
        self.stream_tokens = stream_tokens
        self.shown = (*SHOWN_LIVE, AssistantText) if verbose else SHOWN_LIVE  # --verbose: what the model wrote
        self.stream = stream or sys.stderr
        self.mid_line = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, Token):
            if self.stream_tokens:
                self.stream.write(terminal_safe(event.text, keep_newlines=True))
                self.mid_line = True
        elif isinstance(event, self.shown):
            line = describe_event(event)
            self.stream.write(("\n" if self.mid_line else "") + f"{line}\n")
            self.mid_line = False
        self.stream.flush()
