"""Issue 18: does every required step end in a valid call? Before/after closing mode and the string guard.

Runs 54 different tasks with `tool_choice=required` (the reply starts inside `<tool_call>`, grammar on)
with max_tokens 512 unless --max-tokens, each task twice in a row: "before" with closing mode, the
runaway-string guard and fast-forward off (the old decoder), "after" with the defaults. Prints one
line per step and then the share of steps that yield a parseable, schema-valid call, the share that
needed closing mode, and the mean tokens spent per step; the JSON is rewritten after every task, so
an interrupted run still holds a like-for-like comparison.

  python scripts/closing_validity.py                       # embedded SmolLM2
  python scripts/closing_validity.py --model PATH.gguf --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from pydantic import ValidationError  # noqa: E402
from tool_call_validity import TASKS as BASE_TASKS  # noqa: E402

from hermes_local.calls.grammar import tool_call_grammar  # noqa: E402
from hermes_local.calls.parse import parse_tool_calls  # noqa: E402
from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams  # noqa: E402
from hermes_local.llm import CallOptions  # noqa: E402
from hermes_local.models.registry import resolve_model  # noqa: E402
from hermes_local.prompts import chat_tokens, render  # noqa: E402
from hermes_local.runtime import build_registry  # noqa: E402

MORE_TASKS = [
    "Write a detailed 1500-word essay about the history of Rome into rome.md.",
    "Save a long poem about the sea, at least forty lines, into poem.txt.",
    "Write the full text of a project proposal for a new bicycle lane into proposal.md.",
    "Create story.txt containing a children's story about a brave little fox.",
    "Write meeting minutes for a two-hour board meeting into minutes.md, with every agenda item.",
    "Note in my memo everything you know about healthy breakfasts.",
    "Remember a detailed description of my morning routine: coffee, run, shower, email.",
    "Write a Python script that prints the first 100 prime numbers into primes.py.",
    "Write a CSV with 30 rows of fake customer data into customers.csv.",
    "Append a long list of book recommendations to my memo.",
    "Run a shell command that prints the numbers from 1 to 10.",
    "Query the database for all customers in Berlin ordered by name.",
    "Show me the schema of the products table.",
    "Read the file docs/install.md.",
    "List the contents of the src folder.",
    "What day of the week is it today?",
    "Write an HTML page with a table of the planets into planets.html.",
    "Save the lyrics of a song you make up about Mondays into monday.txt.",
    "Fetch http://127.0.0.1:8080/health and tell me the status.",
    "Remember that my favourite colour is green.",
    "Write a README.md for a to-do list app, with installation and usage sections.",
    "Find the 3 biggest orders in the orders table.",
    "Write a cover letter for a data analyst job into letter.txt.",
    "Check which Python version is installed using the shell.",
    "Create notes/ideas.md listing ten ideas for a weekend trip.",
    "Write a JSON config file config.json with keys name, version and debug.",
    "Summarise the file report.txt.",
    "Note in my memo: buy milk, call mom, pay rent.",
    "Write a SQL query that counts orders per month and run it.",
    "Translate 'good morning, how are you?' into French and save it into french.txt.",
]
TASKS = list(dict.fromkeys(BASE_TASKS + MORE_TASKS))


def one_step(llm: LlamaCppLLM, registry, system: str, grammar: str, args, task: str, after: bool) -> dict:
    llm.closing = llm.fast_forward = after
    messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    out = llm.complete(
        chat_tokens(messages, llm, prefill="<tool_call>\n"),
        CallOptions(max_tokens=args.max_tokens, temperature=args.temperature, grammar=grammar),
    )
    parsed = parse_tool_calls("<tool_call>\n" + out.text, registry.names())
    error = None
    if len(parsed.calls) == 1 and not parsed.errors:
        call = parsed.calls[0]
        try:
            registry.get(call.name).arguments_model.model_validate(call.arguments)
        except (AttributeError, ValidationError) as exc:
            error = str(exc)[:160]
    else:
        error = (parsed.errors or ["no call"])[0][:160]
    return {
        "task": task,
        "valid": error is None,
        "error": error,
        "closed": out.truncated,
        "tokens": out.usage.completion_tokens,
        "seconds": out.usage.seconds,
        "text": out.text[-160:],
    }


def summary(steps: list[dict]) -> dict:
    n = len(steps) or 1
    return {
        "steps": len(steps),
        "valid": sum(s["valid"] for s in steps),
        "valid_share": sum(s["valid"] for s in steps) / n,
        "closing_share": sum(s["closed"] is not None for s in steps) / n,
        "mean_tokens_per_step": sum(s["tokens"] for s in steps) / n,
        "seconds": sum(s["seconds"] for s in steps),
        "failures": [s for s in steps if not s["valid"]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--temperature", type=float, default=0.2)
    ap.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    ap.add_argument("--json", type=Path, default=ROOT / "bench-results" / "closing_validity.json")
    args = ap.parse_args()

    llm = LlamaCppLLM(resolve_model(args.model), LlamaParams(n_ctx=args.n_ctx, seed=1))
    registry = build_registry()
    system = render("system.jinja", tools=registry.schemas(), instructions="")
    grammar = tool_call_grammar(list(registry))
    report = {"model": llm.description, "tasks": len(TASKS), "max_tokens": args.max_tokens}
    t0 = time.perf_counter()
    steps: dict[str, list[dict]] = {"before": [], "after": []}
    for i, task in enumerate(TASKS[: args.limit], 1):  # interleaved, so a partial run is still a comparison
        for label, after in (("before", False), ("after", True)):
            step = one_step(llm, registry, system, grammar, args, task, after)
            steps[label].append(step)
            print(
                f"{i:3} {label:6} valid={step['valid']!s:5} closed={step['closed']!s:10} tokens={step['tokens']:3}",
                flush=True,
            )
        for label in steps:
            report[label] = summary(steps[label])
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    for label in steps:
        r = report[label]
        print(
            f"{label:6}  valid {r['valid']}/{r['steps']} = {r['valid_share']:.1%}   "
            f"closing mode {r['closing_share']:.1%}   mean tokens/step {r['mean_tokens_per_step']:.1f}   "
            f"model {r['seconds']:.0f} s"
        )
    report["wall_s"] = time.perf_counter() - t0
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
