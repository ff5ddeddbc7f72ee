"""Prompt-lookup drafting: guess the next tokens from an earlier occurrence of the latest n-gram.

Arguments are often copied from text the model has already seen (file content into `write_file`, a
path, a table name). `PromptLookup` keeps the prompt and the output so far in a numpy array and, when
asked, finds the most recent earlier occurrence of the current suffix (`max_ngram` tokens down to
`min_ngram`) with one vectorised comparison, and proposes the tokens that followed it. The decode loop
in `llamacpp.py` evaluates the proposal in one batch and keeps the prefix its own sampler agrees with, so the
output is what plain decoding produces. The draft length adapts to how much of the last drafts was
accepted (`record`): long while the model copies, short once it stops. This module only proposes; it
never evaluates or samples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_NGRAM = 4
MIN_NGRAM = 3
MAX_DRAFT = 16
START_DRAFT = 4


class PromptLookup:
    """An n-gram matcher over a growing token history (prompt, then each emitted token)."""

    def __init__(
        self,
        history: Sequence[int] = (),
        *,
        max_ngram: int = MAX_NGRAM,
        min_ngram: int = MIN_NGRAM,
        max_draft: int = MAX_DRAFT,
        start_draft: int = START_DRAFT,
    ) -> None:
        self.max_ngram, self.min_ngram, self.max_draft = max_ngram, min_ngram, max_draft
        self.draft_len = min(start_draft, max_draft)
        self._buf = np.zeros(max(64, 2 * len(history)), dtype=np.int64)
        self._n = 0
        self.extend(history)

    @property
    def tokens(self) -> list[int]:
        return self._buf[: self._n].tolist()

    def extend(self, tokens: Sequence[int]) -> None:
        need = self._n + len(tokens)
        if need > len(self._buf):
            self._buf = np.concatenate([self._buf, np.zeros(max(need, 2 * len(self._buf)), dtype=np.int64)])
        self._buf[self._n : need] = tokens
        self._n = need

    def propose(self) -> list[int]:
        """Tokens that followed the latest earlier occurrence of the longest matching suffix ([] if none)."""
        h, end = self._buf, self._n
        for n in range(min(self.max_ngram, end - 1), self.min_ngram - 1, -1):
            # windows ending at e (exclusive) for e in [n, end - 1]: the suffix itself (e == end) excluded
            hit = np.ones(end - n, dtype=bool)
            for k in range(n):
                hit &= h[k : end - n + k] == h[end - n + k]
            found = np.flatnonzero(hit)
            if found.size:
                start = int(found[-1]) + n  # what followed the latest earlier occurrence
                return h[start : min(start + self.draft_len, end)].tolist()
        return []

    def record(self, proposed: int, accepted: int) -> None:
        """Adapt the draft length: double it after a fully accepted draft, else keep what was accepted."""
        if proposed <= 0:
            return
        if accepted >= proposed:
            self.draft_len = min(self.max_draft, max(self.draft_len, 2 * proposed))
        else:
            self.draft_len = max(1, min(self.draft_len, accepted + 1))
