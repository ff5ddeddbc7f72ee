"""The fixed multi-step task every benchmark runs, shared by scripts/bench.py and its peers' modules.

`TASK` with its three tools (`task_registry`), `hermes_run` (hermes-local's own loop on it, under
`--tool-choice required` for exactly N steps, timed from the run's start event to its end event) and
`run_openai_calls` (a peer's OpenAI-style tool calls run through the same executor). bench.py and
bench_llama_server.py both import these, so neither imports the other. Measures nothing by itself.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hermes_local.config import load_settings  # noqa: E402
from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM  # noqa: E402
from hermes_local.events import RunEnd, RunStart  # noqa: E402
from hermes_local.testing import build_agent  # noqa: E402
from hermes_local.tools import Approver, Executor, ToolRegistry, default_registry  # noqa: E402

TASK = "What time is it? Note the time in my memo, then note one more fact about the day."
TOOL_NAMES = ("get_current_time", "append_to_memo", "list_dir")


def task_registry() -> ToolRegistry:
    full = default_registry()
    return ToolRegistry([full.get(n) for n in TOOL_NAMES])


def hermes_run(llm: LlamaCppLLM, steps: int, n_ctx: int, *, naive: bool = False) -> dict[str, Any]:
    """The fixed task; `wall_s` is timed from the run's start to its end event, so what the run does
    before (recalling long-term memory) and after (closing: memory writes, stores) is left out and
    reported as `outside_s`; `total_s` is the whole `agent.run` with closing."""
    marks: dict[str, float] = {}

    def on_event(event: Any) -> None:
        if isinstance(event, RunStart | RunEnd):
            marks[type(event).__name__] = time.perf_counter()

    if hasattr(llm, "reset_cache"):  # a remote engine (bench_llama_server.py) starts on a fresh server instead
        llm.reset_cache()
    with tempfile.TemporaryDirectory() as ws:
        settings = load_settings(
            {
                "tool_choice": "required",
                "max_steps": steps,
                "n_ctx": n_ctx,
                "max_tokens": 96,
                "reminder_every": 0,
                "temperature": 0.0,  # same as the chat-handler peer: both deterministic
            }
        )
        agent = build_agent(
            llm,
            settings,
            workspace=Path(ws),
            registry=task_registry(),
            approver=Approver(approve_all=True, deny=["final_answer"]),  # never ends early: exactly `steps` steps
            on_event=on_event,
        )
        agent.config.max_consecutive_failures = steps + 1  # always run exactly `steps` steps, like the peers
        if naive:
            original = llm.complete

            def resetting_complete(*args: Any, **kwargs: Any):
                llm.reset_cache()
                return original(*args, **kwargs)

            llm.complete = resetting_complete  # type: ignore[method-assign]
        t0 = time.perf_counter()
        try:
            result = agent.run(TASK)
            agent.close()  # end-of-run writes and store closing: timed in total_s only
        finally:
            if naive:
                del llm.complete
        total = time.perf_counter() - t0
        wall = marks.get("RunEnd", t0 + total) - marks.get("RunStart", t0)
    calls = result.llm_calls
    model = sum(c.seconds for c in calls)
    decode_s = sum(c.seconds - c.prompt_seconds for c in calls)
    completion = sum(c.completion_tokens for c in calls)
    evaluated = sum(c.prompt_tokens_evaluated for c in calls)
    new = sum(c.prompt_tokens_new for c in calls)
    valid = sum(1 for c in result.tool_calls if c.error_kind not in ("invalid_arguments", "not_found"))
    return {
        "wall_s": wall,
        "total_s": total,
        "outside_s": total - wall,
        "threads": getattr(llm, "threads_line", None),
        "model_s": model,
        "overhead_share": (wall - model) / wall if wall else 0.0,
        "llm_calls": len(calls),
        "completion_tokens": completion,
        "decode_tps": completion / decode_s if decode_s else 0.0,
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "prompt_tokens_evaluated": evaluated,
        "prompt_tokens_new": new,
        "evaluated_over_new": evaluated / new if new else 0.0,
        "tool_calls": len(result.tool_calls),
        "tool_calls_valid": valid,
        "stopped": result.stopped,
    }


def run_openai_calls(executor: Executor, tool_calls: list[dict[str, Any]], messages: list[dict[str, Any]]) -> int:
    """Run a peer's OpenAI-style tool calls, append each result as a `tool` message; how many were valid."""
    valid = 0
    for tc in tool_calls:
        try:
            args = json.loads(tc["function"].get("arguments") or "{}")
        except json.JSONDecodeError:
            args = {"_unparseable": True}
        outcome = executor.execute(tc["function"]["name"], args)
        valid += outcome.error_kind not in ("invalid_arguments", "not_found")
        messages.append({"role": "tool", "tool_call_id": tc.get("id", ""), "content": outcome.to_json()})
    return valid
