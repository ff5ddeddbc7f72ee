"""Size limits shared by the tools: head/tail clipping of text and a bounded capture buffer.

`clip_text` cuts text to a character budget keeping the head and the tail with a notice in the
middle. `HeadTailBuffer` collects a byte stream (e.g. a child process's stdout) while holding at
most a head and a tail in memory, so a 10 MB output is never held in full. Does not decide the
budgets; callers pass them (see `ToolContext.output_cap`).
"""

from __future__ import annotations

from collections import deque


def truncation_notice(omitted: int, unit: str = "characters") -> str:
    return f"\n[... {omitted} {unit} truncated ...]\n"


def clip_text(text: str, limit: int) -> tuple[str, bool]:
    """(text cut to about `limit` characters as head + notice + tail, whether it was cut)."""
    if len(text) <= limit:
        return text, False
    limit = max(limit, 40)
    head_len = limit * 2 // 3
    tail_len = limit - head_len
    omitted = len(text) - head_len - tail_len
    return text[:head_len] + truncation_notice(omitted) + text[len(text) - tail_len :], True


class HeadTailBuffer:
    """Keeps the first `head` and the last `tail` bytes written, counting everything in between."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit = head
        self.tail_limit = tail
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data or self.tail_limit <= 0:
            return
        if len(data) >= self.tail_limit:
            self.tail.clear()
            data = data[-self.tail_limit :]
            self.tail_len = 0
        self.tail.append(bytes(data))
        self.tail_len += len(data)
        while self.tail_len - len(self.tail[0]) >= self.tail_limit:
            self.tail_len -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.head_limit + self.tail_limit

    def text(self) -> str:
        """The captured text (UTF-8, invalid bytes replaced) with a notice where bytes were dropped."""
        tail = b"".join(self.tail)
        kept_tail = tail[-self.tail_limit :] if self.tail_limit > 0 else b""
        omitted = self.total - len(self.head) - len(kept_tail)
        head_text = bytes(self.head).decode("utf-8", errors="replace")
        tail_text = kept_tail.decode("utf-8", errors="replace")
        if omitted > 0:
            return head_text + truncation_notice(omitted, "bytes") + tail_text
        return head_text + tail_text
