"""Speed sections of scripts/bench.py (issue 15): prompt cache, fast-forward, prompt lookup, batching.

Each function returns the dict stored under its key in bench.py's JSON (`prompt_cache`,
`fast_forward`, `prompt_lookup`, `batched`). Figures, not assertions. Run alone with

  python scripts/bench.py --only speed

`--ttft-child` is the fresh process the prompt-cache section starts twice (not for direct use).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hermes_local.calls.grammar import tool_call_grammar  # noqa: E402
from hermes_local.calls.parse import ToolCall  # noqa: E402
from hermes_local.dialects import get_dialect  # noqa: E402
from hermes_local.engines.inprocess.kvcache import fixed_prefix  # noqa: E402
from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams  # noqa: E402
from hermes_local.llm import CallOptions  # noqa: E402
from hermes_local.prompts import Segments, render  # noqa: E402
from hermes_local.runtime import build_registry  # noqa: E402

DIALECT = get_dialect("hermes")  # the prompts are the agent's own: Hermes tool block with every schema

TOOL_TASKS = [
    "What time is it?",
    "Read the file notes.txt.",
    "List the files in the reports folder.",
    "Write 'hello' into greeting.txt.",
    "How many orders are in the orders table?",
    "Run `ls -la` in the workspace.",
    "Remember that I prefer CSV exports.",
    "Note 'call the plumber' in my memo.",
    "Fetch http://127.0.0.1:8000/status.",
    "Create a file todo.md with three items: milk, eggs, bread.",
    "Count the lines of data.csv using the shell.",
    "Look up the latest order id in the database.",
    "What is in config/settings.toml?",
    "Save the text 'meeting at 3pm' to meeting.txt.",
    "Show me the first lines of README.md.",
    "Which tables does the database have?",
    "Append 'buy stamps' to my memo.",
    "What is the date today?",
    "List everything in the docs directory.",
    "Write a haiku about autumn into poem.txt.",
    "Sum the totals of all orders in the database.",
    "Run `df -h` and tell me the free space.",
    "Remember that my manager is called Ines.",
    "Read logs/app.log and find errors.",
    "Download http://127.0.0.1:8000/data.json.",
    "Create notes/ideas.md with the line 'ship it'.",
    "How many customers are in the customers table?",
    "Check the time and note it in my memo.",
    "Count the words in essay.txt with wc.",
    "List the files in the src folder.",
    "Remember that the deadline is Friday.",
    "Write 'id,name' as the header of people.csv.",
    "Read the file todo.md.",
    "Find the most expensive product in the products table.",
    "Print the current directory with pwd.",
    "Save 'call mom' to reminders.txt.",
]
WARMUP_TASKS = [
    "Tell me the current time.",
    "Open notes/plan.txt.",
    "What files are in this folder?",
    "Put 'draft v2' into status.txt.",
    "Show the number of rows in the invoices table.",
    "Execute `uname -a`.",
    "Keep in mind that I work from home on Mondays.",
    "Add 'water the plants' to my memo.",
]
COPY_TEXTS = [
    "Quarterly report\n\nRevenue grew 12% to 4.2M EUR, driven by the Nordic region. Costs were flat at "
    "3.1M EUR. Headcount: 41 (+3). Open risks: supplier delay on part 7731-B, currency exposure in GBP.\n"
    "Next steps: renegotiate the 7731-B contract before 15 March; hedge 60% of GBP receivables.",
    "def parse(line):\n    key, _, value = line.partition('=')\n    return key.strip(), value.strip()\n\n"
    "def load(path):\n    with open(path) as fh:\n        return dict(parse(l) for l in fh if '=' in l)\n",
    "Shopping list for Saturday: 2 kg potatoes, 1 l milk, 6 eggs, butter, rye bread, apples, coffee beans, "
    "dish soap, batteries (AA), birthday card for Ann, candles, and a bottle of red wine.",
    "Meeting notes, 4 June: attendees Ann, Bo, Chen. Decisions: move the release to 20 June; Bo owns the "
    "migration script; Chen reviews the API docs. Action items: Ann books the demo room, Bo sends the plan.",
    "SELECT customer_id, SUM(total) AS revenue FROM orders WHERE created_at >= '2024-01-01' "
    "GROUP BY customer_id ORDER BY revenue DESC LIMIT 10;",
]


def _system(registry: Any) -> Any:
    return render("system.jinja", tools=registry.schemas(), instructions="")


def _prompt(
    llm: LlamaCppLLM, system: Any, registry: Any, task: str, *, after: list | None = None, prefill: str
) -> list[int]:
    """The agent's prompt for `task` in the Hermes dialect (tool schemas included), optional later turns."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": Segments.untrusted(task)}]
    return DIALECT.tokens(messages + (after or []), registry.schemas(), llm, prefill=prefill)


def _tool_prompt(llm: LlamaCppLLM, system: Any, task: str, registry: Any = None) -> list[int]:
    return _prompt(llm, system, registry or build_registry(), task, prefill=DIALECT.required_prefill)


def _gap(llm: LlamaCppLLM, prompt: list[int], plain: list[int], other: list[int]) -> dict[str, Any]:
    """Where two outputs first differ and the logit gap there between the two chosen tokens, after the
    sampler's repeat penalty (1.1 over the last 64 output tokens). The logits are recomputed in one batch,
    so without batch-invariant kernels they are not exactly the ones the one-token decode saw."""
    import numpy as np

    k = next(i for i, (a, b) in enumerate(zip([*plain, -1], [*other, -2], strict=False)) if a != b)
    if k >= min(len(plain), len(other)):
        return {"at": k, "gap": None}  # one output is a prefix of the other
    llm._llama.n_tokens = min(llm._llama.n_tokens, fixed_prefix(llm, prompt))
    llm._prefill(prompt + plain[:k])
    n_vocab = llm._llama.n_vocab()
    logits = np.ctypeslib.as_array(llm._llama_cpp.llama_get_logits_ith(llm._llama.ctx, -1), shape=(n_vocab,))
    recent = set(plain[:k][-64:])

    def penalized(t: int) -> float:
        x = float(logits[t])
        return (x / 1.1 if x > 0 else x * 1.1) if t in recent else x

    return {"at": k, "gap": penalized(plain[k]) - penalized(other[k])}


def _compare(
    llm: LlamaCppLLM, prompts: list[list[int]], grammar: str | None, flag: str, max_tokens: int
) -> dict[str, Any]:
    """Decode every prompt with `flag` off, then on (temperature 0); tokens/s over decode time and identity.
    Each difference is reported with the logit gap at its first divergence (a near-tie, or a bug)."""
    runs: dict[bool, list[Any]] = {False: [], True: []}
    drafts = {on: {"proposed": 0, "accepted": 0} for on in (False, True)}
    default = getattr(llm, flag)
    for tokens in prompts:
        for on in (False, True):
            setattr(llm, flag, on)
            # Same prefill for both: keep only the system prefix in the KV, so each run evaluates the rest
            # in one batch of the same shape (llama.cpp logits differ in the last bits between batch shapes,
            # which flips near-ties and would be counted against the feature).
            llm._llama.n_tokens = min(llm._llama.n_tokens, fixed_prefix(llm, tokens))
            before = dict(llm.draft_counts)
            try:
                runs[on].append(
                    llm.complete(tokens, CallOptions(max_tokens=max_tokens, temperature=0.0, grammar=grammar))
                )
                for k in drafts[on]:
                    drafts[on][k] += llm.draft_counts[k] - before[k]
            finally:
                setattr(llm, flag, default)

    def tps(outs: list[Any]) -> float:
        n = sum(o.usage.completion_tokens for o in outs)
        s = sum(o.usage.seconds - o.usage.prompt_seconds for o in outs)
        return n / s if s else 0.0

    pairs = list(zip(runs[False], runs[True], strict=True))
    diffs = [
        {"off": a.text, "on": b.text, **_gap(llm, p, a.tokens, b.tokens)}
        for p, (a, b) in zip(prompts, pairs, strict=True)
        if a.tokens != b.tokens
    ]
    on_tps, off_tps = tps(runs[True]), tps(runs[False])
    return {
        "tps": on_tps,
        "plain_tps": off_tps,
        "ratio": on_tps / off_tps if off_tps else 0.0,
        "identical_share": 1 - len(diffs) / len(pairs),
        "compared": len(pairs),
        "output_tokens": sum(o.usage.completion_tokens for o in runs[True]),
        "drafted_tokens": drafts[True]["proposed"] - drafts[False]["proposed"],
        "accepted_draft_tokens": drafts[True]["accepted"] - drafts[False]["accepted"],
        "differences": diffs,
    }


def fast_forward(llm: LlamaCppLLM) -> dict[str, Any]:
    """Fast-forward alone (prompt lookup off in both arms), on the tool-call steps of TOOL_TASKS."""
    registry = build_registry()
    grammar = tool_call_grammar(list(registry))
    system = _system(registry)
    drafting, llm.drafting = llm.drafting, False
    try:
        # Warm-up on other tasks first: fast-forward drafts the model's own split of forced text once it has
        # seen the model write it (decoding.ForcedMemo), as in any process that has made a few calls.
        for task in WARMUP_TASKS:
            llm.complete(
                _tool_prompt(llm, system, task, registry), CallOptions(max_tokens=96, temperature=0.0, grammar=grammar)
            )
        tasks = TOOL_TASKS[: int(os.environ.get("BENCH_FF_TASKS", str(len(TOOL_TASKS))))]
        prompts = [_tool_prompt(llm, system, t, registry) for t in tasks]
        r = _compare(llm, prompts, grammar, "fast_forward", 96)
    finally:
        llm.drafting = drafting
    r["tool_step_tps"] = r.pop("tps")
    return r


def prompt_lookup(llm: LlamaCppLLM) -> dict[str, Any]:
    """Copy-heavy: the model read a file and writes its content to another file. The write_file call is
    begun in the prompt up to the first words of its `content` value (the embedded 135M model would
    otherwise re-read the file or write something else), and the model writes the rest unconstrained:
    the copy phase of a real write step. How much it copies verbatim is the model's doing; the
    accepted_draft_tokens / output_tokens share shows it."""
    registry = build_registry()
    system = _system(registry)
    prompts = []
    for i, text in enumerate(COPY_TEXTS[: int(os.environ.get("BENCH_COPY_TEXTS", str(len(COPY_TEXTS))))]):
        read = ToolCall("read_file", {"path": f"doc{i}.txt"})
        result = json.dumps({"ok": True, "data": text, "summary": f"read doc{i}.txt"})
        after = [
            {"role": "assistant", "content": DIALECT.assistant_content(1, "", [read])},
            {"role": "tool", "content": DIALECT.tool_results(1, [{"name": "read_file", "content": result}])},
        ]
        begun = json.dumps({"name": "write_file", "arguments": {"path": f"copy{i}.txt", "content": text}})
        start = DIALECT.required_prefill + begun[: begun.index('"content": "') + len('"content": "') + 39]
        task = f"Copy doc{i}.txt to copy{i}.txt (read it, then write the same content)."
        prompts.append(_prompt(llm, system, registry, task, after=after, prefill=start))
    r = _compare(llm, prompts, None, "drafting", 200)
    # The ceiling the decode curve allows at the measured acceptance (drafting.best_draft, DRAFT_COST per
    # drafted token): what drafting could give if every draft had the best length for that acceptance.
    from hermes_local.engines.inprocess.drafting import DRAFT_COST, best_draft

    acceptance = r["accepted_draft_tokens"] / r["drafted_tokens"] if r["drafted_tokens"] else 0.0
    r["acceptance"] = acceptance
    r["ceiling_draft_len"], r["ceiling_at_acceptance"] = best_draft(acceptance, DRAFT_COST)
    # where else it runs by default: tool-call steps (fast-forward on in both arms), which copy paths and names
    grammar = tool_call_grammar(list(registry))
    tasks = TOOL_TASKS[: int(os.environ.get("BENCH_LOOKUP_TOOL_TASKS", "12"))]
    tool = _compare(llm, [_tool_prompt(llm, system, t, registry) for t in tasks], grammar, "drafting", 96)
    r["tool_steps"] = {k: tool[k] for k in ("tps", "plain_tps", "ratio", "identical_share", "compared")}
    return r


def prompt_cache(model: Path, n_ctx: int, threads: int, n_gpu_layers: int = 0) -> dict[str, Any]:
    """Two fresh processes with one new HERMES_LOCAL_HOME: the first writes the cache, the second reads it
    (both load with the bench's `n_gpu_layers`)."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HERMES_LOCAL_HOME": home}
        cmd = [sys.executable, __file__, "--ttft-child", str(model), str(n_ctx), str(threads), str(n_gpu_layers)]
        runs = [
            json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout) for _ in "ab"
        ]
    cold, warm = runs
    return {
        "cold_ttft_s": cold["ttft_s"],
        "warm_ttft_s": warm["ttft_s"],
        "cold_first_call_evaluated": cold["evaluated"],
        "warm_first_call_evaluated": warm["evaluated"],
        "prompt_tokens": warm["prompt_tokens"],
        "ratio": warm["ttft_s"] / cold["ttft_s"] if cold["ttft_s"] else 0.0,
    }


def _ttft_child(model: str, n_ctx: int, threads: int, n_gpu_layers: int) -> None:
    params = LlamaParams(n_ctx=n_ctx, n_threads=threads, seed=1, prompt_cache=True, n_gpu_layers=n_gpu_layers)
    llm = LlamaCppLLM(model, params)
    registry = build_registry()
    tokens = _tool_prompt(llm, _system(registry), TOOL_TASKS[0], registry)
    first: list[float] = []
    t0 = time.perf_counter()
    out = llm.complete(
        tokens,
        CallOptions(max_tokens=8, temperature=0.0, grammar=tool_call_grammar(list(registry))),
        on_token=lambda piece: first.append(time.perf_counter()) if not first else None,
    )
    print(
        json.dumps(
            {
                "ttft_s": (first[0] if first else time.perf_counter()) - t0,
                "evaluated": out.usage.prompt_tokens_evaluated,
                "prompt_tokens": out.usage.prompt_tokens,
            }
        )
    )


def batched(llm: LlamaCppLLM) -> dict[str, Any]:
    """Aggregate output tok/s of a queue of tool-call runs served 1, 2 and 4 at a time by one loaded model
    (issue 15.4), as `eval --jobs N` and `serve --parallel N` serve them: a run starts when a sequence
    frees, its prompt shares the fixed prefix with the others', and every step is one llama_decode.
    The three are measured in turn, twice (BENCH_BATCH_ROUNDS), so a slower minute of a shared machine
    does not land on one of them only."""
    from hermes_local.engines.inprocess.batching import BatchedLLM

    registry = build_registry()
    grammar = tool_call_grammar(list(registry))
    system = _system(registry)
    tasks = TOOL_TASKS[: int(os.environ.get("BENCH_BATCH_TASKS", "12"))]
    prompts = [_tool_prompt(llm, system, t, registry) for t in tasks]
    rounds = int(os.environ.get("BENCH_BATCH_ROUNDS", "2"))
    totals = {
        n: {"tokens": 0, "prompt_tokens_evaluated": 0, "steps": 0, "decode_s": 0.0, "wall_s": 0.0} for n in (1, 2, 4)
    }
    for _ in range(rounds):
        for n, total in totals.items():
            batched = BatchedLLM(llm, n)
            try:
                prefix_only = CallOptions(max_tokens=1, temperature=0.0, grammar=grammar)
                batched.complete_many(prompts[:1], prefix_only)  # the fixed prefix
                steps, decode_s = batched.steps, batched.decode_seconds
                t0 = time.perf_counter()
                results = batched.complete_many(prompts, CallOptions(max_tokens=64, temperature=0.0, grammar=grammar))
                total["wall_s"] += time.perf_counter() - t0
            finally:
                batched.close()
            total["tokens"] += sum(r.usage.completion_tokens for r in results)
            total["prompt_tokens_evaluated"] += sum(r.usage.prompt_tokens_evaluated for r in results)
            total["steps"] += batched.steps - steps
            total["decode_s"] += batched.decode_seconds - decode_s
    out: dict[str, Any] = {"runs": len(prompts), "rounds": rounds}
    for n, total in totals.items():
        out[f"n{n}_tps"] = total["tokens"] / total["wall_s"]
        # per phase: where the time goes (llama_decode, prompt suffixes included, vs sampling and bookkeeping)
        out[f"n{n}_phases"] = {
            "tokens": total["tokens"],
            "prompt_tokens_evaluated": total["prompt_tokens_evaluated"],
            "steps": total["steps"],
            "decode_s": round(total["decode_s"], 3),
            "other_s": round(total["wall_s"] - total["decode_s"], 3),
        }
    out["speedup_n4"] = out["n4_tps"] / out["n1_tps"] if out["n1_tps"] else 0.0
    return out


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "--ttft-child":
    _ttft_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
