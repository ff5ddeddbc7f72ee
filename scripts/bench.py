"""Benchmark hermes-local against the ceiling and the peers, on one GGUF, in one process.

Measures, with the same model, threads and n_ctx:
  1. the ceiling: raw llama.cpp prompt (512 tokens) and then decode (128 tokens after them) speed
     through llama-cpp-python's low-level API (llama_decode + a greedy sampler);
  2. hermes-local on a fixed multi-step task (--tool-choice required, N steps): wall time, model
     time, agent overhead, decode speed as a share of the ceiling, evaluated/new prompt tokens;
  3. the same task through llama-cpp-python's `chatml-function-calling` handler driven by a plain
     loop, and through hermes-local with the KV cache reset before every step (a naive loop);
  4. parser throughput, and grammar-constrained vs unconstrained decode speed;
  5. peak RSS, and RSS growth over a 200-step scripted soak;
  6. issue 15 (scripts/bench_speed.py): `prompt_cache` (cold vs warm TTFT in two fresh processes),
     `fast_forward` and `prompt_lookup` (tok/s on vs off, share of identical outputs at temperature 0),
     `batched` (aggregate tok/s with 1, 2, 4 concurrent runs).
  6b. `--only busy` (scripts/bench_busy.py): the task idle and with one competing CPU-bound process,
     for every core vs auto threads, hermes-local and the chat-handler peer.
  7. when scripts/build_llama_cpp_tools.sh has built llama-server: the llama-server peer (OpenAI-style
     tool loop, --jinja with the Hermes tool_use template) and hermes-local with the llama-server engine,
     on 8- and 20-step tasks (scripts/bench_llama_server.py).
Prints a table and writes JSON (--json PATH). Figures, not assertions: nothing here fails on speed.

  python scripts/bench.py                     # embedded SmolLM2, 8 steps
  python scripts/bench.py --model PATH.gguf --steps 8 --n-ctx 4096 --threads 2
  python scripts/bench.py --only speed        # just the issue-15 sections
  python scripts/bench.py --only busy         # idle vs busy walls, fixed vs auto threads
hermes-local's `wall_s` runs from the run's start event to its end event: long-term memory recall
before and closing (memory writes) after are outside it (`outside_s`; `total_s` has everything).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from bench_task import TASK, hermes_run, run_openai_calls, task_registry  # noqa: E402  (scripts/, on sys.path)

from hermes_local.calls.grammar import tool_call_grammar  # noqa: E402
from hermes_local.calls.parse import parse_tool_calls  # noqa: E402
from hermes_local.config import load_settings  # noqa: E402
from hermes_local.dialects.hermes import HermesDialect  # noqa: E402
from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams  # noqa: E402
from hermes_local.engines.replay import ReplayLLM  # noqa: E402
from hermes_local.events import StepStart  # noqa: E402
from hermes_local.llm import CallOptions  # noqa: E402
from hermes_local.models.registry import resolve_model  # noqa: E402
from hermes_local.prompts import render  # noqa: E402
from hermes_local.testing import build_agent  # noqa: E402
from hermes_local.tools import Approver, Executor, ToolContext  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- 1. ceiling -------------------------------------------------------------------------------
def ceiling(llm: LlamaCppLLM, depth: int = 512) -> dict[str, float]:
    import llama_cpp

    raw = llm._llama  # the benchmark reaches under the boundary on purpose: this is the baseline
    text = " ".join(f"word{i % 97} token{i % 13}." for i in range(4000))
    prompt = llm.tokenize(text, special=False)[:depth]
    raw.reset()
    t0 = time.perf_counter()
    raw.eval(prompt)
    prompt_tps = len(prompt) / (time.perf_counter() - t0)
    # decode continues right after the 512-token prompt (the agent always decodes behind a long prompt)
    sampler = llama_cpp.llama_sampler_init_greedy()
    t0 = time.perf_counter()
    for _ in range(128):
        token = llama_cpp.llama_sampler_sample(sampler, raw.ctx, -1)
        raw.eval([token])
    decode_tps = 128 / (time.perf_counter() - t0)
    llama_cpp.llama_sampler_free(sampler)
    raw.reset()
    return {"prompt_tps": prompt_tps, "decode_tps": decode_tps}


def load_llm(n_ctx: int, threads: int | None, seed: int = 1, *, model: str | None = None, **params: Any) -> LlamaCppLLM:
    """The benchmark's model (the embedded one by default); `threads` None = auto (engines/threads.py)."""
    return LlamaCppLLM(resolve_model(model), LlamaParams(n_ctx=n_ctx, n_threads=threads, seed=seed, **params))


# -- 2/3. the task (bench_task.py) through the chat-handler peer --------------------------------------
def peer_chat_handler_run(llm: LlamaCppLLM, steps: int) -> dict[str, Any]:
    """llama-cpp-python's own chatml-function-calling handler in a plain agent loop."""
    from llama_cpp import llama_chat_format

    handler = llama_chat_format.get_chat_completion_handler("chatml-function-calling")
    registry = task_registry()
    tools = registry.schemas()
    llm.reset_cache()
    with tempfile.TemporaryDirectory() as ws:
        executor = Executor(registry, ToolContext(workspace=Path(ws)), Approver(approve_all=True))
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a helpful assistant that calls functions."},
            {"role": "user", "content": TASK},
        ]
        evaluated = prompt_tokens = completion = calls_made = valid = 0
        t0 = time.perf_counter()
        failure = None
        for step in range(1, steps + 1):
            before = llm.tokens_evaluated_total
            try:
                # deterministic like the hermes run: temperature 0, fixed seed, the same max_tokens
                response = handler(
                    llama=llm._llama,
                    messages=messages,
                    tools=tools,
                    tool_choice="auto",
                    max_tokens=96,
                    temperature=0.0,
                    seed=1,
                )
            except ValueError as exc:  # e.g. "Requested tokens (4096) exceed context window of 4096"
                failure = f"step {step}: {exc}"
                break
            evaluated += llm.tokens_evaluated_total - before
            usage = response.get("usage") or {}
            prompt_tokens += usage.get("prompt_tokens", 0)
            completion += usage.get("completion_tokens", 0)
            message = response["choices"][0]["message"]
            tool_calls = message.get("tool_calls") or []
            messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": tool_calls or None})
            if not tool_calls:
                messages.append({"role": "user", "content": "Continue: call the next function."})
            calls_made += len(tool_calls)
            valid += run_openai_calls(executor, tool_calls, messages)
        wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_evaluated": evaluated,
        "completion_tokens": completion,
        "tool_calls": calls_made,
        "tool_calls_valid": valid,
        "failure": failure,
    }


# -- 4. parser and grammar --------------------------------------------------------------------
def parser_throughput(seconds: float = 2.0) -> dict[str, float]:
    corpus = ROOT / "tests" / "data" / "malformed_calls.jsonl"
    cases = [json.loads(line) for line in corpus.read_text().splitlines() if line.strip()] if corpus.exists() else []
    texts = [(c["text"], c.get("tool_names")) for c in cases] or [
        ('<tool_call>{"name": "get_current_time", "arguments": {}}</tool_call>', None)
    ]
    size = sum(len(t.encode()) for t, _ in texts)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for text, names in texts:
            parse_tool_calls(text, names)
        n += 1
    elapsed = time.perf_counter() - t0
    return {"replies_per_s": n * len(texts) / elapsed, "mb_per_s": n * size / elapsed / 2**20, "corpus": len(texts)}


def grammar_overhead(llm: LlamaCppLLM) -> dict[str, float]:
    registry = task_registry()
    grammar = tool_call_grammar(list(registry))
    system = render("system.jinja", tools=registry.schemas(), instructions="")
    messages = [{"role": "system", "content": system}, {"role": "user", "content": TASK}]
    tokens = HermesDialect().tokens(messages, registry.schemas(), llm, prefill="<tool_call>\n")
    out: dict[str, float] = {}
    for label, g in (("unconstrained", None), ("constrained", grammar)):
        total_tokens, decode_s = 0, 0.0
        for _ in range(3):
            c = llm.complete(tokens, CallOptions(max_tokens=64, temperature=0.0, stop=(), grammar=g))
            total_tokens += c.usage.completion_tokens
            decode_s += c.usage.seconds - c.usage.prompt_seconds
        out[f"{label}_decode_tps"] = total_tokens / decode_s if decode_s else 0.0
    out["constrained_over_unconstrained"] = out["constrained_decode_tps"] / out["unconstrained_decode_tps"]
    return out


# -- 5. soak ----------------------------------------------------------------------------------
def soak(llm: LlamaCppLLM, steps: int = 200) -> dict[str, float]:
    # a different folder each step: no loop-guard refusal, no cached result, a new result every time
    call = '<tool_call>\n{"name": "list_dir", "arguments": {"path": "d%03d"}}\n</tool_call>'
    outputs = [call % i for i in range(steps)] + ["done"]
    scripted = ReplayLLM(outputs, n_ctx=2048, tokenizer=llm)
    with tempfile.TemporaryDirectory() as ws:
        for i in range(steps):
            (Path(ws) / f"d{i:03}").mkdir()
            (Path(ws) / f"d{i:03}" / f"file_{i:03}.txt").write_text("x" * (i % 50))
        settings = load_settings({"max_steps": steps, "n_ctx": 2048, "max_tokens": 128})
        agent = build_agent(scripted, settings, workspace=Path(ws), registry=task_registry())
        rss: list[float] = []
        agent.on_event = lambda event: rss.append(rss_mb()) if isinstance(event, StepStart) else None
        t0 = time.perf_counter()
        result = agent.run(TASK)
        wall = time.perf_counter() - t0
    return {
        "steps": result.steps,
        "stopped": result.stopped,
        "error": result.error,
        "max_prompt_tokens": max(c.prompt_tokens for c in result.llm_calls),
        "compactions": result.compactions,
        "rss_step20_mb": rss[19],
        "rss_last_mb": rss[-1],
        "rss_growth_mb": rss[-1] - rss[19],
        "ms_per_step": wall / result.steps * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="registry name or .gguf path (default: embedded SmolLM2)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument(
        "--threads",
        type=lambda v: None if v == "auto" else int(v),
        default=os.cpu_count() or 1,
        help="llama.cpp threads for every system (default: all cores), or 'auto' (engines/threads.py)",
    )
    ap.add_argument("--n-gpu-layers", type=int, default=-1, help="as the CLI (default -1: all; 0: CPU only)")
    ap.add_argument("--bandwidth", type=float, default=0.0, help="device memory GB/s: decode's share of its ceiling")
    ap.add_argument("--server-steps", default="8,20", help="step counts for the llama-server rows ('' = skip)")
    ap.add_argument("--json", type=Path, default=ROOT / "bench-results" / "bench.json")
    ap.add_argument(
        "--only",
        choices=("all", "speed", "busy", "peers"),
        default="all",
        help="speed: only the issue-15 sections; busy: idle vs busy walls for fixed and auto threads; "
        "peers: hermes-local vs the chat-handler loop and llama-server on --server-steps, --repeat times",
    )
    ap.add_argument("--repeat", type=int, default=2, help="peers: how many times each pair runs")
    ap.add_argument("--no-busy-peer", action="store_true", help="busy: leave the chat-handler peer out")
    ap.add_argument("--batch-invariant", action="store_true", help="flash attention + q8_0 KV: drafts verified exactly")
    args = ap.parse_args()

    if args.only == "busy":
        import bench_busy

        peer = None if args.no_busy_peer else peer_chat_handler_run
        loader = functools.partial(load_llm, n_gpu_layers=args.n_gpu_layers)
        busy = bench_busy.busy_walls(loader, hermes_run, peer, steps=args.steps, n_ctx=args.n_ctx, model=args.model)
        print_rows(bench_busy.rows(busy))
        write_report({"busy": busy}, args.json)
        return
    path = resolve_model(args.model)
    params = LlamaParams(
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        n_gpu_layers=args.n_gpu_layers,
        seed=1,
        batch_invariant=args.batch_invariant,
    )
    llm = LlamaCppLLM(path, params)
    args.threads = args.threads or llm.n_threads  # auto: the other systems get the count auto chose at load
    report: dict[str, Any] = {"model": path.name, "n_ctx": args.n_ctx, "threads": args.threads, "steps": args.steps}
    report["threads_line"] = llm.threads_line
    print(f"model {path.name}, n_ctx {args.n_ctx}, {llm.threads_line}, {args.steps} steps", file=sys.stderr)
    if args.only == "peers":
        report["peers"] = peer_pairs(llm, path, args)
        write_report(report, args.json)
        return
    speed_rows = speed_sections(report, llm, path, args)
    if args.only == "speed":
        report["ceiling"] = ceiling(llm)
        print_rows(ceiling_rows(report["ceiling"], path, args) + speed_rows)
        write_report(report, args.json)
        return
    report["ceiling"] = ceiling(llm)
    report["hermes"] = hermes_run(llm, args.steps, args.n_ctx)
    depth = report["hermes"]["prompt_tokens"] // max(1, report["hermes"]["llm_calls"])
    report["ceiling_at_agent_depth"] = ceiling(llm, depth) | {"depth": depth}
    report["naive_reset_loop"] = hermes_run(llm, args.steps, args.n_ctx, naive=True)
    report["llama_cpp_chat_handler_loop"] = peer_chat_handler_run(llm, args.steps)
    report["parser"] = parser_throughput()
    report["grammar"] = grammar_overhead(llm)
    report["soak"] = soak(llm)
    report["peak_rss_mb"] = peak_rss_mb()
    import bench_llama_server  # scripts/ is on sys.path when this file runs as a script

    skipped = bench_llama_server.available() if args.server_steps else "--server-steps ''"
    if skipped is None:
        steps = [int(s) for s in args.server_steps.split(",")]
        report["llama_server"] = bench_llama_server.run(path, steps, args.n_ctx, args.threads)

    c, h, n, p = report["ceiling"], report["hermes"], report["naive_reset_loop"], report["llama_cpp_chat_handler_loop"]
    rows = [
        ("ceiling prompt tok/s (512)", f"{c['prompt_tps']:.0f}"),
        ("ceiling decode tok/s (128 after 512)", f"{c['decode_tps']:.1f}"),
        ("hermes wall s / model s", f"{h['wall_s']:.2f} / {h['model_s']:.2f}"),
        ("hermes agent overhead share", f"{h['overhead_share']:.1%}  (target < 5%)"),
        ("hermes decode tok/s, share of ceiling", f"{h['decode_tps']:.1f}, {h['decode_tps'] / c['decode_tps']:.1%}"),
        (
            f"  ... of the ceiling at the agent's mean depth ({report['ceiling_at_agent_depth']['depth']} tok)",
            f"{report['ceiling_at_agent_depth']['decode_tps']:.1f}, "
            f"{h['decode_tps'] / report['ceiling_at_agent_depth']['decode_tps']:.1%}",
        ),
        (
            "hermes evaluated / new prompt tokens",
            f"{h['prompt_tokens_evaluated']} / {h['prompt_tokens_new']} = "
            f"{h['evaluated_over_new']:.3f}  (target <= 1.05)",
        ),
        ("hermes valid tool calls", f"{h['tool_calls_valid']}/{h['tool_calls']}"),
        (
            "naive loop evaluated tokens, x hermes",
            f"{n['prompt_tokens_evaluated']}, "
            f"{n['prompt_tokens_evaluated'] / max(1, h['prompt_tokens_evaluated']):.2f}x",
        ),
        ("naive loop wall s, x hermes", f"{n['wall_s']:.2f}, {n['wall_s'] / h['wall_s']:.2f}x"),
        (
            "chat-handler loop evaluated, x hermes",
            f"{p['prompt_tokens_evaluated']}, "
            f"{p['prompt_tokens_evaluated'] / max(1, h['prompt_tokens_evaluated']):.2f}x",
        ),
        ("chat-handler loop wall s, x hermes", f"{p['wall_s']:.2f}, {p['wall_s'] / h['wall_s']:.2f}x"),
        ("chat-handler loop valid tool calls", f"{p['tool_calls_valid']}/{p['tool_calls']}"),
        ("chat-handler loop failure", p["failure"] or "none"),
        ("parser replies/s, MB/s", f"{report['parser']['replies_per_s']:.0f}, {report['parser']['mb_per_s']:.1f}"),
        (
            "grammar decode tok/s vs free",
            f"{report['grammar']['constrained_decode_tps']:.1f} vs "
            f"{report['grammar']['unconstrained_decode_tps']:.1f} "
            f"({report['grammar']['constrained_over_unconstrained']:.1%})",
        ),
        (
            "soak 200 steps: max prompt, RSS growth",
            f"{report['soak']['max_prompt_tokens']} tok, "
            f"{report['soak']['rss_growth_mb']:+.1f} MB (step 20 -> 200), {report['soak']['ms_per_step']:.0f} ms/step",
        ),
        ("peak RSS", f"{report['peak_rss_mb']:.0f} MB"),
    ]
    if "llama_server" in report:
        rows += bench_llama_server.rows(report["llama_server"])
    else:
        rows.append(("llama-server rows", f"skipped: {skipped}"))
    print_rows(rows + speed_rows)
    write_report(report, args.json)


def ceiling_rows(c: dict[str, float], path: Path, args: argparse.Namespace) -> list[tuple]:
    """Raw prompt and decode tok/s, and decode as a share of the memory-bandwidth ceiling (`--bandwidth` GB/s
    divided by the bytes each decoded token reads: every weight once, plus the KV cache at the decode depth)."""
    from hermes_local.models.footprint import estimate_memory

    rows = [
        ("ceiling prompt tok/s (512)", f"{c['prompt_tps']:.0f}"),
        ("ceiling decode tok/s", f"{c['decode_tps']:.1f}"),
    ]
    est = estimate_memory(path, 640, args.n_gpu_layers)
    per_token = est["weights_bytes"] + est["kv_bytes_per_token"] * 640
    if args.bandwidth:
        limit = args.bandwidth * 1e9 / per_token
        rows.append(("decode share of the bandwidth ceiling", f"{c['decode_tps'] / limit:.1%} of {limit:.0f} tok/s"))
    rows.append(("n_gpu_layers", str(args.n_gpu_layers)))
    return rows


def speed_sections(report: dict[str, Any], llm: LlamaCppLLM, path: Path, args: argparse.Namespace) -> list[tuple]:
    """Issue 15's keys: prompt_cache, fast_forward, prompt_lookup, batched."""
    import bench_speed

    report["prompt_cache"] = bench_speed.prompt_cache(path, args.n_ctx, args.threads, args.n_gpu_layers)
    report["fast_forward"] = bench_speed.fast_forward(llm)
    report["prompt_lookup"] = bench_speed.prompt_lookup(llm)
    report["batched"] = bench_speed.batched(llm)
    pc, ff, pl, b = report["prompt_cache"], report["fast_forward"], report["prompt_lookup"], report["batched"]
    rows = [
        (
            "prompt cache TTFT cold / warm s",
            f"{pc['cold_ttft_s']:.2f} / {pc['warm_ttft_s']:.2f} = {pc['ratio']:.2f}  (target <= 0.2)",
        ),
        (
            "prompt cache first call evaluated cold / warm",
            f"{pc['cold_first_call_evaluated']} / {pc['warm_first_call_evaluated']} of {pc['prompt_tokens']}",
        ),
        (
            "fast-forward tool-step tok/s on / off",
            f"{ff['tool_step_tps']:.1f} / {ff['plain_tps']:.1f} = {ff['ratio']:.2f}x  (target >= 1.3), "
            f"identical {ff['identical_share']:.0%} of {ff['compared']}",
        ),
        (
            "prompt lookup copy-task tok/s on / off",
            f"{pl['tps']:.1f} / {pl['plain_tps']:.1f} = {pl['ratio']:.2f}x  (target >= 1.5), "
            f"identical {pl['identical_share']:.0%} of {pl['compared']}, "
            f"{pl.get('accepted_draft_tokens', 0)} of {pl.get('output_tokens', 0)} output tokens from drafts "
            f"({pl.get('drafted_tokens', 0)} drafted); ceiling at acceptance {pl.get('acceptance', 0):.0%}: "
            f"{pl.get('ceiling_at_acceptance', 1.0):.2f}x (draft {pl.get('ceiling_draft_len', 0)})",
        ),
    ]
    if "tool_steps" in pl:
        t = pl["tool_steps"]
        rows.append(
            (
                "prompt lookup tool-step tok/s on / off",
                f"{t['tps']:.1f} / {t['plain_tps']:.1f} = {t['ratio']:.2f}x, identical {t['identical_share']:.0%} "
                f"of {t['compared']}",
            )
        )
    for key, section in (("fast_forward", ff), ("prompt_lookup", pl)):
        for d in section.get("differences", []):
            gap = "n/a (one output is a prefix of the other)" if d.get("gap") is None else f"{d['gap']:.4f}"
            rows.append((f"  {key} difference", f"first divergence at token {d.get('at')}, logit gap {gap}"))
    if b.get("n1_tps") is not None:
        rows.append(
            (
                f"batched aggregate tok/s n=1 / 2 / 4 ({b['runs']} runs queued, x{b['rounds']})",
                f"{b['n1_tps']:.1f} / {b['n2_tps']:.1f} / {b['n4_tps']:.1f}, speedup n4 {b['speedup_n4']:.2f}x  "
                "(target >= 1.6)",
            )
        )
        for n in (1, 2, 4):
            ph = b.get(f"n{n}_phases")
            if ph:
                rows.append(
                    (
                        f"  n={n} phases",
                        f"{ph['tokens']} tokens, {ph['prompt_tokens_evaluated']} prompt tokens evaluated, "
                        f"{ph['steps']} steps: llama_decode {ph['decode_s']:.2f} s, "
                        f"sampling+other {ph['other_s']:.2f} s",
                    )
                )
    else:
        rows.append(("batched", b.get("note", "not measured")))
    return rows


def peer_pairs(llm: LlamaCppLLM, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """hermes-local and the chat-handler loop, side by side on each step count, `--repeat` times (one
    process, the same model, threads and n_ctx), then the llama-server pair; prints each ratio as it comes."""
    import bench_llama_server

    steps_list = [int(s) for s in args.server_steps.split(",") if s]
    out: dict[str, Any] = {"chat_handler": []}
    for round_ in range(1, args.repeat + 1):
        for steps in steps_list:
            h, p = hermes_run(llm, steps, args.n_ctx), peer_chat_handler_run(llm, steps)
            row = {
                "round": round_,
                "steps": steps,
                "hermes": h,
                "peer": p,
                "peer_over_hermes_wall": p["wall_s"] / h["wall_s"],
            }
            out["chat_handler"].append(row)
            print(
                f"round {round_}, {steps} steps: hermes {h['wall_s']:.1f} s ({h['tool_calls_valid']}/{h['tool_calls']}"
                f" valid, {h['prompt_tokens_evaluated'] / max(1, h['llm_calls']):.0f} evaluated/call), chat-handler "
                f"{p['wall_s']:.1f} s ({p['tool_calls_valid']}/{p['tool_calls']} valid, "
                f"{p['prompt_tokens_evaluated'] / max(1, p.get('llm_calls') or steps):.0f} evaluated/call): "
                f"peer / hermes = {row['peer_over_hermes_wall']:.2f}",
                flush=True,
            )
    skipped = bench_llama_server.available()
    if skipped is None:
        for _round in range(1, args.repeat + 1):
            out.setdefault("llama_server", []).append(
                bench_llama_server.run(path, steps_list, args.n_ctx, args.threads or llm.n_threads)
            )
    else:
        out["llama_server_skipped"] = skipped
    return out


def print_rows(rows: list[tuple]) -> None:
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


def write_report(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
