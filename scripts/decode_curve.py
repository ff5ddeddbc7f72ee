"""How one llama_decode's cost grows with the tokens in it, on this machine and model.

Prints the median time of one decode of k = 1, 2, 4, 8, 16 tokens of one sequence after a 1,600-token
prefix (logits for every token, as verifying a draft needs), and of one step of 1, 2, 4 sequences that
share that prefix (as `batching.py` decodes concurrent runs). These numbers set the ceilings of the
speed-ups in `bench.py --only speed`: a draft of d tokens pays only as far as cost(d+1) < (d+1) x cost(1),
and n runs decoded together only as far as a step of n costs less than n steps of one.

  python scripts/decode_curve.py [--model NAME_OR_PATH] [--threads N] [--reps N]

Figures, not assertions. Nothing here is used by hermes-local itself.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hermes_local.engines.inprocess.batching import BatchedLLM  # noqa: E402
from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams  # noqa: E402
from hermes_local.llm import CallOptions  # noqa: E402
from hermes_local.models.registry import resolve_model  # noqa: E402

PREFIX_TOKENS = 1600


def one_sequence(llm: LlamaCppLLM, prefix: list[int], reps: int) -> dict[int, float]:
    """k -> median seconds of one decode of k tokens (every one with logits) after `prefix`."""
    llama = llm._llama
    llama.reset()
    llama.eval(prefix)
    base = llama.n_tokens
    token = prefix[-1]
    times: dict[int, list[float]] = {k: [] for k in (1, 2, 4, 8, 16)}
    for _ in range(reps):
        for k, spent in times.items():  # interleaved, so a slower minute is shared by every k
            llama.n_tokens = base
            start = time.perf_counter()
            llm._decode([token], [token] * (k - 1))
            spent.append(time.perf_counter() - start)
    llama.n_tokens = base
    return {k: statistics.median(v) for k, v in times.items()}


def sequences(llm: LlamaCppLLM, prefix: list[int], reps: int) -> dict[int, float]:
    """n -> median seconds of one step decoding one token of each of n sequences sharing `prefix`."""
    batched = BatchedLLM(llm, 4)
    try:
        batched.complete_many([prefix], CallOptions(max_tokens=1, temperature=0.0))  # sequence 0 evaluates the prefix
        for seq in range(1, 4):
            batched._reuse_prefix(seq, prefix)  # the others share its cells (the worker is idle now)
        held = [len(batched._cached[seq]) for seq in range(4)]
        times: dict[int, list[float]] = {n: [] for n in (1, 2, 4)}
        for _ in range(reps):
            for n, spent in times.items():
                for seq in range(4):
                    batched._lib.llama_memory_seq_rm(batched._mem, seq, held[seq], -1)
                start = time.perf_counter()
                batched._decode([(seq, [prefix[-1]], held[seq]) for seq in range(n)])
                spent.append(time.perf_counter() - start)
        return {n: statistics.median(v) for n, v in times.items()}
    finally:
        batched.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="registry name or .gguf path (default: embedded SmolLM2)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--batch-invariant", action="store_true", help="flash attention + q8_0 KV")
    args = ap.parse_args()
    path = resolve_model(args.model)
    params = LlamaParams(n_ctx=4096, n_threads=args.threads, seed=1, batch_invariant=args.batch_invariant)
    llm = LlamaCppLLM(path, params)
    text = "The quarterly report lists revenue, costs, headcount and open risks for each region. " * 120
    prefix = llm.tokenize(text, special=False)[:PREFIX_TOKENS]
    print(f"{path.name}, {llm._llama.n_threads} threads, {len(prefix)}-token prefix, median of {args.reps}")
    report(one_sequence(llm, prefix, args.reps), "one sequence, {} tokens", "a fully accepted draft")
    report(sequences(llm, prefix, args.reps), "{} sequences, one token each", "full occupancy")


def report(costs: dict[int, float], row: str, best_case: str) -> None:
    """One line per size: its cost against size 1, and the speed-up that size allows at best."""
    for size, seconds in costs.items():
        ratio = seconds / costs[1]
        print(
            f"  {row.format(size):<30} {seconds * 1000:6.1f} ms = {ratio:4.2f} x one "
            f"(best speed-up, {best_case}: {size / ratio:.2f}x)"
        )


if __name__ == "__main__":
    main()
