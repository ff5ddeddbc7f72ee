"""`LlamaCppLLM`: one in-process llama.cpp model behind the `LLM` protocol, and its load-time `LlamaParams`.

Only `engines/inprocess/` imports `llama_cpp`. Reuses the KV prefix across calls, drafts grammar-forced
text and prompt-lookup guesses (verified in one batch), and applies a lazy grammar (GBNF text plus a
trigger string) only after the trigger appears in the output outside a thought; a thought over budget
gets its closing marker written (`decoding.ThoughtWatch`). `complete` loops over the steps of
`generation.Generation` (one call's decode state): sample, emit, watch the thought, switch the lazy grammar,
draft and decode, close.
Knows nothing of tools, prompts or parsing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_local.engines.inprocess.automaton import TokenTexts, automaton_for
from hermes_local.engines.inprocess.decoding import SPECIAL_LITERALS, ForcedMemo, GrammarTracker
from hermes_local.engines.inprocess.draftmodel import DraftModel
from hermes_local.engines.inprocess.generation import Generation
from hermes_local.engines.inprocess.kvcache import PromptCache, model_identity, restore_or_save_prefix
from hermes_local.engines.inprocess.load import batch_invariant, extra_buffers, no_chat_handlers
from hermes_local.engines.inprocess.sampling import quiet_stderr
from hermes_local.engines.threads import ThreadChooser, describe_threads
from hermes_local.errors import ModelLoadError
from hermes_local.llm import (
    DEFAULT_OPTIONS,
    CallOptions,
    Completion,
    TokenCallback,
    Usage,
    check_prompt,
    common_prefix_length,
)

log = logging.getLogger(__name__)


@dataclass
class LlamaParams:
    """Load-time options passed to llama.cpp."""

    n_ctx: int = 4096
    n_gpu_layers: int = -1
    n_threads: int | None = None
    n_batch: int = 512
    seed: int = 0
    flash_attn: bool = False
    main_gpu: int = 0
    tensor_split: list[float] | None = None
    rpc_servers: str | None = None
    vocab_only: bool = False
    prompt_cache: bool = False  # persistent prefix KV cache under $HERMES_LOCAL_HOME/cache/kv (kvcache.py)
    # Flash attention over a q8_0 KV cache, so a token's logits are the same decoded alone or in a batch and
    # drafts verified in one batch give exactly what one-token-at-a-time decoding gives (load.py).
    # Off by default: on the embedded model it costs ~26% prompt and ~9% decode speed (README, Speed).
    batch_invariant: bool = False
    prompt_lookup: bool = True  # prompt-lookup drafting (drafting.py), verified in one batch
    extra_buffers: bool | None = None  # llama.cpp weight repacking / AMX buffers; None: see _extra_buffers


class LlamaCppLLM:
    """One in-process llama.cpp model. Reuses its KV prefix across calls; a lock serializes use."""

    # The KV cache keeps the last prompt and what was generated after it, and `_prefill` cuts it back to the
    # longest common prefix: a call that repeats a reply's first tokens rewinds there (agent/redecode.py).
    rewinds_kv = True

    def __init__(
        self, model_path: str | Path, params: LlamaParams | None = None, *, threads: ThreadChooser | None = None
    ) -> None:
        """`threads`: the `auto` chooser to use when `params.n_threads` is unset (default: a new one)."""
        import llama_cpp  # the only import of llama_cpp in hermes-local

        self._llama_cpp = llama_cpp
        self.params = params or LlamaParams()
        self.model_path = Path(model_path)
        self._lock = threading.RLock()
        kwargs: dict[str, Any] = dict(
            model_path=str(self.model_path),
            n_ctx=self.params.n_ctx,
            n_gpu_layers=self.params.n_gpu_layers,
            n_batch=self.params.n_batch,
            n_ubatch=self.params.n_batch,
            seed=self.params.seed,
            flash_attn=self.params.flash_attn,
            main_gpu=self.params.main_gpu,
            tensor_split=self.params.tensor_split,
            vocab_only=self.params.vocab_only,
            verbose=bool(os.environ.get("HERMES_LOCAL_DEBUG")),
        )
        # n_threads unset = auto: the cores others leave free, re-checked before every call (threads.py)
        self.threads: ThreadChooser | None = None
        if not self.params.n_threads and not self.params.vocab_only:
            self.threads = threads or ThreadChooser()
        n_threads = self.params.n_threads or (self.threads.choose() if self.threads else os.cpu_count() or 1)
        self.n_threads = n_threads
        kwargs["n_threads"] = n_threads
        kwargs["n_threads_batch"] = n_threads
        if self.params.rpc_servers:
            kwargs["rpc_servers"] = self.params.rpc_servers
        kv_type = batch_invariant(kwargs) if self.params.batch_invariant else "f16"
        try:
            with quiet_stderr(), extra_buffers(llama_cpp, self.params.extra_buffers), no_chat_handlers(llama_cpp):
                self._llama = llama_cpp.Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"llama.cpp could not load {self.model_path}: {exc}") from exc
        self.n_ctx = self._llama.n_ctx() if not self.params.vocab_only else self.params.n_ctx
        self.description = self.model_path.name
        # Every token llama.cpp evaluates in this process, also through the raw `Llama` (benchmarks use it).
        self.tokens_evaluated_total = 0
        self._calls = 0
        original_eval = self._llama.eval

        def counting_eval(tokens: Sequence[int]) -> None:
            self.tokens_evaluated_total += len(tokens)
            original_eval(tokens)

        self._llama.eval = counting_eval  # type: ignore[method-assign]
        self._special_ids: dict[str, int | None] = {}
        self._token_texts: TokenTexts | None = None
        self.fast_forward = True  # draft grammar-forced text, verified in one batch (decoding.py)
        self._forced_memo = ForcedMemo()  # the model's own split of forced text, learned as it writes it
        self.closing = True  # closing mode and runaway-string guard on constrained calls
        self.drafting = self.params.prompt_lookup  # prompt-lookup drafting (drafting.py), verified in one batch
        self.draft_counts = {"proposed": 0, "accepted": 0}  # drafted tokens evaluated / kept (benchmarks)
        self.draft_model: DraftModel | None = None  # `--draft-model` (draftmodel.attach_draft)
        self.prompt_cache: PromptCache | None = None
        if self.params.prompt_cache and not self.params.vocab_only:
            self.prompt_cache = PromptCache(
                model_identity(
                    self.model_path,
                    llama_cpp=llama_cpp.__version__,
                    n_ctx=self.n_ctx,
                    n_batch=self.params.n_batch,
                    flash_attn=kwargs["flash_attn"],
                    type_k=kv_type,
                    type_v=kv_type,
                )
            )

    # -- tokenizer -------------------------------------------------------------------------
    def tokenize(self, text: str, *, special: bool) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def special_token_id(self, text: str) -> int | None:
        if text not in self._special_ids:
            ids = self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            plain = self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
            self._special_ids[text] = ids[0] if len(ids) == 1 and plain != ids else None
        return self._special_ids[text]

    def bos_tokens(self) -> list[int]:
        vocab = self._llama._model.vocab
        if self._llama_cpp.llama_vocab_get_add_bos(vocab):
            return [self._llama.token_bos()]
        return []

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of `tokens` with special tokens rendered (so `<tool_call>` survives)."""
        return self._llama.detokenize(list(tokens), special=True).decode("utf-8", errors="replace")

    def _is_end_of_generation(self, token: int) -> bool:
        return bool(self._llama_cpp.llama_vocab_is_eog(self._llama._model.vocab, token))

    @property
    def threads_line(self) -> str:
        """Which thread count is in force and why (doctor, a run's first line, benchmarks)."""
        return self.threads.describe() if self.threads else describe_threads(self.n_threads)

    def _retune_threads(self) -> None:
        """Auto threads: re-check the free cores (cheap) and tell llama.cpp when the count changes."""
        if self.threads is None:
            return
        n = self.threads.choose()
        if n != self.n_threads:
            self._set_threads(n)

    def use_threads(self, n: int) -> None:
        """Fix the thread count at `n` from now on (auto re-checking off), without reloading: `models qualify`
        measures several counts on one loaded model."""
        with self._lock:
            self.threads = None
            self._set_threads(n)

    def _set_threads(self, n: int) -> None:
        self._llama_cpp.llama_set_n_threads(self._llama.ctx, n, n)
        self.n_threads = n

    def reset_cache(self) -> None:
        """Forget the KV cache (used by benchmarks to emulate a naive loop)."""
        with self._lock:
            self._llama.reset()

    # -- completion ------------------------------------------------------------------------
    def _prefill(self, prompt: list[int]) -> int:
        """Evaluate `prompt`, reusing the longest cached prefix; returns tokens actually evaluated."""
        llama = self._llama
        saved = restore_or_save_prefix(self, prompt) if self.prompt_cache is not None else 0
        cached = common_prefix_length(llama._input_ids[: llama.n_tokens].tolist(), prompt)
        cached = min(cached, len(prompt) - 1)  # the last prompt token is re-evaluated for fresh logits
        if cached == 0 or (cached < llama.n_tokens and not llama._ctx.kv_cache_seq_rm(-1, cached, -1)):
            llama.reset()
            cached = 0
        llama.n_tokens = cached
        llama.eval(prompt[cached:])
        return len(prompt) - cached + saved

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        prompt = check_prompt(tokens, self.n_ctx)
        with self._lock:
            self._retune_threads()
            start = time.perf_counter()
            evaluated = self._prefill(prompt)
            prompt_seconds = time.perf_counter() - start
            call = Generation(self, prompt, options, on_token)
            try:
                while call.room > 0:
                    reason = call.closing_reason()
                    if reason is not None:
                        call.close(reason)
                        break
                    token, batch = call.sample()
                    if call.emit(token):
                        break
                    batch = call.watch_thought(batch)
                    if options.lazy:
                        call.switch_grammar()
                    if batch:
                        call.draft_and_decode(batch)
            finally:
                call.sampler.close()
            completion = call.completion()
            completion.usage = Usage(
                prompt_tokens=len(prompt),
                prompt_tokens_evaluated=evaluated,
                completion_tokens=len(completion.tokens),
                seconds=time.perf_counter() - start,
                prompt_seconds=prompt_seconds,
            )
            return completion

    def _tracker(self, grammar: str) -> GrammarTracker | None:
        """Automaton tracking for closing mode and fast-forward; None when both are off."""
        if not (self.closing or self.fast_forward):
            return None
        if self._token_texts is None:
            self._token_texts = TokenTexts(lambda t: self._llama.detokenize([t], special=True))
        return GrammarTracker(
            automaton_for(grammar),
            lambda text: self.tokenize(text, special=text in SPECIAL_LITERALS),
            self._token_texts,
            closing=self.closing,
        )

    def _decode(self, batch: list[int], draft: list[int]) -> int:
        """Evaluate `batch` and then `draft` in one llama_decode, with logits for the last batch token
        and every draft token (the sampler verifies the draft row by row). Returns the logits row of
        the last batch token."""
        llama = self._llama
        if not draft or len(batch) + len(draft) > self.params.n_batch:
            draft.clear()
            llama.eval(batch)
            return -1
        tokens = batch + draft
        n_past = llama.n_tokens
        llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
        b = llama._batch.batch
        b.n_tokens = len(tokens)
        for i, t in enumerate(tokens):
            b.token[i] = t
            b.pos[i] = n_past + i
            b.seq_id[i][0] = 0
            b.n_seq_id[i] = 1
            b.logits[i] = i >= len(batch) - 1
        llama._ctx.decode(llama._batch)
        llama.input_ids[n_past : n_past + len(tokens)] = tokens
        llama.n_tokens += len(tokens)
        self.tokens_evaluated_total += len(tokens)
        return len(batch) - 1

    def _drop_ahead(self, ahead: list[int]) -> list[int]:
        """Forget drafted tokens the sampler did not confirm (their KV cells are removed on the next decode)."""
        if ahead:
            self._llama.n_tokens -= len(ahead)
            self._llama._ctx.kv_cache_seq_rm(-1, self._llama.n_tokens, -1)
        return []
