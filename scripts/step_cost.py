"""What one agent step costs in prompt tokens, beyond its tool result and its call (issue 28), no model.

Runs a scripted N-step run (default 20; the replay model, so nothing is timed and nothing is decoded)
on the benchmark's tools under `--tool-choice required`, tokenized with the embedded model's own
vocabulary (vocab-only load; `--tokenizer words` uses the replay model's word tokenizer), once with
no goal reminder and once with `--reminder-every` (default 3). For every model call it reports the
new prompt tokens (those past the common prefix with the previous call's prompt and output), the
tokens of the tool results and of the calls (the call JSON where it is re-rendered, and the
`<tool_call>` tag prefilled under `required`), and the rest: what the step adds on its own (the
turn framing, notes, the ledger). Steps with a goal reminder, a compaction or the final-answer
request are marked, since only there is the full "what have I done" summary meant to be written.
Also checks that no call re-evaluates its prefix (evaluated == new) and evaluated/new overall.

Run it on another checkout's code with PYTHONPATH (it imports `hermes_local` from the path):
  PYTHONPATH=/work/main python scripts/step_cost.py            # before
  PYTHONPATH=$PWD python scripts/step_cost.py --json out.json  # after
Prints a table; `--json PATH` (or `-` for stdout) writes the series. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

PREFILL = "<tool_call>\n"  # the Hermes dialect's required-mode prefill
GOAL = "What time is it? Note the time in my memo, then note one more fact about the day."


def scripted_outputs(steps: int) -> list[str]:
    """A fixed call per step (cycling the benchmark's tools), then the final answer."""
    from hermes_local.engines.replay import tool_call_text as call

    cycle = [
        lambda i: call("get_current_time"),
        lambda i: call("append_to_memo", content=f"Step {i}: the time was noted."),
        lambda i: call("list_dir", path="."),
    ]
    return [cycle[i % 3](i) for i in range(steps)] + ["It is the time noted in the memo."]


def tokenizer_for(kind: str) -> Any:
    if kind == "words":
        from hermes_local.engines.replay import WordTokenizer

        return WordTokenizer()
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.models.registry import embedded_model_path

    return LlamaCppLLM(embedded_model_path(), LlamaParams(vocab_only=True))


def measure(steps: int, reminder_every: int, tokenizer: Any, n_ctx: int = 32768) -> dict[str, Any]:
    """One scripted run; the per-call series and its summary."""
    from hermes_local.config import load_settings
    from hermes_local.dialects.base import dumps, result_content
    from hermes_local.engines.replay import ReplayLLM
    from hermes_local.events import Compaction, StepStart
    from hermes_local.testing import build_agent
    from hermes_local.tools import Approver, ToolRegistry, default_registry

    full = default_registry()
    registry = ToolRegistry([full.get(n) for n in ("get_current_time", "append_to_memo", "list_dir")])
    llm = ReplayLLM(scripted_outputs(steps), n_ctx=n_ctx, tokenizer=tokenizer)
    compacted: set[int] = set()
    current = [0]

    def on_event(event: Any) -> None:
        if isinstance(event, StepStart):
            current[0] = event.step
        elif isinstance(event, Compaction):
            compacted.add(current[0])

    settings = load_settings(
        {"tool_choice": "required", "max_steps": steps, "n_ctx": n_ctx, "max_tokens": 96}
        | {"reminder_every": reminder_every, "temperature": 0.0}
    )
    with tempfile.TemporaryDirectory() as ws:
        agent = build_agent(
            llm,
            settings,
            workspace=Path(ws),
            registry=registry,
            approver=Approver(approve_all=True, deny=["final_answer"]),
            on_event=on_event,
        )
        agent.config.max_consecutive_failures = steps + 1
        result = agent.run(GOAL)
        agent.close()

    def count(text: str) -> int:
        return len(tokenizer.tokenize(text, special=False))

    rows = []
    for i, c in enumerate(result.llm_calls):
        prompt = llm.prompts[i]
        new_text = tokenizer.detokenize(prompt[len(prompt) - c.prompt_tokens_new :]) if c.prompt_tokens_new else ""
        before = [o for o in result.tool_calls if o.step == c.step - 1] if i else []
        if i == len(result.llm_calls) - 1 and i >= steps:  # the final-answer request answers the last step
            before = [o for o in result.tool_calls if o.step == c.step]
        results = [dumps({"name": o.name, "content": result_content(o.result.envelope())}) for o in before]
        calls = [dumps({"name": o.name, "arguments": o.arguments}) for o in before]
        result_tokens = sum(count(t) for t in results if t in new_text)
        call_tokens = sum(count(t) for t in calls if t in new_text)
        if i and new_text.endswith(PREFILL):  # the opening tag of this step's call, prefilled under `required`
            call_tokens += count(PREFILL)
        kind = "first" if i == 0 else "step"
        if i >= steps:
            kind = "final"
        elif reminder_every and c.step > 1 and (c.step - 1) % reminder_every == 0:
            kind = "reminder"
        if c.step in compacted:
            kind = "compaction"
        rows.append(
            {
                "call": i + 1,
                "step": c.step,
                "kind": kind,
                "new": c.prompt_tokens_new,
                "evaluated": c.prompt_tokens_evaluated,
                "result": result_tokens,
                "call_tokens": call_tokens,
                "overhead": c.prompt_tokens_new - result_tokens - call_tokens,
            }
        )
    # No call re-evaluates its prefix: each prompt keeps the previous one up to its open assistant turn.
    from hermes_local.llm import common_prefix_length

    opening = len(tokenizer.tokenize("<|im_start|>assistant\n" + PREFILL, special=True))
    prefix_breaks = [
        i + 1
        for i in range(1, len(llm.prompts))
        if common_prefix_length(llm.prompts[i - 1], llm.prompts[i]) < len(llm.prompts[i - 1]) - opening
    ]
    plain = [r["overhead"] for r in rows if r["kind"] == "step"]
    evaluated = sum(r["evaluated"] for r in rows)
    new = sum(r["new"] for r in rows)
    return {
        "steps": steps,
        "reminder_every": reminder_every,
        "rows": rows,
        "overhead_plain_mean": statistics.mean(plain) if plain else 0.0,
        "overhead_plain_max": max(plain, default=0),
        "overhead_all_mean": statistics.mean(r["overhead"] for r in rows[1:]) if len(rows) > 1 else 0.0,
        "evaluated_over_new": evaluated / new if new else 0.0,
        "reevaluating_calls": [r["call"] for r in rows if r["evaluated"] > r["new"]],
        "prefix_breaks": prefix_breaks,
        "stopped": result.stopped,
        "tool_calls": len(result.tool_calls),
    }


def print_series(report: dict[str, Any]) -> None:
    print(f"\nreminder_every={report['reminder_every']}, {report['steps']} steps, stopped {report['stopped']}")
    print(f"{'call':>4} {'step':>4} {'kind':<10} {'new':>5} {'eval':>5} {'result':>6} {'call':>5} {'overhead':>8}")
    for r in report["rows"]:
        print(
            f"{r['call']:>4} {r['step']:>4} {r['kind']:<10} {r['new']:>5} {r['evaluated']:>5} "
            f"{r['result']:>6} {r['call_tokens']:>5} {r['overhead']:>8}"
        )
    print(
        f"overhead per plain step: mean {report['overhead_plain_mean']:.1f}, max {report['overhead_plain_max']} "
        f"(goal <= ~25); all steps mean {report['overhead_all_mean']:.1f}; evaluated/new "
        f"{report['evaluated_over_new']:.3f} (target <= 1.05); calls re-evaluating: "
        f"{report['reevaluating_calls'] or 'none'}; prompts not extending the previous one: "
        f"{report['prefix_breaks'] or 'none'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reminder-every", type=int, default=3, help="the second series' goal reminder period")
    ap.add_argument("--tokenizer", choices=("embedded", "words"), default="embedded")
    ap.add_argument("--json", default=None, help="write the series as JSON to PATH ('-' = stdout, no table)")
    args = ap.parse_args()
    os.environ["HERMES_LOCAL_HOME"] = tempfile.mkdtemp(prefix="step-cost-home-")  # no memory or cache kept
    tokenizer = tokenizer_for(args.tokenizer)
    import hermes_local

    code = str(Path(hermes_local.__file__).resolve().parents[1])
    reports = [measure(args.steps, 0, tokenizer), measure(args.steps, args.reminder_every, tokenizer)]
    out = {"code": code, "tokenizer": args.tokenizer, "series": reports}
    if args.json == "-":
        json.dump(out, sys.stdout, indent=1)
        return
    print(f"code: {code}, tokenizer: {args.tokenizer}")
    for report in reports:
        print_series(report)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
