"""The thought of a reply reaches an HTTP client (issue 27.5): `reasoning` and `rehearsed_call` events on the SSE
stream, and `reasoning` / `rehearsed_calls` in the run's result (real uvicorn on 127.0.0.1, replay model)."""

from __future__ import annotations

from pathlib import Path

from hermes_local.testing import ScriptedLLM
from tests.fixtures.service_server import http, served, sse_events

SAMPLE = Path(__file__).parents[1] / "data" / "hermes2pro_thought_sample.txt"


def test_the_stream_carries_the_reasoning_and_the_rehearsed_call(workspace: Path) -> None:
    llm = ScriptedLLM([SAMPLE.read_text(), "It is noon."])
    with served(llm, workspace, answer_guard=False) as (base, _):  # step 1 free: the reply may think first
        _, created = http("POST", f"{base}/v1/runs", {"task": "What time is it? Note it in my memo."})
        events = sse_events(f"{base}/v1/runs/{created['id']}/events")
        _, view = http("GET", f"{base}/v1/runs/{created['id']}")
    by_kind = {name: data for name, data in events}
    assert "I should get the time first" in by_kind["reasoning"]["text"] and by_kind["reasoning"]["step"] == 1
    assert by_kind["rehearsed_call"]["name"] == "append_to_memo"
    assert [name for name, data in events if name == "tool_call"] == ["tool_call"]  # only get_current_time ran
    result = view["result"]
    assert result["rehearsed_calls"][0]["arguments"] == {"content": "The time is <time>"}
    assert result["reasoning"][0]["step"] == 1 and not (workspace / "memo.md").exists()
