"""Token sampling for the in-process engine: `TokenSampler` (llama.cpp's sampler API through the owner's
`llama_cpp` module) and `Output` (detokenized text, stop strings, the token callback).

Split from `llamacpp.py` so that file keeps the decode loop. This module never imports
`llama_cpp` itself: it uses the library object and context the owning `LlamaCppLLM` hands it. It does not
decide when to constrain, fast-forward or close (see `decoding.py`).
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import io
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hermes_local.engines.inprocess.decoding import GrammarTracker
    from hermes_local.llm import TokenCallback


class SamplerOwner(Protocol):
    """What sampling needs of the engine that owns the model (`LlamaCppLLM`): its `Llama`, the `llama_cpp`
    module, the seed, a per-call counter and its tokenizer. Typed here so sampling never imports its owner."""

    _calls: int

    @property
    def _llama(self) -> Any: ...

    @property
    def _llama_cpp(self) -> Any: ...

    @property
    def params(self) -> Any: ...

    def tokenize(self, text: str, *, special: bool) -> list[int]: ...


@contextlib.contextmanager
def quiet_stderr():
    """llama.cpp logs to fd 2 from C (and through Python's sys.stderr); hide it unless HERMES_LOCAL_DEBUG is set."""
    if os.environ.get("HERMES_LOCAL_DEBUG"):
        yield
        return
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with contextlib.redirect_stderr(io.StringIO()):  # llama-cpp-python's log callback prints to sys.stderr
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class Output:
    """The tokens and text of one completion, with stop strings and the token callback."""

    def __init__(self, owner: SamplerOwner, stop: Sequence[str], on_token: TokenCallback | None) -> None:
        self._owner, self._stop, self._on_token = owner, stop, on_token
        self.tokens: list[int] = []
        self.text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, batch: Sequence[int], tracker: GrammarTracker | None) -> bool:
        """Append tokens; True when a stop string appeared (the text is cut before it)."""
        for token in batch:
            self.tokens.append(token)
            piece = self._decoder.decode(self._owner._llama.detokenize([token], special=True))
            self.text += piece
            hit = _first_stop(self.text, self._stop)
            if hit is not None:
                self.text = self.text[:hit]
                return True
            if tracker is not None:
                tracker.feed(token, piece)
            if piece and self._on_token:
                self._on_token(piece)
        return False

    def whole_chars(self) -> bool:
        """No partial UTF-8 character is pending (the grammar state is exact)."""
        return not self._decoder.getstate()[0]

    def finish(self) -> str:
        self.text += self._decoder.decode(b"", final=True)
        return self.text


class TokenSampler:
    """top-k/top-p/min-p/temperature sampling with a repeat penalty, and an optional GBNF grammar.

    The grammar is checked lazily, as llama.cpp's own common sampler does: sample without it, and
    only when the grammar rejects that token apply it to the whole vocabulary and sample again.
    Most constrained tokens are accepted on the first try, so the grammar costs little.
    """

    def __init__(self, owner: SamplerOwner, temperature: float, grammar: str | None, ctx: Any = None) -> None:
        import numpy as np

        lib = owner._llama_cpp
        self._lib, self._np = lib, np
        self._owner = owner
        self._ctx = ctx or owner._llama.ctx  # batching.py samples from its own multi-sequence context
        self._n_vocab = owner._llama.n_vocab()
        self.chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        stages = [lib.llama_sampler_init_penalties(self._n_vocab, 64, 1.1, 0.0, 0.0)]
        if temperature <= 0:
            stages.append(lib.llama_sampler_init_greedy())
        else:
            stages += [
                lib.llama_sampler_init_top_k(40),
                lib.llama_sampler_init_top_p(0.95, 1),
                lib.llama_sampler_init_min_p(0.05, 1),
                lib.llama_sampler_init_temp(temperature),
                lib.llama_sampler_init_dist(owner.params.seed + owner._calls),
            ]
        for stage in stages:
            lib.llama_sampler_chain_add(self.chain, stage)
        owner._calls += 1
        self.grammar = None
        if grammar is not None:
            with quiet_stderr():
                self.grammar = lib.llama_sampler_init_grammar(
                    owner._llama._model.vocab, grammar.encode("utf-8"), b"root"
                )
            if not self.grammar:
                lib.llama_sampler_free(self.chain)
                raise ValueError("llama.cpp rejected the tool-call grammar")
        dtype = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
        self._full = np.zeros(self._n_vocab, dtype=dtype)
        self._ids = np.arange(self._n_vocab, dtype=np.intc)
        self._one = np.zeros(1, dtype=dtype)
        self._top = np.zeros(64, dtype=dtype)

    def _apply(self, sampler: Any, data: Any) -> Any:
        arr = self._lib.llama_token_data_array(
            data=data.ctypes.data_as(self._lib.llama_token_data_p), size=len(data), selected=-1, sorted=False
        )
        self._lib.llama_sampler_apply(sampler, ctypes.byref(arr))
        return arr

    def _pick(self, grammar_first: bool, row: int) -> int:
        np = self._np
        logits = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx, row), shape=(self._n_vocab,))
        if grammar_first:
            # Constrain the 64 most likely tokens first (top-k keeps 40 anyway); the whole vocabulary
            # only when the grammar allows none of them.
            top = np.argpartition(logits, -64)[-64:]
            self._top["id"], self._top["logit"], self._top["p"] = top, logits[top], 0.0
            self._apply(self.grammar, self._top)
            if np.isfinite(self._top["logit"]).any():
                arr = self._apply(self.chain, self._top)
                return int(arr.data[arr.selected].id)
        self._full["id"] = self._ids
        self._full["logit"] = logits
        self._full["p"] = 0.0
        if grammar_first:
            self._apply(self.grammar, self._full)
        arr = self._apply(self.chain, self._full)
        return int(arr.data[arr.selected].id)

    def force(self, tokens: Sequence[int]) -> list[int]:
        """Accept `tokens` without sampling, as far as llama.cpp's grammar allows them; returns those taken."""
        taken: list[int] = []
        for token in tokens:
            if self.grammar is not None:
                self._one["id"], self._one["logit"], self._one["p"] = token, 1.0, 0.0
                self._apply(self.grammar, self._one)
                if self._one["logit"][0] == float("-inf"):
                    break
                self._lib.llama_sampler_accept(self.grammar, token)
            self._lib.llama_sampler_accept(self.chain, token)
            taken.append(token)
        return taken

    def sample(self, row: int = -1) -> int:
        """Sample from the logits of batch position `row` of the last decode (-1: its last token)."""
        token = self._pick(grammar_first=False, row=row)
        if self.grammar is not None:
            self._one["id"], self._one["logit"], self._one["p"] = token, 1.0, 0.0
            self._apply(self.grammar, self._one)
            if self._one["logit"][0] == float("-inf"):
                token = self._pick(grammar_first=True, row=row)
            self._lib.llama_sampler_accept(self.grammar, token)
        self._lib.llama_sampler_accept(self.chain, token)
        return token

    def feed(self, text: str) -> bool:
        """Advance the grammar over `text` (already generated); False if the grammar rejects it."""
        for token in self._owner.tokenize(text, special=False) if self.grammar is not None else []:
            self._one["id"], self._one["logit"], self._one["p"] = token, 1.0, 0.0
            self._apply(self.grammar, self._one)
            if self._one["logit"][0] == float("-inf"):
                return False
            self._lib.llama_sampler_accept(self.grammar, token)
        return True

    def close(self) -> None:
        if self.chain:
            self._lib.llama_sampler_free(self.chain)
            self.chain = None
        if self.grammar:
            self._lib.llama_sampler_free(self.grammar)
            self.grammar = None


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    positions = [text.find(s) for s in stops if s and s in text]
    return min(positions) if positions else None
