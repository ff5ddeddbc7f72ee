"""Prompt-lookup drafting: guess the next tokens from an earlier occurrence of the latest n-gram.

Arguments are often copied from text the model has already seen (file content into `write_file`, a
path, a table name). `PromptLookup` indexes every n-gram (sizes `min_ngram`..`max_ngram`) of the
prompt and of the output so far, and proposes the tokens that followed the most recent earlier
occurrence of the current suffix. The sampling loop in `llm.py` evaluates the proposal in one batch
and keeps the prefix its own sampler agrees with, so output is what plain decoding would produce.
This module only proposes; it never evaluates or samples.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_NGRAM = 3
MIN_NGRAM = 2
MAX_DRAFT = 10


class PromptLookup:
    """An n-gram index over a growing token history (prompt, then each emitted token)."""

    def __init__(
        self,
        history: Sequence[int] = (),
        *,
        max_ngram: int = MAX_NGRAM,
        min_ngram: int = MIN_NGRAM,
        max_draft: int = MAX_DRAFT,
    ) -> None:
        self.max_ngram, self.min_ngram, self.max_draft = max_ngram, min_ngram, max_draft
        self.tokens: list[int] = []
        self._last: dict[tuple[int, ...], int] = {}  # n-gram -> end index (exclusive) of its latest occurrence
        self._prev: dict[tuple[int, ...], int] = {}  # n-gram -> end index of the occurrence before that
        self.extend(history)

    def extend(self, tokens: Sequence[int]) -> None:
        for t in tokens:
            self.tokens.append(t)
            end = len(self.tokens)
            for n in range(self.min_ngram, self.max_ngram + 1):
                if end >= n:
                    key = tuple(self.tokens[end - n : end])
                    if key in self._last:
                        self._prev[key] = self._last[key]
                    self._last[key] = end

    def propose(self) -> list[int]:
        """Tokens that followed the latest earlier occurrence of the longest matching suffix ([] if none)."""
        end = len(self.tokens)
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if end < n:
                continue
            key = tuple(self.tokens[end - n : end])
            earlier = self._prev.get(key) if self._last.get(key) == end else self._last.get(key)
            if earlier is not None and earlier < end:
                draft = self.tokens[earlier : min(earlier + self.max_draft, end)]
                if draft:
                    return draft
        return []
