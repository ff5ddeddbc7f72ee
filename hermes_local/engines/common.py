"""What the HTTP engines share above the transport: token caches, the special-token test, the model check.

`RemoteTokenizer` keeps the `LLM` protocol's tokenizer contract for a remote engine: `tokenize(text,
special=False)` never yields a special id (the injection rule), `special_token_id` answers from two
tokenizations, and results are cached (the agent re-tokenizes the same system prompt every step).
`model_matches` decides whether a server serves the model the user asked for. Does not do HTTP itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import PurePath

TokenizeFn = Callable[[str, bool], list[int]]


class RemoteTokenizer:
    """Cached tokenization through an engine's own tokenizer endpoint."""

    def __init__(
        self, tokenize: TokenizeFn, *, size: int = 512, special_probe: Callable[[str], int | None] | None = None
    ) -> None:
        self._tokenize = tokenize
        self._probe = special_probe
        self._size = size
        self._cache: OrderedDict[tuple[str, bool], list[int]] = OrderedDict()
        self._special: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        if not text:
            return []
        key = (text, special)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return list(self._cache[key])
        ids = self._tokenize(text, special)
        with self._lock:
            self._cache[key] = list(ids)
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return list(ids)

    def special_token_id(self, text: str) -> int | None:
        if text not in self._special and self._probe is not None:
            self._special[text] = self._probe(text)
        if text not in self._special:
            ids = self.tokenize(text, special=True)
            plain = self.tokenize(text, special=False)
            self._special[text] = ids[0] if len(ids) == 1 and plain != ids else None
        return self._special[text]

    def known_special_ids(self) -> set[int]:
        return {i for i in self._special.values() if i is not None}


def model_matches(expected: Iterable[str], served: Iterable[str]) -> bool:
    """True when nothing is expected, or one `expected` name names a served model (path, file or alias)."""
    want: set[str] = set()
    for name in expected:
        want |= {name, PurePath(name).name, PurePath(name).stem}
    if not want:
        return True
    for name in served:
        if not name:
            continue
        if name in want or PurePath(name).name in want or PurePath(name).stem in want:
            return True
    return False
