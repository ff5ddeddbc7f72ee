"""llama-server in the benchmark: the strongest peer, and hermes-local driving it as its engine.

For each step count (8 and 20 by default), on the same GGUF, threads and n_ctx, each run on a fresh
llama-server (built by scripts/build_llama_cpp_tools.sh; nothing cached from an earlier run):
  1. peer: llama-server `--jinja` with the Hermes 2 Pro tool_use template from the llama.cpp sources,
     driven by a plain OpenAI-style tool loop (`/v1/chat/completions` with `tools`, tool_choice
     "required", results sent back as `tool` messages) -- the loop most users would write;
  2. hermes-local with `--engine llama-server` (token-id prompts, our grammar, the server's KV cache)
     on the same task, through scripts/bench_task.py's `hermes_run`.
Reports wall time, prompt tokens the server evaluated (its `timings.prompt_n`), and valid tool calls.
Figures, not assertions. `python scripts/bench.py` calls it when the binaries exist; alone:

  python scripts/bench_llama_server.py --steps 8,20 [--model PATH.gguf] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from bench_task import TASK, hermes_run, run_openai_calls, task_registry  # noqa: E402  (scripts/, on sys.path)

from hermes_local.config import load_settings  # noqa: E402
from hermes_local.engines import load_engine  # noqa: E402
from hermes_local.engines.binaries import LocalProcess, find_tool, tools_dir  # noqa: E402
from hermes_local.models.registry import resolve_model  # noqa: E402
from hermes_local.tools import Approver, Executor, ToolContext  # noqa: E402

TEMPLATE = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"


def available() -> str | None:
    """None when the peer can run, else why not."""
    if find_tool("llama-server") is None:
        return f"llama-server not built in {tools_dir()} (run scripts/build_llama_cpp_tools.sh)"
    if not (tools_dir() / "templates" / TEMPLATE).is_file():
        return f"{TEMPLATE} missing in {tools_dir() / 'templates'} (re-run scripts/build_llama_cpp_tools.sh)"
    return None


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def peer_openai_loop(model: Path, steps: int, n_ctx: int, threads: int) -> dict[str, Any]:
    """A plain OpenAI-style tool loop against llama-server --jinja with the Hermes tool_use template."""
    registry = task_registry()
    extra = ["--jinja", "--chat-template-file", str(tools_dir() / "templates" / TEMPLATE)]
    evaluated = prompt_tokens = completion = calls_made = valid = 0
    failure = None
    with LocalProcess.llama_server(model, n_ctx=n_ctx, threads=threads, extra=extra) as server:
        with tempfile.TemporaryDirectory() as ws:
            executor = Executor(registry, ToolContext(workspace=Path(ws)), Approver(approve_all=True))
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": "You are a helpful assistant that calls functions."},
                {"role": "user", "content": TASK},
            ]
            t0 = time.perf_counter()
            for step in range(1, steps + 1):
                body = {"messages": messages, "tools": registry.schemas(), "tool_choice": "required"}
                body |= {"max_tokens": 96, "temperature": 0.0, "seed": 1}  # deterministic, like hermes_run
                try:
                    response = _post(server.url + "/v1/chat/completions", body)
                except OSError as exc:  # HTTP 400 when the conversation outgrows n_ctx, or a parse failure
                    detail = exc.read().decode(errors="replace")[:160] if hasattr(exc, "read") else str(exc)
                    failure = f"step {step}: {detail}"
                    break
                timings = response.get("timings") or {}
                usage = response.get("usage") or {}
                evaluated += int(timings.get("prompt_n", usage.get("prompt_tokens", 0)))
                prompt_tokens += int(usage.get("prompt_tokens", 0))
                completion += int(usage.get("completion_tokens", 0))
                message = response["choices"][0]["message"]
                tool_calls = message.get("tool_calls") or []
                messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": tool_calls})
                if not tool_calls:
                    messages.append({"role": "user", "content": "Continue: call the next function."})
                calls_made += len(tool_calls)
                valid += run_openai_calls(executor, tool_calls, messages)
            wall = time.perf_counter() - t0
    if failure is None and calls_made == 0:  # seen with SmolLM2: its template analysis finds no call format
        failure = "llama-server returned no tool_calls in any step (plain text despite tool_choice required)"
    return {
        "wall_s": wall,
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_evaluated": evaluated,
        "completion_tokens": completion,
        "tool_calls": calls_made,
        "tool_calls_valid": valid,
        "failure": failure,
    }


def hermes_engine_run(model: Path, steps: int, n_ctx: int, threads: int) -> dict[str, Any]:
    """hermes-local's own loop with the llama-server engine (bench_task.hermes_run, same task and settings)."""
    with LocalProcess.llama_server(model, n_ctx=n_ctx, threads=threads) as server:
        engine = load_engine(load_settings({"engine": "llama-server", "engine_url": server.url, "seed": 1}))
        return hermes_run(engine, steps, n_ctx)  # type: ignore[arg-type]


def rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for steps, r in sorted(report.items(), key=lambda kv: int(kv[0])):
        p, h = r["peer_openai_loop"], r["hermes_llama_server_engine"]
        out += [
            (
                f"[{steps} steps] llama-server peer wall s / evaluated",
                f"{p['wall_s']:.2f} / {p['prompt_tokens_evaluated']}",
            ),
            (f"[{steps} steps] llama-server peer valid calls", f"{p['tool_calls_valid']}/{p['tool_calls']}"),
            (f"[{steps} steps] llama-server peer failure", p["failure"] or "none"),
            (
                f"[{steps} steps] hermes+llama-server wall s / evaluated",
                f"{h['wall_s']:.2f} / {h['prompt_tokens_evaluated']}",
            ),
            (f"[{steps} steps] hermes+llama-server valid calls", f"{h['tool_calls_valid']}/{h['tool_calls']}"),
            (
                f"[{steps} steps] peer evaluated, x hermes+llama-server",
                f"{p['prompt_tokens_evaluated'] / max(1, h['prompt_tokens_evaluated']):.2f}x",
            ),
        ]
    return out


def run(model: Path, step_counts: list[int], n_ctx: int, threads: int) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for steps in step_counts:
        print(f"llama-server rows: {steps} steps", file=sys.stderr)
        report[str(steps)] = {
            "peer_openai_loop": peer_openai_loop(model, steps, n_ctx, threads),
            "hermes_llama_server_engine": hermes_engine_run(model, steps, n_ctx, threads),
        }
        for label, value in rows({str(steps): report[str(steps)]}):  # partial figures as soon as they exist
            print(f"  {label}: {value}", file=sys.stderr)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="registry name or .gguf path (default: embedded SmolLM2)")
    ap.add_argument("--steps", default="8,20", help="comma-separated step counts")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=ROOT / "bench-results" / "bench_llama_server.json")
    args = ap.parse_args()
    why = available()
    if why:
        sys.exit(f"skipped: {why}")
    report = run(resolve_model(args.model), [int(s) for s in args.steps.split(",")], args.n_ctx, args.threads)
    table = rows(report)
    width = max(len(r[0]) for r in table)
    for label, value in table:
        print(f"{label:<{width}}  {value}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
