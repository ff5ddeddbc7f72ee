"""Share of emitted tool calls that parse and validate, with and without the grammar.

Runs 24 different tasks on a model with `tool_choice=required` (the reply starts inside
`<tool_call>`), once grammar-constrained and once free, and counts calls that parse and whose
arguments validate against the tool's schema. Prints a table and writes JSON.

  python scripts/tool_call_validity.py                 # embedded SmolLM2
  python scripts/tool_call_validity.py --model PATH.gguf --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pydantic import ValidationError  # noqa: E402

from hermes_local.calls.grammar import tool_call_grammar  # noqa: E402
from hermes_local.calls.parse import parse_tool_calls  # noqa: E402
from hermes_local.dialects.hermes import HermesDialect  # noqa: E402
from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams  # noqa: E402
from hermes_local.llm import CallOptions  # noqa: E402
from hermes_local.models.registry import resolve_model  # noqa: E402
from hermes_local.prompts import render  # noqa: E402
from hermes_local.runtime import build_registry  # noqa: E402

TASKS = [
    "What time is it?",
    "Note 'call the plumber' in my memo.",
    "Read the file notes.txt.",
    "List the files in the reports folder.",
    "Write 'hello' into greeting.txt.",
    "How many orders are in the orders table?",
    "Show the 5 most recent orders from the database.",
    "Run `ls -la` in the workspace.",
    "Fetch http://127.0.0.1:8000/status.",
    "Remember that I prefer CSV exports.",
    "What is in config/settings.toml?",
    "Create a file todo.md with three items: milk, eggs, bread.",
    "Which customer spent the most? Use the database.",
    "Append today's date to my memo.",
    "List everything in the current directory.",
    "Count the lines of data.csv using the shell.",
    "Remember that reports go in the reports/ folder.",
    "Read README.md and tell me what the project does.",
    "What was the total revenue yesterday? Query the sales table.",
    "Save the text 'meeting at 3pm' to meeting.txt.",
    "Check the disk usage with du -sh .",
    "Look up the latest order id in the database.",
    "Write a short report into report.md saying all systems are fine.",
    "Note in my memo that the backup finished.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--temperature", type=float, default=0.2)
    ap.add_argument("--json", type=Path, default=ROOT / "bench-results" / "tool_call_validity.json")
    args = ap.parse_args()

    llm = LlamaCppLLM(resolve_model(args.model), LlamaParams(n_ctx=args.n_ctx, seed=1))
    registry = build_registry()
    system = render("system.jinja", tools=registry.schemas(), instructions="")
    grammar = tool_call_grammar(list(registry))
    report: dict = {"model": llm.description, "tasks": len(TASKS)}
    for label, g in (("grammar", grammar), ("free", None)):
        valid = emitted = 0
        failures = []
        for task in TASKS:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
            out = llm.complete(
                HermesDialect().tokens(messages, registry.schemas(), llm, prefill="<tool_call>\n"),
                CallOptions(max_tokens=160, temperature=args.temperature, grammar=g),
            )
            parsed = parse_tool_calls("<tool_call>\n" + out.text, registry.names())
            emitted += max(1, len(parsed.calls) + len(parsed.errors))
            ok = 0
            for call in parsed.calls:
                tool = registry.get(call.name)
                try:
                    if tool is None:
                        raise KeyError(call.name)
                    tool.arguments_model.model_validate(call.arguments)
                    ok += 1
                except (KeyError, ValidationError) as exc:
                    failures.append({"task": task, "error": str(exc)[:200]})
            failures += [{"task": task, "error": e[:200]} for e in parsed.errors]
            if not parsed.calls and not parsed.errors:
                failures.append({"task": task, "error": "no call", "text": out.text[:200]})
            valid += ok
        report[label] = {"valid": valid, "emitted": emitted, "share": valid / emitted, "failures": failures}
        print(f"{label:8} valid calls: {valid}/{emitted} = {valid / emitted:.1%}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
