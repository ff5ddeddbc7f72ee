"""Parse the GBNF subset our tool-call grammar uses into rules: name -> alternatives of elements.

Covers literals, character classes, rule references, groups and `| ? * + {m} {m,n}`, the syntax
`calls/grammar.py` emits; repetitions become helper rules. `automaton.py` follows the rules; this module
only parses, and raises `GrammarSyntaxError` for syntax outside the subset, and for a grammar that would
expand past `MAX_RULES` rules (`x{0,50000000}` is 50 million nested rules: refused, never built).
"""

from __future__ import annotations

import re

# An element is ("c", ranges, negated) for a character class or ("r", rule name) for a reference.
Element = tuple
MAX_RULES = 50_000  # rules after expansion; our tool-call grammars need a few hundred
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "/": "/"}


class GrammarSyntaxError(ValueError):
    """The GBNF text uses syntax this automaton does not cover."""


class GbnfParser:
    """GBNF text -> rules (name -> list of alternatives, each a list of elements)."""

    def __init__(self, text: str) -> None:
        self.rules: dict[str, list[list[Element]]] = {}
        self._fresh = 0
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, sep, body = line.partition("::=")
            if not sep:
                raise GrammarSyntaxError(f"not a rule: {line[:60]}")
            self.src, self.i = body, 0
            self.rules[name.strip()] = self._alternatives(name.strip(), top=True)

    def _new_rule(self, base: str, alts: list[list[Element]]) -> Element:
        self._fresh += 1
        if self._fresh > MAX_RULES:
            raise GrammarSyntaxError(f"the grammar expands past {MAX_RULES} rules (a repetition bound too large?)")
        name = f"{base}~{self._fresh}"
        self.rules[name] = alts
        return ("r", name)

    def _skip(self) -> None:
        while self.i < len(self.src) and self.src[self.i] in " \t":
            self.i += 1

    def _alternatives(self, owner: str, top: bool = False) -> list[list[Element]]:
        alts = [self._sequence(owner)]
        self._skip()
        while self.i < len(self.src) and self.src[self.i] == "|":
            self.i += 1
            alts.append(self._sequence(owner))
            self._skip()
        if top and self.i != len(self.src):
            raise GrammarSyntaxError(f"unexpected {self.src[self.i :][:20]!r}")
        return alts

    def _sequence(self, owner: str) -> list[Element]:
        seq: list[Element] = []
        while True:
            self._skip()
            if self.i >= len(self.src) or self.src[self.i] in "|)":
                return seq
            items = self._atom(owner)
            self._skip()
            seq.extend(self._repeat(owner, items))

    def _char(self) -> str:
        c = self.src[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.src[self.i + 1]
        if e == "x":
            self.i += 4
            return chr(int(self.src[self.i - 2 : self.i], 16))
        if e == "u":
            self.i += 6
            return chr(int(self.src[self.i - 4 : self.i], 16))
        self.i += 2
        return _ESCAPES.get(e, e)

    def _atom(self, owner: str) -> list[Element]:
        c = self.src[self.i]
        if c == '"':
            self.i += 1
            out: list[Element] = []
            while self.src[self.i] != '"':
                ch = self._char()
                out.append(("c", ((ord(ch), ord(ch)),), False))
            self.i += 1
            return out
        if c == "[":
            self.i += 1
            negated = self.src[self.i] == "^"
            self.i += negated
            ranges = []
            while self.src[self.i] != "]":
                lo = self._char()
                hi = lo
                if self.src[self.i] == "-" and self.src[self.i + 1] != "]":
                    self.i += 1
                    hi = self._char()
                ranges.append((ord(lo), ord(hi)))
            self.i += 1
            return [("c", tuple(ranges), negated)]
        if c == "(":
            self.i += 1
            alts = self._alternatives(owner)
            self._skip()
            if self.src[self.i] != ")":
                raise GrammarSyntaxError("missing )")
            self.i += 1
            return [self._new_rule(owner, alts)]
        m = re.compile(r"[a-zA-Z0-9_-]+").match(self.src, self.i)
        if not m:
            raise GrammarSyntaxError(f"unexpected {self.src[self.i :][:20]!r}")
        self.i = m.end()
        return [("r", m.group())]

    def _repeat(self, owner: str, items: list[Element]) -> list[Element]:
        if self.i >= len(self.src) or self.src[self.i] not in "?*+{":
            return items
        c = self.src[self.i]
        if c == "{":
            end = self.src.index("}", self.i)
            lo_s, _, hi_s = self.src[self.i + 1 : end].partition(",")
            lo = int(lo_s)
            hi: int | None = lo if "," not in self.src[self.i : end] else (int(hi_s) if hi_s.strip() else None)
            self.i = end + 1
            if max(lo, hi or 0) > MAX_RULES:
                raise GrammarSyntaxError(f"repetition {{{lo_s},{hi_s}}} is over {MAX_RULES}")
        else:
            self.i += 1
            lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[c]
        out = items * lo
        if hi is None:  # R ::= items R | ε
            name = self._new_rule(owner, [])
            self.rules[name[1]] = [[*items, name], []]
            return out + [name]
        tail: list[Element] = []
        for _ in range(hi - lo):  # nested optionals: (items (items ...)?)?
            tail = [self._new_rule(owner, [[*items, *tail], []])]
        return out + tail
