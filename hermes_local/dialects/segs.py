"""A small builder for dialects that render their prompt in Python instead of a `prompts/` template.

`Out.t(text)` appends framing (trusted: it may become special tokens), `Out.u(text)` content
(untrusted), `Out.add(segments)` a piece built elsewhere with its own flags. `trimmed(segments)` is
Jinja's `| trim` over segments (whitespace off both ends, flags kept). Knows no dialect; renders nothing
by itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from hermes_local.prompts import Segment, Segments


class Out:
    """Segments under construction, framing and content kept apart."""

    def __init__(self) -> None:
        self.parts: list[Segment] = []

    def t(self, text: str) -> Out:
        self.parts.append(Segment(text, True))
        return self

    def u(self, text: str) -> Out:
        self.parts.append(Segment(text, False))
        return self

    def add(self, segments: Iterable[Segment]) -> Out:
        self.parts.extend(segments)
        return self

    def done(self) -> Segments:
        return Segments(seg for seg in self.parts if seg.text)


def trimmed(segments: Iterable[Segment]) -> Segments:
    """The segments with leading and trailing whitespace removed, as Jinja's `trim` does to the joined text."""
    parts = [seg for seg in segments if seg.text]
    while parts and not parts[0].text.strip():
        parts.pop(0)
    while parts and not parts[-1].text.strip():
        parts.pop()
    if parts:
        parts[0] = Segment(parts[0].text.lstrip(), parts[0].trusted)
        parts[-1] = Segment(parts[-1].text.rstrip(), parts[-1].trusted)
    return Segments(parts)
