"""Prompt-lookup drafting: guess the next tokens from an earlier occurrence of the latest n-gram.

Arguments are often copied from text the model has already seen (file content into `write_file`, a
path, a table name). `PromptLookup` keeps the prompt and the output so far in a numpy array and, when
asked, finds the most recent earlier occurrence of the current suffix (`max_ngram` tokens down to
`min_ngram`) with one vectorised comparison, and proposes the tokens that followed it. The decode loop
in `llamacpp.py` evaluates the proposal in one batch and keeps the prefix its own sampler agrees with, so the
output is what plain decoding produces.

A draft is not free: on a CPU one decode of 1 + d tokens costs about 1 + `draft_cost` x d one-token
decodes (0.5 on the 2-core reference machine, `scripts/decode_curve.py`), so a guess the model does not
follow makes decoding slower (issue 28: 0.95x on the copy-heavy task). The matcher therefore keeps an
estimate of how often the model's next token is the guessed one: every proposal, drafted or not, is
checked against the tokens the model then emits (`extend`), at no decode cost. `best_draft(p, cost)`
picks the draft length with the most tokens per unit of decode time, and nothing is drafted while no
length beats plain decoding: long drafts while the model copies, none while it paraphrases, and the
estimate keeps following the model either way. This module only proposes; it never evaluates or samples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_NGRAM = 4
MIN_NGRAM = 3
MAX_DRAFT = 16
START_DRAFT = 4
DRAFT_COST = 0.5  # one drafted token's share of a one-token decode (CPU, Q4_1; docs/speed.md)
PRIOR = (4.0, 5.0)  # (followed, checked) before any evidence: p = 0.8, so drafting starts on
DECAY = 0.97  # per checked token: the estimate follows the last few dozen guesses
MARGIN = 1.02  # a draft must promise at least 2 % more tokens per unit of decode time


def best_draft(p: float, cost: float = DRAFT_COST, max_draft: int = MAX_DRAFT) -> tuple[int, float]:
    """(draft length, expected speed-up) maximising tokens per decode time: a decode of 1 + d tokens yields
    1 + p + p^2 + ... + p^d of them (the model follows each guessed token with probability p) and costs
    1 + cost x d; (0, 1.0) when no length beats plain decoding. This is also the ceiling at acceptance p."""
    best, gain, expected = 0, 1.0, 1.0
    for d in range(1, max_draft + 1):
        expected += p**d
        ratio = expected / (1 + cost * d)
        if ratio > gain:
            best, gain = d, ratio
    return best, gain


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
        draft_cost: float = DRAFT_COST,
    ) -> None:
        self.max_ngram, self.min_ngram, self.max_draft = max_ngram, min_ngram, max_draft
        self.draft_len = min(start_draft, max_draft)
        self.draft_cost = draft_cost
        self.followed, self.checked = PRIOR  # decayed counts of guessed tokens the model did / did not emit
        self._guess: list[int] = []  # the latest proposal's tokens still to be checked against the output
        self._buf = np.zeros(max(64, 2 * len(history)), dtype=np.int64)
        self._n = 0
        self.extend(history)

    @property
    def tokens(self) -> list[int]:
        return self._buf[: self._n].tolist()

    @property
    def acceptance(self) -> float:
        """The estimated chance that the model's next token is the guessed one."""
        return self.followed / self.checked

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:  # check the pending guess against what the model emitted
            if not self._guess:
                break
            hit = token == self._guess[0]
            self.followed = self.followed * DECAY + hit
            self.checked = self.checked * DECAY + 1
            self._guess = self._guess[1:] if hit else []
        need = self._n + len(tokens)
        if need > len(self._buf):
            self._buf = np.concatenate([self._buf, np.zeros(max(need, 2 * len(self._buf)), dtype=np.int64)])
        self._buf[self._n : need] = tokens
        self._n = need

    def propose(self) -> list[int]:
        """The draft: the guess (`guess()`) cut to the length that pays at the estimated acceptance; [] when
        none does. The whole guess is kept to check against what the model emits next."""
        guess = self.guess()
        if guess and not self._guess:
            self._guess = guess
        length, gain = best_draft(self.acceptance, self.draft_cost, min(self.draft_len, len(guess)))
        return guess[:length] if gain >= MARGIN else []

    def guess(self) -> list[int]:
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
                return h[start : min(start + self.max_draft, end)].tolist()
        return []

    def record(self, proposed: int, accepted: int) -> None:
        """Cap the draft length: double it after a fully accepted draft, else what was accepted plus one
        (`best_draft` then picks within it from the acceptance estimate)."""
        if proposed <= 0:
            return
        if accepted >= proposed:
            self.draft_len = min(self.max_draft, max(self.draft_len, 2 * proposed))
        else:
            self.draft_len = max(1, min(self.draft_len, accepted + 1))
