"""Grammar-aware decisions for one constrained decode: fast-forward, closing mode, runaway-string guard;
and `ThoughtWatch`, where a free decode is inside a thought (no lazy grammar there) and when its
reasoning budget is spent (the loop then writes the closing marker for the model).

`GrammarTracker` follows the text a constrained completion has produced through the shared
`GrammarAutomaton` and tells the sampling loop in `llamacpp.py`:
  - `forced_tokens()`: tokens the grammar forces next (fast-forward verifies them in one batch);
  - `closing_reason(remaining)`: "budget" when the token budget left is within a margin of the
    shortest valid completion, "loop" when an open string repeats itself, "max_length" when an open
    string reaches its schema maxLength or the free-text cap; `completion_tokens()` is that completion.
Calls that finish on their own never trigger closing: it only fires near the end of the budget or
on a degenerate string. This module samples nothing and never touches llama.cpp directly: it gets
a tokenizer and a token-text lookup from the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hermes_local.engines.inprocess.automaton import GrammarAutomaton, State, TokenTexts
from hermes_local.engines.inprocess.drafting import PromptLookup

CLOSING_MARGIN = 3  # extra tokens kept in hand when deciding to close (the need can grow by a few)
FREE_TEXT_MAX_CHARS = 4000  # an open string without maxLength is closed past this many characters
LOOP_MIN_TOKENS = 64  # a periodic tail at least this long (and >= 4 periods) is a runaway loop
LOOP_MAX_PERIOD = 48
SPECIAL_LITERALS = ("</tool_call>", "<tool_call>")
CANONICAL_DRAFT = 2  # tokens of a forced run drafted in the canonical split (the model's own split: all)

Tokenizer = Callable[[str], list[int]]


class GrammarTracker:
    """The automaton state of one constrained completion, fed with every emitted token."""

    def __init__(
        self,
        automaton: GrammarAutomaton,
        tokenize: Tokenizer,
        texts: TokenTexts,
        *,
        free_text_max_chars: int = FREE_TEXT_MAX_CHARS,
        closing: bool = True,
    ) -> None:
        self.automaton = automaton
        self.state: State = automaton.initial
        self._tokenize = tokenize
        self._texts = texts
        self._free_text_max = free_text_max_chars
        self._closing = closing
        self._string_tokens: list[int] = []
        self._string_chars = 0

    @property
    def finished(self) -> bool:
        """A whole call was read and the grammar allows nothing after it (only end of generation)."""
        return self.automaton.is_finished(self.state)

    @property
    def dead(self) -> bool:
        return not self.state

    def feed(self, token: int, text: str) -> None:
        """Advance over the decoded text of one emitted token (text may be "" for a partial char)."""
        if not text:
            return
        self.state = self.automaton.advance(self.state, text)
        if self.automaton.in_string(self.state):
            if not self._string_tokens:  # the string opened in this token: count after its quote
                text = text[text.rfind('"') + 1 :]
            self._string_tokens.append(token)
            self._string_chars += len(text)
        else:
            self._string_tokens.clear()
            self._string_chars = 0

    # -- fast-forward ------------------------------------------------------------------------
    def forced_text(self) -> str:
        """The text the grammar forces now ("" when the model has a choice)."""
        return self.automaton.forced(self.state)[0]

    def forced_tokens(self, memo: ForcedMemo | None = None) -> list[int]:
        """Tokens for the text the grammar forces now: the model's own split of it when `memo` saw the
        model write it before, else the canonical tokenization. They are a draft: the decode loop
        verifies each against the model's own choice, so a split the model does not prefer costs a
        wasted batch slot, never a different output."""
        text = self.forced_text()
        if not text:
            return []
        learned = memo.get(text) if memo is not None else None
        # the canonical split is often not the model's: offer only its first tokens until the memo knows
        return list(learned) if learned else self._tokens_for(text)[:CANONICAL_DRAFT]

    # -- closing mode ------------------------------------------------------------------------
    def closing_reason(self, remaining: int) -> str | None:
        """Why the call must be closed now (None: let the model go on)."""
        if not self._closing or self.dead or self.automaton.is_complete(self.state):
            return None
        need = self.automaton.min_completion_length(self.state)  # characters >= tokens for our ASCII
        if remaining <= need + CLOSING_MARGIN and remaining <= len(self.completion_tokens()) + CLOSING_MARGIN:
            return "budget"
        if self._string_tokens:
            limit = self.automaton.string_limit(self.state)
            if self._string_chars >= (limit if limit is not None else self._free_text_max):
                return "max_length"
            if _periodic_tail(self._string_tokens):
                return "loop"
        return None

    def completion_tokens(self) -> list[int]:
        """Tokens of the shortest text that completes a valid call from here."""
        return self._tokens_for(self.automaton.shortest_completion(self.state))

    def _tokens_for(self, text: str) -> list[int]:
        """Tokenize grammar text (never model or user text), keeping tool-call tags whole, and keep the
        longest prefix whose token texts the automaton accepts one after another."""
        tokens: list[int] = []
        rest = text
        while rest:
            cut = min(((rest.find(s), s) for s in SPECIAL_LITERALS if s in rest), default=None)
            if cut is None:
                tokens += self._tokenize(rest)
                break
            pos, literal = cut
            if pos:
                tokens += self._tokenize(rest[:pos])
            tokens += self._tokenize(literal)
            rest = rest[pos + len(literal) :]
        state, kept = self.state, []
        for t in tokens:
            piece = self._texts[t]
            if not piece:
                break
            nxt = self.automaton.advance(state, piece)
            if not nxt:
                break
            kept.append(t)
            state = nxt
        return kept


class ForcedMemo:
    """How the model itself tokenized forced grammar text it wrote (e.g. `get_current_time` as `et`, `_`,
    `c`, `ur`, ... after `{"name": "g`), learned from finished completions. The embedded model rarely
    picks the canonical split, so drafting its own split is what gets accepted."""

    def __init__(self, limit: int = 4096) -> None:
        self._tokens: dict[str, tuple[int, ...]] = {}
        self._limit = limit

    def get(self, text: str) -> tuple[int, ...] | None:
        return self._tokens.get(text)

    def learn(self, tokens: list[int], texts: TokenTexts, spans: list[tuple[int, str]]) -> None:
        """`spans`: (index of the first output token after which `text` was forced, text). Where the
        model's tokens from there spell exactly `text`, remember them, and each tail for the text's
        suffixes at the model's token boundaries."""
        for start, text in spans:
            pieces, acc, end = [], "", start
            while end < len(tokens) and len(acc) < len(text):
                piece = texts[tokens[end]]
                if not piece:
                    break
                pieces.append(piece)
                acc += piece
                end += 1
            if acc != text:
                continue
            if len(self._tokens) > self._limit:
                self._tokens.clear()
            offset = 0
            for i in range(start, end):
                self._tokens[text[offset:]] = tuple(tokens[i:end])  # the latest split wins
                offset += len(pieces[i - start])


def draft_for(
    tracker: GrammarTracker | None, memo: ForcedMemo, lookup: PromptLookup | None, room: int
) -> tuple[str, list[int]]:
    """Tokens to verify with the next decode and where they come from: the text the grammar forces
    ("forced", fast-forward; pass no tracker when it is off or a character is pending), else a
    prompt-lookup proposal ("lookup"); at most `room` of them."""
    if tracker is not None:
        forced = tracker.forced_tokens(memo)[:room]
        if forced:
            return "forced", forced
    if lookup is not None:
        return "lookup", lookup.propose()[:room]
    return "", []


def _periodic_tail(tokens: list[int]) -> bool:
    """The string ends in a loop: its last LOOP_MIN_TOKENS+ tokens repeat a period at least 4 times."""
    n = len(tokens)
    if n < LOOP_MIN_TOKENS:
        return False
    for period in range(1, LOOP_MAX_PERIOD + 1):
        span = max(LOOP_MIN_TOKENS, 4 * period)
        if span > n:
            break
        tail = tokens[n - span :]
        if tail[period:] == tail[:-period]:
            return True
    return False


class ThoughtWatch:
    """Follows the thoughts of one completion: `(opening, closing)` marker pairs, a token budget per thought.

    `update(text, n_tokens)` returns the closing marker to write now (the open thought has used its budget),
    else None; `inside` says a thought is open and `closed_at` where the last one ended in the text, so the
    lazy grammar triggers only after it. `opened=True`: the prompt ended inside a thought of the first pair.
    """

    def __init__(self, pairs: Sequence[tuple[str, str]], budget: int, *, opened: bool = False) -> None:
        self.pairs, self.budget = [p for p in pairs if p[0] and p[1]], budget
        self.close: str | None = self.pairs[0][1] if opened and self.pairs else None
        self.body = self.began = self.scan = self.closed_at = 0

    @classmethod
    def start(cls, pairs: Sequence[tuple[str, str]], budget: int, prompt_tail: str) -> ThoughtWatch | None:
        """The watch of a call offered these markers (None: none), opened when the prompt ends with the first."""
        return cls(pairs, budget, opened=prompt_tail.rstrip().endswith(pairs[0][0])) if pairs else None

    @property
    def inside(self) -> bool:
        return self.close is not None

    def skip(self, upto: int) -> None:
        """Text before `upto` is not prose (a constrained call): no thought opens there."""
        self.scan = max(self.scan, upto)

    def update(self, text: str, n_tokens: int) -> str | None:
        if self.close is None:
            hits = [(at, o, c) for o, c in self.pairs if (at := text.find(o, self.scan)) >= 0]
            if not hits:
                longest = max((len(o) for o, _ in self.pairs), default=1)
                self.scan = max(self.scan, len(text) - longest + 1)
                return None
            at, opener, self.close = min(hits)
            self.body, self.began = at + len(opener), n_tokens
        end = text.find(self.close, self.body)
        if end >= 0:
            self.closed_at = self.scan = end + len(self.close)
            self.close = None
            return None
        return self.close if n_tokens - self.began >= self.budget else None
