"""Draft-model speculative decoding (`--draft-model`): a small model of the same vocabulary guesses the next tokens.

`DraftModel.propose(history, n)` brings the draft model's KV cache up to `history` (the prompt and the output
so far; its cached prefix is reused) and greedily decodes up to `n` tokens there. `generation.Generation`
evaluates the guess in one batch behind the chat model's last token and keeps the prefix its own sampler
agrees with, exactly as for prompt-lookup guesses, so the output is what plain decoding produces wherever a
token's logits do not depend on the batch it is decoded in (`batch_invariant = true`; see load.py). The draft
length adapts: doubled after a fully kept draft, cut to what was kept plus one otherwise. `attach_draft`
loads the draft model beside a loaded `LlamaCppLLM` and refuses (one line) a model of another vocabulary.
Proposes only; never samples the chat model's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hermes_local.engines.inprocess.load import batch_invariant, extra_buffers
from hermes_local.engines.inprocess.sampling import quiet_stderr
from hermes_local.errors import ModelLoadError, UserError
from hermes_local.llm import common_prefix_length

PENALTY, PENALTY_LAST = 1.1, 64  # sampling.TokenSampler's repeat penalty
MAX_DRAFT = 16
START_DRAFT = 4
_PROBES = ('<|im_start|>assistant\n<tool_call>\n{"name": "read_file"', "Hello, world! 12345 émigré")


class DraftModel:
    """A second llama.cpp model that proposes tokens (greedy) for the chat model to verify."""

    def __init__(self, path: Path, *, n_ctx: int, n_threads: int, n_gpu_layers: int, exact: bool = False) -> None:
        """`exact`: the chat model's batch-invariant kernels here too (its own drafts then match it exactly)."""
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.path = Path(path)
        kwargs: dict[str, Any] = dict(
            model_path=str(path), n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_gpu_layers=n_gpu_layers,
            n_threads=n_threads, n_threads_batch=n_threads, verbose=False,
        )  # fmt: skip
        if exact:
            batch_invariant(kwargs)
        try:
            with quiet_stderr(), extra_buffers(llama_cpp, None):
                self._llama = llama_cpp.Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"llama.cpp could not load the draft model {path}: {exc}") from exc
        self.n_ctx = self._llama.n_ctx()
        self.draft_len = START_DRAFT
        self.counts = {"proposed": 0, "accepted": 0}  # drafted tokens / those the chat model kept (Generation)

    def tokenize(self, text: str) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    @property
    def n_vocab(self) -> int:
        return int(self._llama.n_vocab())

    def propose(self, history: Sequence[int], n: int, output: Sequence[int] = ()) -> list[int]:
        """Up to `n` (and the adaptive draft length) greedy tokens after `history`; [] when there is no room.

        `output`: the call's tokens so far, for the chat model's repeat penalty (its sampler's, at temperature 0:
        1.1 over the last 64 output tokens), so that a draft model that is the chat model guesses its tokens."""
        llama = self._llama
        n = min(n, self.draft_len, self.n_ctx - len(history) - 1)
        if n <= 0 or not history:
            return []
        cached = common_prefix_length(llama._input_ids[: llama.n_tokens].tolist(), list(history))
        cached = min(cached, len(history) - 1)  # the last token is evaluated again for fresh logits
        if cached == 0 or (cached < llama.n_tokens and not llama._ctx.kv_cache_seq_rm(-1, cached, -1)):
            llama.reset()
            cached = 0
        llama.n_tokens = cached
        llama.eval(list(history[cached:]))
        out: list[int] = []
        vocab, lib, n_vocab = llama._model.vocab, self._llama_cpp, self.n_vocab
        while len(out) < n:
            logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(n_vocab,))
            recent = np.unique(np.asarray([*output, *out][-PENALTY_LAST:], dtype=np.intc))
            if recent.size:
                logits = logits.copy()
                hit = logits[recent]
                logits[recent] = np.where(hit > 0, hit / PENALTY, hit * PENALTY)
            token = int(np.argmax(logits))
            if lib.llama_vocab_is_eog(vocab, token):
                break
            out.append(token)
            if len(out) < n:
                llama.eval([token])
        self.counts["proposed"] += len(out)
        return out

    def record(self, proposed: int, accepted: int) -> None:
        """Adapt the draft length to how much of the last draft was kept."""
        if proposed <= 0:
            return
        if accepted >= proposed:
            self.draft_len = min(MAX_DRAFT, max(self.draft_len, 2 * proposed))
        else:
            self.draft_len = max(1, accepted + 1)


def attach_draft(llm: Any, path: Path) -> DraftModel:
    """Load `path` as `llm`'s draft model (same context, threads and offload); UserError when its vocabulary
    differs from the chat model's (its guesses would be other tokens)."""
    params = llm.params
    draft = DraftModel(path, n_ctx=llm.n_ctx, n_threads=llm.n_threads, n_gpu_layers=params.n_gpu_layers,
                       exact=params.batch_invariant)  # fmt: skip
    target_vocab = int(llm._llama.n_vocab())
    same = draft.n_vocab == target_vocab and all(draft.tokenize(p) == llm.tokenize(p, special=True) for p in _PROBES)
    if not same:
        raise UserError(
            f"draft model {path.name} has another vocabulary than {llm.model_path.name} ({draft.n_vocab} vs "
            f"{target_vocab} tokens); pick a draft model of the same family, or drop --draft-model"
        )
    llm.draft_model = draft
    return draft
