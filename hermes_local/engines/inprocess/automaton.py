"""A character-level pushdown automaton over our GBNF tool-call grammar, built once per grammar text.

llama.cpp's public API does not expose its grammar state, so decoding features that need to know
what the grammar allows next (closing mode, runaway-string guard, fast-forward) use this automaton:
it reads the same GBNF text `calls/grammar.py` generates (parsed by `gbnf.py`) and follows it the way
llama.cpp does (a set of rule stacks, advanced one character at a time). For a state it answers: which
characters may come next, whether exactly one continuation is forced (and what it is), the shortest text
that completes a valid call, whether the decoder is inside a JSON string. `TokenTexts` precomputes the text of every
token of a vocabulary once, so token ids can be checked against the automaton cheaply.

It does not sample, talk to llama.cpp, or know about tools; it covers the GBNF subset `grammar.py`
emits (literals, character classes, rule references, groups, `| ? * + {m} {m,n}`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from hermes_local.engines.inprocess.gbnf import Element, GbnfParser, GrammarSyntaxError

Stack = tuple[int, ...]  # frames, top last; a frame is alt_id * _SCALE + position in that alternative
State = frozenset  # of Stack; the empty stack means "a complete call was read"
_SCALE = 1 << 12


@dataclass(frozen=True)
class _Alt:
    rule: str
    elements: tuple[Element, ...]


class GrammarAutomaton:
    """Follows a GBNF grammar character by character; states are immutable and transitions cached."""

    def __init__(self, gbnf: str, root: str = "root") -> None:
        rules = GbnfParser(gbnf).rules
        if root not in rules:
            raise GrammarSyntaxError(f"no rule {root!r}")
        for alts in rules.values():
            for alt in alts:
                for e in alt:
                    if e[0] == "r" and e[1] not in rules:
                        raise GrammarSyntaxError(f"undefined rule {e[1]!r}")
        self.rules = rules
        self.alts: list[_Alt] = []
        self.rule_alts: dict[str, list[int]] = {}
        for name, alts in rules.items():
            self.rule_alts[name] = []
            for seq in alts:
                self.rule_alts[name].append(len(self.alts))
                self.alts.append(_Alt(name, tuple(seq)))
        self._min_len = self._rule_min_lengths()
        self._shortest = self._rule_shortest_texts()
        # rest[alt][pos]: fewest characters to finish that alternative from that position
        self._rest: list[list[int]] = []
        for a in self.alts:
            rest = [0] * (len(a.elements) + 1)
            for pos in range(len(a.elements) - 1, -1, -1):
                rest[pos] = rest[pos + 1] + self._elem_min(a.elements[pos])
            self._rest.append(rest)
        # JSON string values: the `string` rule and `string-max-N` (schema maxLength), with their sub-rules
        self._string_alts: dict[int, int | None] = {}
        for i, a in enumerate(self.alts):
            m = re.fullmatch(r"string(?:-max-(\d+))?", a.rule.split("~")[0])
            if m:
                self._string_alts[i] = int(m.group(1)) if m.group(1) else None
        self._advance_cache: dict[tuple[State, str], State] = {}
        self._forced_cache: dict[State, tuple[str, State]] = {}
        self.initial: State = self._expand_all([(self._frame(i, 0),) for i in self.rule_alts[root]])

    # -- static analysis -------------------------------------------------------------------
    def _elem_min(self, e: Element) -> int:
        return 1 if e[0] == "c" else self._min_len[e[1]]

    def _rule_min_lengths(self) -> dict[str, int]:
        inf = 1 << 30
        best = dict.fromkeys(self.rules, inf)
        changed = True
        while changed:
            changed = False
            for name, alts in self.rules.items():
                for alt in alts:
                    n = sum(1 if e[0] == "c" else best[e[1]] for e in alt)
                    if n < best[name]:
                        best[name], changed = n, True
        return best

    def _rule_shortest_texts(self) -> dict[str, str]:
        out: dict[str, str] = {}

        def text(name: str) -> str:
            if name not in out:
                alts = self.rules[name]
                alt = min(alts, key=lambda a: sum(self._elem_min(e) for e in a))
                out[name] = "".join(_representative(e) if e[0] == "c" else text(e[1]) for e in alt)
            return out[name]

        for name in self.rules:
            text(name)
        return out

    @staticmethod
    def _frame(alt: int, pos: int) -> int:
        return alt * _SCALE + pos

    # -- stacks ----------------------------------------------------------------------------
    def _expand(self, stack: Stack, out: set[Stack]) -> None:
        """Add to `out` every stack reachable from `stack` without reading, whose top is a char (or empty)."""
        if not stack:
            out.add(stack)
            return
        alt_id, pos = divmod(stack[-1], _SCALE)
        elements = self.alts[alt_id].elements
        if pos == len(elements):
            self._expand(stack[:-1], out)
            return
        e = elements[pos]
        if e[0] == "c":
            out.add(stack)
            return
        base = stack[:-1] + ((stack[-1] + 1,) if pos + 1 < len(elements) else ())
        for sub in self.rule_alts[e[1]]:
            self._expand(base + (self._frame(sub, 0),), out)

    def _expand_all(self, stacks: Sequence[Stack]) -> State:
        out: set[Stack] = set()
        for s in stacks:
            self._expand(s, out)
        return frozenset(out)

    def _top(self, stack: Stack) -> Element:
        alt_id, pos = divmod(stack[-1], _SCALE)
        return self.alts[alt_id].elements[pos]

    # -- queries ---------------------------------------------------------------------------
    def advance(self, state: State, text: str) -> State:
        """The state after reading `text`; the empty frozenset when the grammar rejects it."""
        for ch in text:
            if not state:
                return state
            key = (state, ch)
            nxt = self._advance_cache.get(key)
            if nxt is None:
                code = ord(ch)
                moved = [s[:-1] + (s[-1] + 1,) for s in state if s and _matches(self._top(s), code)]
                nxt = self._expand_all(moved)
                if len(self._advance_cache) > 200_000:
                    self._advance_cache.clear()
                self._advance_cache[key] = nxt
            state = nxt
        return state

    def accepts(self, state: State, text: str = "") -> bool:
        """True when `text` read from `state` leaves the grammar alive (a valid prefix)."""
        return bool(self.advance(state, text)) if text else bool(state)

    def is_complete(self, state: State) -> bool:
        """A whole call has been read (the grammar may still allow more)."""
        return () in state

    def is_finished(self, state: State) -> bool:
        """A whole call has been read and nothing may follow it."""
        return state == frozenset({()})

    def forced(self, state: State) -> tuple[str, State]:
        """The text the grammar forces from `state` (maybe empty) and the state after it."""
        hit = self._forced_cache.get(state)
        if hit is not None:
            return hit
        text: list[str] = []
        cur = state
        while cur and () not in cur and len(text) < 512:
            ch = self._single_char(cur)
            if ch is None:
                break
            text.append(ch)
            cur = self.advance(cur, ch)
        result = ("".join(text), cur)
        self._forced_cache[state] = result
        return result

    def _single_char(self, state: State) -> str | None:
        only: int | None = None
        for s in state:
            e = self._top(s)
            if e[2] or len(e[1]) != 1 or e[1][0][0] != e[1][0][1]:
                return None
            if only is not None and only != e[1][0][0]:
                return None
            only = e[1][0][0]
        return None if only is None else chr(only)

    def stack_cost(self, stack: Stack) -> int:
        cost = 0
        for frame in stack:
            alt_id, pos = divmod(frame, _SCALE)
            cost += self._rest[alt_id][pos]
        return cost

    def min_completion_length(self, state: State) -> int:
        """Fewest characters that complete a valid call from `state` (0 when complete)."""
        return min((self.stack_cost(s) for s in state), default=0)

    def shortest_completion(self, state: State) -> str:
        """The text of a shortest valid completion from `state` ("" when already complete)."""
        if not state or () in state:
            return ""
        stack = min(state, key=lambda s: (self.stack_cost(s), s))
        parts = []
        for frame in reversed(stack):
            alt_id, pos = divmod(frame, _SCALE)
            for e in self.alts[alt_id].elements[pos:]:
                parts.append(_representative(e) if e[0] == "c" else self._shortest[e[1]])
        return "".join(parts)

    def _string_frame(self, stack: Stack) -> int | None:
        for f in stack:
            alt_id, pos = divmod(f, _SCALE)
            if alt_id in self._string_alts and (pos > 0 or f != stack[-1]):
                return alt_id
        return None

    def in_string(self, state: State) -> bool:
        """Every live path is inside an open JSON string value (after its opening quote)."""
        if not state or () in state:
            return False
        return all(self._string_frame(s) is not None for s in state)

    def string_limit(self, state: State) -> int | None:
        """The schema's maxLength of the open string (None when it has none)."""
        limits: list[int] = []
        for s in state:
            alt = self._string_frame(s)
            limit = None if alt is None else self._string_alts[alt]
            if limit is not None:
                limits.append(limit)
        return min(limits) if limits else None


def _matches(e: Element, code: int) -> bool:
    hit = any(lo <= code <= hi for lo, hi in e[1])
    return hit != e[2]


def _representative(e: Element) -> str:
    if not e[2]:
        return chr(e[1][0][0])
    for ch in "a0 ":
        if _matches(e, ord(ch)):
            return ch
    raise GrammarSyntaxError("no representative character")


@lru_cache(maxsize=16)
def automaton_for(gbnf: str) -> GrammarAutomaton:
    """One automaton per grammar text, built once per process."""
    return GrammarAutomaton(gbnf)


class TokenTexts:
    """The text of each token of one vocabulary (special tokens rendered), computed once per token.

    None for a token that is not whole UTF-8 on its own (never forced). Filled on first use rather
    than for all ids up front, so the first constrained call does not pay for the whole vocabulary.
    """

    def __init__(self, piece: Callable[[int], bytes]) -> None:
        self._piece = piece
        self._text: dict[int, str | None] = {}

    def __getitem__(self, token: int) -> str | None:
        if token not in self._text:
            try:
                self._text[token] = self._piece(token).decode("utf-8")
            except UnicodeDecodeError:
                self._text[token] = None
        return self._text[token]

    def allowed(self, automaton: GrammarAutomaton, state: State, ids: Sequence[int]) -> list[int]:
        """The subset of `ids` whose whole text the grammar accepts from `state`."""
        return [i for i in ids if (t := self[i]) and automaton.accepts(state, t)]
