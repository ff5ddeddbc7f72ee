"""The GPU check's measurements that bench.py does not make: the 8-step task on the GPU against the CPU, and the
draft model (`--draft-model`): identical outputs with and without batch-invariant kernels, acceptance, speed.

  python scripts/gpu_task.py --model M.gguf --n-gpu-layers -1 --steps 8         # task: GPU vs CPU
  python scripts/gpu_task.py --model M.gguf --draft D.gguf --only draft          # draft: identity and speed

Prints one JSON object (the keys scripts/gpu_check.sh puts in its table). Figures, not assertions: the task's
walls depend on the machine; the identity counts do not. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from bench_task import hermes_run  # noqa: E402  (scripts/, on sys.path)

from hermes_local.engines.inprocess.draftmodel import attach_draft  # noqa: E402
from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams  # noqa: E402
from hermes_local.llm import CallOptions  # noqa: E402
from hermes_local.models.registry import resolve_model  # noqa: E402
from hermes_local.prompts import chat_tokens  # noqa: E402

PROMPTS = [
    "Write two sentences about the sea.",
    "List three fruits, one per line.",
    "What is the capital of France? Answer briefly.",
    "Explain in one sentence what a file system is.",
]


def task(path: Path, layers: int, steps: int, n_ctx: int) -> dict[str, Any]:
    llm = LlamaCppLLM(path, LlamaParams(n_ctx=n_ctx, n_gpu_layers=layers, seed=1))
    hermes_run(llm, 1, n_ctx)  # warm-up: CUDA and cuBLAS set-up are not the task's
    llm.reset_cache()
    r = hermes_run(llm, steps, n_ctx)
    keys = ("wall_s", "evaluated_over_new", "tool_calls_valid", "tool_calls", "decode_tps")
    return {k: r[k] for k in keys if k in r}


def draft(path: Path, draft_path: Path, layers: int, max_tokens: int) -> dict[str, Any]:
    """For batch-invariant kernels on and off: how many of PROMPTS give the same tokens with the draft model
    as without (temperature 0; prompt lookup and fast-forward off, so every draft is the draft model's), the
    share of drafted tokens kept, and decode tok/s with / without."""
    out: dict[str, Any] = {}
    for exact in (True, False):
        llm = LlamaCppLLM(path, LlamaParams(n_ctx=2048, n_gpu_layers=layers, seed=1, batch_invariant=exact))
        llm.drafting = llm.fast_forward = False
        runs: dict[str, tuple[list[list[int]], float]] = {}
        for arm in ("plain", "draft"):
            if arm == "draft":
                model = attach_draft(llm, draft_path)
            tokens, seconds, n = [], 0.0, 0
            for text in PROMPTS:
                llm.reset_cache()
                prompt = chat_tokens([{"role": "user", "content": text}], llm)
                start = time.perf_counter()
                got = llm.complete(prompt, CallOptions(max_tokens=max_tokens, temperature=0.0))
                seconds += time.perf_counter() - start
                tokens.append(got.tokens)
                n += len(got.tokens)
            runs[arm] = (tokens, n / seconds)
        same = sum(a == b for a, b in zip(runs["plain"][0], runs["draft"][0], strict=True))
        name = "batch_invariant" if exact else "default_kernels"
        out[name] = {
            "identical": f"{same}/{len(PROMPTS)}",
            "kept": model.counts["accepted"] / max(1, model.counts["proposed"]),
            "tps_plain": runs["plain"][1],
            "tps_draft": runs["draft"][1],
            "speedup": runs["draft"][1] / runs["plain"][1],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--draft", default=None, help="draft model (default: the model itself)")
    ap.add_argument("--n-gpu-layers", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--only", choices=("all", "task", "draft"), default="all")
    args = ap.parse_args()
    path = resolve_model(args.model)
    report: dict[str, Any] = {"model": path.name, "n_gpu_layers": args.n_gpu_layers}
    if args.only in ("all", "task"):
        report["task_gpu"] = task(path, args.n_gpu_layers, args.steps, args.n_ctx)
        report["task_cpu"] = task(path, 0, args.steps, args.n_ctx)
        report["task_cpu_over_gpu"] = report["task_cpu"]["wall_s"] / report["task_gpu"]["wall_s"]
    if args.only in ("all", "draft"):
        report["draft"] = draft(
            path, resolve_model(args.draft) if args.draft else path, args.n_gpu_layers, args.max_tokens
        )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
