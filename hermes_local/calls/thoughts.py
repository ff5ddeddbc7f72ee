"""Thought markers: which spans of a reply are reasoning, and the live split of a streamed reply.

A thought is the model thinking aloud: `<think>...</think>` (Qwen3, DeepSeek-R1, Hermes 3/4-style
reasoning), `<|startofthought|>...<|endofthought|>` (Hermes 2 Pro as the founding documents show it) and
`[THINK]...[/THINK]` (Magistral), `<|channel>thought...<channel|>` (Gemma 4); gpt-oss's analysis
channel (`HARMONY_THOUGHT`) is read by its own dialect only (`<|end|>` closes other messages too).
`parse.py` reads every known pair whatever the dialect, so a call
rehearsed inside any of them is never run (it comes back in `ParseResult.rehearsed`); a dialect names
its own pair first (`Dialect.thoughts`), for the history and the reasoning budget.
`ReplyStream` splits streamed pieces into channels for a terminal: `thought`, `text` (prose), and
nothing for call or plan markup (`<tool_call>...</tool_call>`, `[TOOL_CALLS]...`, `<plan>...</plan>`)
and for what follows a made-up `<tool_response>`. Knows no dialect class; executes and prints nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Markers = tuple[str, str]
THINK: Markers = ("<think>", "</think>")
HERMES_THOUGHT: Markers = ("<|startofthought|>", "<|endofthought|>")
MISTRAL_THINK: Markers = ("[THINK]", "[/THINK]")
GEMMA_THOUGHT: Markers = ("<|channel>thought", "<channel|>")  # Gemma 4
HARMONY_THOUGHT: Markers = ("<|channel|>analysis<|message|>", "<|end|>")  # gpt-oss: the analysis channel
KNOWN_THOUGHTS: tuple[Markers, ...] = (THINK, HERMES_THOUGHT, MISTRAL_THINK, GEMMA_THOUGHT)
RESPONSE_FRAMING = ("<|startofresponse|>", "<|endofresponse|>")  # Hermes 2 Pro's answer framing: dropped
CALL_CLOSERS = ("[/TOOL_CALLS]",)  # closing markers some models add after a call: never an error

OPEN_PATTERN = "|".join(re.escape(o) for o, _ in KNOWN_THOUGHTS)
CLOSE_PATTERN = "|".join(re.escape(c) for _, c in KNOWN_THOUGHTS)
_CLOSE_OF = {o.lower(): re.compile(re.escape(c), re.I) for o, c in KNOWN_THOUGHTS}
_ANY_CLOSE = re.compile(CLOSE_PATTERN, re.I)
_ANY_OPEN = re.compile(OPEN_PATTERN, re.I)


def pair_of(marker: str) -> Markers:
    """The known (opening, closing) pair that `marker` (either one, any case) belongs to."""
    return next(pair for pair in KNOWN_THOUGHTS if marker.lower() in (pair[0].lower(), pair[1].lower()))


def thought_end(text: str, opener: str, start: int) -> tuple[int, int]:
    """(end of the thought's text, end of its closing marker) for a thought opened by `opener` at `start`;
    an unclosed thought runs to the end of the reply."""
    close = _CLOSE_OF[opener.lower()].search(text, start)
    return (len(text), len(text)) if close is None else (close.start(), close.end())


def prompt_opened(text: str) -> int:
    """Where the reply's text begins when the prompt opened the thought (a closing marker comes before any
    opening one: all before it is reasoning), else 0."""
    close, open_ = _ANY_CLOSE.search(text), _ANY_OPEN.search(text)
    return close.end() if close is not None and (open_ is None or close.start() < open_.start()) else 0


# -- the live split of a streamed reply (terminal display) --------------------------------------------
_HIDDEN: tuple[Markers, ...] = (
    ("<tool_call>", "</tool_call>"),
    ("<plan>", "</plan>"),
    ("<function", "</function>"),
    ("[TOOL_CALLS]", "[/TOOL_CALLS]"),
    ("<tool_response>", ""),  # a made-up result: it and all after it are dropped, as parse.py does
    *((f, "") for f in RESPONSE_FRAMING),  # framing only: nothing is hidden after it
    ("<|im_start|>", ""),
)
_DROPPED = ("<|im_end|>", "</s>", *CALL_CLOSERS, *(c for _, c in KNOWN_THOUGHTS))


class ReplyStream:
    """Splits the pieces of one streamed reply into (channel, text): `thought` or `text`; markup is left out.

    A piece that may be the start of a marker is held back until the next piece settles it."""

    def __init__(self, thoughts: Sequence[Markers] = KNOWN_THOUGHTS, *, hide_markup: bool = True) -> None:
        """`hide_markup=False` splits off the thoughts only: call and plan markup stay in `text`."""
        self.openers: list[tuple[str, str, str]] = [(o, c, "thought") for o, c in thoughts]
        self.openers += [(o, c, "hidden") for o, c in _HIDDEN] if hide_markup else []
        self.dropped = _DROPPED if hide_markup else tuple(c for _, c in thoughts)
        self.pending = ""
        self.inside: tuple[str, str] | None = None  # (closing marker, channel) of the open span
        self.ended = False  # after a made-up tool response: nothing more is shown

    def feed(self, piece: str) -> list[tuple[str, str]]:
        """The shown parts of `piece` (with whatever was held back), in order."""
        out: list[tuple[str, str]] = []
        s, self.pending = self.pending + piece, ""
        while s and not self.ended:
            if self.inside is not None:
                close, channel = self.inside
                at = s.find(close) if close else -1
                if at < 0:
                    keep = _partial_tail(s, (close,)) if close else 0
                    self._emit(out, channel, s[: len(s) - keep])
                    self.pending, s = s[len(s) - keep :], ""
                    break
                self._emit(out, channel, s[:at])
                self.inside, s = None, s[at + len(close) :]
                continue
            hit = self._next_marker(s)
            if hit is None:
                keep = _partial_tail(s, [o for o, _, _ in self.openers] + list(self.dropped))
                self._emit(out, "text", s[: len(s) - keep])
                self.pending = s[len(s) - keep :]
                break
            at, marker, close, channel = hit
            self._emit(out, "text", s[:at])
            s = s[at + len(marker) :]
            if channel == "hidden" and not close:
                self.ended = marker == "<tool_response>"
            elif channel != "dropped":
                self.inside = (close, channel)
        return out

    def _next_marker(self, s: str) -> tuple[int, str, str, str] | None:
        best: tuple[int, str, str, str] | None = None
        for marker, close, channel in [*self.openers, *((d, "", "dropped") for d in self.dropped)]:
            at = s.find(marker)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, marker, close, channel)
        return best

    @staticmethod
    def _emit(out: list[tuple[str, str]], channel: str, text: str) -> None:
        if text and channel != "hidden":
            out.append((channel, text))


def _partial_tail(s: str, markers: Sequence[str]) -> int:
    """How many trailing characters of `s` could be the start of one of `markers`."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(s)), best, -1):
            if marker.startswith(s[-n:]):
                best = n
                break
    return best
