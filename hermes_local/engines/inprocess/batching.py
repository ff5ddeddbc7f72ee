"""Batched concurrent runs: one loaded model serves several `complete()` calls at once (issue 15.4).

`BatchedLLM(owner, parallel=N)` implements the `LLM` protocol on top of a `LlamaCppLLM`. It owns a
second llama.cpp context over the same weights with N sequences (room for N times the owner's n_ctx).
Calls from different threads each get a sequence; a worker thread evaluates new prompts and then
decodes one token of every active sequence in ONE llama_decode per step. A new prompt starts from the
longest prefix any sequence holds, its own previous call's or another sequence's, so the system prompt
and tool schemas of concurrent runs are evaluated once for all of them. How another's prefix is taken:
  - by default the KV cache is unified and the cells are shared (`llama_memory_seq_cp` copies nothing),
    and a step's attention reads them once for every sequence, as for one sequence's batch of tokens;
  - with the owner's batch-invariant kernels each sequence has its own KV stream and the source's
    stream is copied: a sequence's cells then stay in position order, which exactness needs (on a shared
    cache a re-admitted sequence fills freed cells out of order, and attention sums in another order).
`complete_many(prompts)` is the same for a list of prompts.

Per sequence it does sampling, stop strings, the token budget and the grammar (lazy or not); it does
not do fast-forward, closing mode or drafting (those run in `LlamaCppLLM.complete`). It uses the
owner's llama_cpp module and never imports llama_cpp itself.
"""

from __future__ import annotations

import ctypes
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM
from hermes_local.engines.inprocess.sampling import Output, TokenSampler, quiet_stderr
from hermes_local.llm import (
    DEFAULT_OPTIONS,
    CallOptions,
    Completion,
    DelegatingLLM,
    TokenCallback,
    Usage,
    check_prompt,
    common_prefix_length,
)


@dataclass
class _Request:
    """One complete() call and its decode state in the worker."""

    prompt: list[int]
    options: CallOptions
    on_token: TokenCallback | None
    done: threading.Event = field(default_factory=threading.Event)
    result: Completion | None = None
    error: BaseException | None = None
    seq: int = -1
    sampler: Any = None
    out: Any = None
    constrained: bool = False
    budget: int = 0
    start: float = 0.0
    evaluated: int = 0
    prompt_seconds: float = 0.0
    row: int = -1
    finish: str = "length"


class BatchedLLM(DelegatingLLM):
    """Up to `parallel` concurrent completions on one model, decoded together (its tokenizer is the owner's)."""

    concurrent = True  # complete() may be called from several threads at once (service/process.py)
    inner: LlamaCppLLM  # the owner

    def __init__(self, owner: LlamaCppLLM, parallel: int) -> None:
        if parallel < 1:
            raise ValueError("parallel must be >= 1")
        super().__init__(owner)
        self.parallel = parallel
        lib = owner._llama_cpp
        self._lib = lib
        base = owner._llama.context_params
        params = type(base)()
        ctypes.memmove(ctypes.byref(params), ctypes.byref(base), ctypes.sizeof(base))
        params.n_ctx = owner.n_ctx * parallel
        params.n_seq_max = parallel
        self._unified = not owner.params.batch_invariant  # see the module docstring
        params.kv_unified = self._unified
        with quiet_stderr():  # llama.cpp logs the context (and n_ctx_seq > n_ctx_train: one sequence never is)
            self.ctx = lib.llama_init_from_model(owner._llama._model.model, params)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create the batched context")
        self._mem = lib.llama_get_memory(self.ctx)
        self.n_batch = int(params.n_batch)
        self._batch = lib.llama_batch_init(max(self.n_batch, parallel), 0, 1)
        self._cached: list[list[int]] = [[] for _ in range(parallel)]
        self._free = list(range(parallel))
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="hermes-batch", daemon=True)
        self._worker.start()
        self.steps = 0  # llama_decode calls made while generating (for tests and benchmarks)
        self.decode_seconds = 0.0  # time inside llama_decode (the rest of a step is sampling and bookkeeping)

    # -- LLM protocol ----------------------------------------------------------------------
    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        return self._wait(self._submit(tokens, options, on_token))

    def complete_many(
        self,
        prompts: Sequence[Sequence[int]],
        options: CallOptions = DEFAULT_OPTIONS,
        *,
        on_token: TokenCallback | None = None,
    ) -> list[Completion]:
        """Complete every prompt concurrently (same options for all); results in prompt order."""
        requests = [self._submit(p, options, on_token) for p in prompts]
        return [self._wait(r) for r in requests]

    def close(self) -> None:
        if self._worker.is_alive():
            self._queue.put(None)
            self._worker.join()
        if self.ctx:
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self.ctx)
            self.ctx = None

    def _submit(self, tokens: Sequence[int], options: CallOptions, on_token: TokenCallback | None) -> _Request:
        request = _Request(check_prompt(tokens, self.n_ctx), options, on_token)
        self._queue.put(request)
        return request

    @staticmethod
    def _wait(request: _Request) -> Completion:
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    # -- worker ----------------------------------------------------------------------------
    def _run(self) -> None:
        active: list[_Request] = []  # each has a sampled token waiting to be evaluated
        while True:
            while self._free:
                try:
                    request = self._queue.get(block=not active)
                except queue.Empty:
                    break
                if request is None:
                    return
                try:
                    self._admit(request)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                    self._fail(request, exc)
                    continue
                if not self._step_sample(request):
                    active.append(request)
            if not active:
                continue
            try:
                self._decode([(r.seq, [r.out.tokens[-1]], len(self._cached[r.seq])) for r in active])
            except BaseException as exc:  # noqa: BLE001
                for r in active:
                    self._fail(r, exc)
                active = []
                continue
            for i, r in enumerate(active):
                r.row = i
                self._cached[r.seq].append(r.out.tokens[-1])
            active = [r for r in active if not self._step_sample(r)]

    def _admit(self, r: _Request) -> None:
        r.seq = self._free.pop(0)
        r.start = time.perf_counter()
        keep = self._reuse_prefix(r.seq, r.prompt)
        cached = self._cached[r.seq]
        rest = r.prompt[keep:]
        for i in range(0, len(rest), self.n_batch):
            chunk = rest[i : i + self.n_batch]
            self._decode([(r.seq, chunk, len(cached))])
            cached.extend(chunk)
        r.row = -1
        r.evaluated = len(rest)
        r.prompt_seconds = time.perf_counter() - r.start
        r.constrained = r.options.constrained
        r.sampler = self._sampler(r)
        r.out = Output(self.inner, r.options.stop, r.on_token)
        r.budget = min(r.options.max_tokens, self.n_ctx - len(r.prompt))

    def _reuse_prefix(self, seq: int, prompt: list[int]) -> int:
        """Make `seq` hold the longest prefix of `prompt` that is in the KV cache, its own or another
        sequence's: shared cells on the unified cache (they stay while either sequence uses them), a copy
        into its own stream under batch-invariant kernels. The last prompt token is always re-evaluated,
        for fresh logits. Returns how many tokens are in place."""
        limit = len(prompt) - 1
        own = min(common_prefix_length(self._cached[seq], prompt), limit)
        best, source = own, seq
        for other, tokens in enumerate(self._cached):
            if other != seq and len(tokens) > best:
                shared = min(common_prefix_length(tokens, prompt), limit)
                if shared > best:
                    best, source = shared, other
        if source == seq:
            self._lib.llama_memory_seq_rm(self._mem, seq, own, -1)
            del self._cached[seq][own:]
        else:
            if self._unified:
                self._lib.llama_memory_seq_rm(self._mem, seq, -1, -1)
                self._lib.llama_memory_seq_cp(self._mem, source, seq, 0, best)  # shares the cells
            else:
                # across KV streams llama.cpp copies the whole stream (at the next decode); then drop the tail
                self._lib.llama_memory_seq_cp(self._mem, source, seq, -1, -1)
                self._lib.llama_memory_seq_rm(self._mem, seq, best, -1)
            self._cached[seq] = self._cached[source][:best]
        return best

    def _step_sample(self, r: _Request) -> bool:
        """Sample this request's next token; True when it finished (result delivered, sequence freed)."""
        try:
            if len(r.out.tokens) >= r.budget:
                return self._finish(r)
            token = r.sampler.sample(r.row)
            if self.inner._is_end_of_generation(token):
                r.finish = "stop"
                return self._finish(r)
            if r.out.add([token], None):
                r.finish = "stop"
                return self._finish(r)
            if len(r.out.tokens) >= r.budget:
                return self._finish(r)
            if r.options.lazy:
                text = r.out.text
                switch_on = not r.constrained and text.endswith(r.options.grammar_trigger or "")
                switch_off = r.constrained and text.rstrip().endswith("</tool_call>")
                if switch_on or switch_off:
                    r.constrained = switch_on
                    r.sampler.close()
                    r.sampler = self._sampler(r)
            return False
        except BaseException as exc:  # noqa: BLE001
            self._fail(r, exc)
            return True

    def _sampler(self, r: _Request) -> TokenSampler:
        """A sampler for `r` in this context, with its grammar while it is constrained."""
        return TokenSampler(
            self.inner, r.options.temperature, r.options.grammar if r.constrained else None, ctx=self.ctx
        )

    def _decode(self, parts: list[tuple[int, list[int], int]]) -> None:
        """One llama_decode of (seq, tokens, first position) parts; logits for each part's last token."""
        b = self._batch
        n = 0
        for seq, tokens, pos in parts:
            for j, t in enumerate(tokens):
                b.token[n] = t
                b.pos[n] = pos + j
                b.seq_id[n][0] = seq
                b.n_seq_id[n] = 1
                b.logits[n] = j == len(tokens) - 1
                n += 1
        b.n_tokens = n
        start = time.perf_counter()
        rc = self._lib.llama_decode(self.ctx, b)
        self.decode_seconds += time.perf_counter() - start
        if rc != 0:
            raise RuntimeError(f"llama_decode failed ({rc}) in the batched context")
        self.steps += 1
        self.inner.tokens_evaluated_total += n

    def _finish(self, r: _Request) -> bool:
        text = r.out.finish()
        usage = Usage(
            prompt_tokens=len(r.prompt),
            prompt_tokens_evaluated=r.evaluated,
            completion_tokens=len(r.out.tokens),
            seconds=time.perf_counter() - r.start,
            prompt_seconds=r.prompt_seconds,
        )
        r.result = Completion(text=text, tokens=list(r.out.tokens), usage=usage, finish_reason=r.finish)
        self._release(r)
        r.done.set()
        return True

    def _fail(self, r: _Request, exc: BaseException) -> None:
        r.error = exc
        self._release(r)
        r.done.set()

    def _release(self, r: _Request) -> None:
        if r.sampler is not None:
            r.sampler.close()
            r.sampler = None
        if r.seq >= 0 and r.seq not in self._free:
            self._free.append(r.seq)
