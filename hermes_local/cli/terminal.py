"""Live progress on a terminal: the `TerminalPrinter` event sink (stderr).

Streamed tokens are split as they arrive (`calls.thoughts.ReplyStream`): a thought is shown dimmed
(hidden with `--quiet`), the model's prose as it is, and call or plan markup not at all, since the parsed
call gets its own line. Then one `sessions show` line per step, model call, tool call, tool result,
call rehearsed in a thought and compaction (with `verbose`, also what the model wrote: thought, plan,
calls, text); in a team run the routing, each delegation, and its specialist's lines tagged with its name.
`showed(answer)` tells the CLI whether the last reply's streamed prose already was the answer, so a terminal
shows it once. Everything that reaches the terminal goes through
`textsafe.terminal_safe`, so model, file or tool text cannot send escape sequences or bidi controls.
Does not log or decide anything.
"""

from __future__ import annotations

import sys
from typing import TextIO

from hermes_local.agent.team import ChildEvent
from hermes_local.calls.thoughts import ReplyStream
from hermes_local.events import AssistantText, Event, LLMCall, Reasoning, RunStart, StepStart, Token
from hermes_local.session import SHOWN_LIVE, describe_event
from hermes_local.textsafe import terminal_safe

DIM, NORMAL = "\x1b[2m", "\x1b[22m"


class TerminalPrinter:
    """Shows agent events on stderr as they happen: streamed thoughts and prose, then the `sessions show` lines."""

    def __init__(
        self, stream_tokens: bool, stream: TextIO | None = None, *, show_thoughts: bool = True, verbose: bool = False
    ) -> None:
        self.stream_tokens = stream_tokens
        self.show_thoughts = show_thoughts
        # --verbose: what the model wrote, and the goal with what long-term memory put into the prompt
        self.shown = (*SHOWN_LIVE, AssistantText, RunStart) if verbose else SHOWN_LIVE
        self.stream = stream or sys.stderr
        self.mid_line = False
        self.reply = ReplyStream()
        self.prose = ""  # the prose streamed during the current (or last) reply
        self.new_reply = True

    def __call__(self, event: Event) -> None:
        if isinstance(event, Token):
            if self.stream_tokens:
                self._stream(event.text)
        elif isinstance(event, Reasoning):  # streamed already when tokens are shown; verbose: in the reply's lines
            if self.show_thoughts and not self.stream_tokens and AssistantText not in self.shown:
                self._line(describe_event(event))
        elif isinstance(event, ChildEvent):  # a specialist's step, tagged with its name
            inner: Event = event
            tags: list[str] = []
            while isinstance(inner, ChildEvent):
                tags, inner = [*tags, inner.agent], inner.event
            if isinstance(inner, self.shown) and (line := describe_event(inner)) is not None:
                self._line(f"   [{terminal_safe('/'.join(tags))}] {line.strip()}")
        elif isinstance(event, self.shown):
            self._line(describe_event(event))
            self.new_reply = self.new_reply or isinstance(event, StepStart | LLMCall)
        self.stream.flush()

    def _stream(self, piece: str) -> None:
        if self.new_reply:
            self.reply, self.prose, self.new_reply = ReplyStream(), "", False
        for channel, text in self.reply.feed(piece):
            shown = terminal_safe(text, keep_newlines=True)
            if channel == "thought":
                if self.show_thoughts:
                    self.stream.write(f"{DIM}{shown}{NORMAL}")
                    self.mid_line = True
                continue
            if not self.prose.strip():
                shown = shown.lstrip()  # no blank lines where hidden markup was
            self.prose += text
            self.stream.write(shown)
            self.mid_line = self.mid_line or bool(shown)

    def _line(self, line: str | None) -> None:
        self.stream.write(("\n" if self.mid_line else "") + f"{line}\n")
        self.mid_line = False

    def showed(self, answer: str | None) -> bool:
        """The last reply's streamed prose was this answer (whitespace aside)."""
        return bool(answer) and " ".join(self.prose.split()) == " ".join(str(answer).split())
