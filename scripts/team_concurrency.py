"""Two independent delegations in one turn (issue 30): wall time side by side against one after the other.

The manager's one turn is scripted (two `delegate` calls, then its answer); each specialist is a real run on
the embedded SmolLM2 (or `--model`): `tool_choice = "none"`, one step, `--max-tokens` tokens, so each makes one
real model call of the same size. Three ways, each `--repeat` times (median wall seconds of the manager's run):

- `sequential`: the two delegations one after the other (the turn's reads forced to run alone);
- `threads`: side by side, one model (`parallel = 1`: the engine's lock takes one call at a time);
- `batched`: side by side on a `parallel = 2` model (both calls decoded together in one llama_decode a step).

  python scripts/team_concurrency.py [--model NAME|PATH] [--max-tokens 64] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MANAGER_GOAL = "Describe a cat and describe a dog, each by its specialist."
PROFILES = {
    "cats": {"description": "Describes cats.", "tools": ["time"], "tool_choice": "none", "max_steps": 1},
    "dogs": {"description": "Describes dogs.", "tools": ["time"], "tool_choice": "none", "max_steps": 1},
}


class ManagerScripted:
    """The manager's calls replayed, the specialists' calls on the real model (one tokenizer for both)."""

    def __init__(self, real: Any) -> None:
        from hermes_local.testing import ScriptedLLM, tool_call_text

        calls = [
            tool_call_text("delegate", agent="cats", task="Describe a cat in two sentences."),
            tool_call_text("delegate", agent="dogs", task="Describe a dog in two sentences."),
        ]
        self.script = ScriptedLLM(["\n".join(calls), "Both are described."], tokenizer=real, n_ctx=real.n_ctx)
        self.real, self.n_ctx, self.description = real, real.n_ctx, "manager scripted, specialists real"

    def __getattr__(self, name: str) -> Any:  # tokenize, detokenize, special_token_id, bos_tokens, ...
        return getattr(self.real, name)

    def complete(self, tokens: Any, options: Any, *, on_token: Any = None) -> Any:
        if MANAGER_GOAL in self.real.detokenize(list(tokens)):  # only the manager's prompts hold its goal
            return self.script.complete(tokens, options, on_token=on_token)
        return self.real.complete(tokens, options, on_token=on_token)


def one_run(llm: Any, settings: Any, workspace: Path, *, sequential: bool) -> tuple[float, int]:
    from hermes_local.runtime import build_registry
    from hermes_local.testing import build_agent

    agent = build_agent(ManagerScripted(llm), settings, workspace=workspace, registry=build_registry())
    if sequential:
        agent.executor.concurrent = lambda name: False  # type: ignore[method-assign]
    started = time.perf_counter()
    with agent:
        result = agent.run(MANAGER_GOAL)
    wall = time.perf_counter() - started
    envelopes = [c.data for c in result.tool_calls if c.name == "delegate"]
    assert [e["status"] for e in envelopes] == ["answered", "answered"], result.tool_calls
    return wall, sum(e["usage"]["completion_tokens"] for e in envelopes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()

    from hermes_local.config import Settings
    from hermes_local.models.registry import embedded_model_path
    from hermes_local.runtime import load_llm

    model = args.model or str(embedded_model_path())
    base = {"model": model, "n_ctx": 2048, "n_gpu_layers": 0, "max_tokens": args.max_tokens, "prompt_cache": False}
    base |= {"agents": PROFILES, "answer_temperature": 0.0, "temperature": 0.0}
    out: dict[str, Any] = {"model": Path(model).name, "max_tokens": args.max_tokens, "repeat": args.repeat}
    with tempfile.TemporaryDirectory() as folder:
        for name, parallel, sequential in (("sequential", 1, True), ("threads", 1, False), ("batched", 2, False)):
            settings = Settings.model_validate(base | {"parallel": parallel})
            llm = load_llm(settings)
            one_run(llm, settings, Path(folder), sequential=sequential)  # warm-up: the shared prefix, the threads
            runs = [one_run(llm, settings, Path(folder), sequential=sequential) for _ in range(args.repeat)]
            out[name] = round(statistics.median(wall for wall, _ in runs), 3)
            out[f"{name}_specialist_tokens"] = [tokens for _, tokens in runs]
            print(f"{name:10} {out[name]:.2f} s (median of {args.repeat}; the two specialists generated "
                  f"{', '.join(str(t) for _, t in runs)} tokens)", flush=True)  # fmt: skip
    print(f"side by side / one after the other: threads {out['threads'] / out['sequential']:.2f}, "
          f"batched {out['batched'] / out['sequential']:.2f}")  # fmt: skip
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
