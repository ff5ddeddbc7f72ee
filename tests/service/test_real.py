"""`hermes-local serve` on the embedded SmolLM2 GGUF through llama.cpp, driven over real HTTP.

A run to completion with a forced tool call (events streamed and logged, its replies as live token
events), and the official openai client: plain chat, a forced tool call whose arguments parse, a tool
result round trip, streaming. The small model is not smart: the checks are about shapes, not answers.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import openai
import pytest

from hermes_local.session import read_events, session_path
from tests.fixtures.service_server import http, served, sse_events, wait_status

pytestmark = pytest.mark.real_model

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_run_with_a_forced_tool_call(real_llm, workspace: Path) -> None:
    with served(real_llm, workspace, max_tokens=48, deny_tools=["final_answer"]) as (base, _):
        body = {"task": "What time is it?", "tool_choice": "required", "max_steps": 1, "tools": ["get_current_time"]}
        status, created = http("POST", f"{base}/v1/runs", body)
        assert status == 202
        events = sse_events(f"{base}/v1/runs/{created['id']}/events")
        view = wait_status(base, created["id"], {"done", "error"})
    assert view["status"] == "done", view
    result = view["result"]
    assert [c["name"] for c in result["tool_calls"]] == ["get_current_time"] and result["tool_calls"][0]["ok"]
    assert result["usage"]["prompt_tokens_evaluated"] > 0
    logged = [e.to_dict() for e in read_events(session_path(created["id"]))]
    assert [data for name, data in events if name not in ("status", "token")] == logged
    tokens = "".join(data["text"] for name, data in events if name == "token")  # the reply, streamed live
    replies = [data["text"] for name, data in events if name == "assistant"]
    streamed = " ".join(tokens.split())  # each reply was streamed (a small model may write on past its call)
    assert replies and all(" ".join(r.split()) in streamed for r in replies), (tokens, replies)


def test_openai_client_on_the_real_model(real_llm, workspace: Path) -> None:
    with served(real_llm, workspace) as (base, _):
        c = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        user = [{"role": "user", "content": "Say hello."}]
        plain = c.chat.completions.create(model="smollm2", messages=user, max_tokens=16, temperature=0)  # type: ignore[arg-type]
        forced = c.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "What is the weather in Paris?"}],
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            max_tokens=96,
        )
        [call] = forced.choices[0].message.tool_calls or []
        round_trip = c.chat.completions.create(
            model="smollm2",
            messages=[
                {"role": "user", "content": "What is the weather in Paris?"},
                forced.choices[0].message.model_dump(exclude_none=True),  # type: ignore[list-item]
                {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 18, "sky": "clear"}'},
            ],
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice="none",
            max_tokens=24,
        )
        stream = c.chat.completions.create(
            model="smollm2",
            messages=user,  # type: ignore[arg-type]
            max_tokens=16,
            temperature=0,
            stream=True,
        )
        chunks = list(stream)
    assert isinstance(plain.choices[0].message.content, str) and plain.usage and plain.usage.completion_tokens > 0
    assert forced.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)  # grammar-constrained: always parses
    assert isinstance(round_trip.choices[0].message.content, str)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert streamed == (plain.choices[0].message.content or "")  # greedy: the same text


def test_a_huge_max_length_is_decoded_in_bounded_memory(real_llm, workspace: Path) -> None:
    import resource

    note = {
        "type": "function",
        "function": {
            "name": "save_note",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 50_000_000}},  # grew serve past 3.3 GB
                "required": ["text"],
            },
        },
    }
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with served(real_llm, workspace) as (base, _):
        body = {
            "messages": [{"role": "user", "content": "Save a note that says: buy milk."}],
            "tools": [note],
            "tool_choice": "required",
            "max_tokens": 24,
        }
        request = urllib.request.Request(
            f"{base}/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=600) as response:  # a loaded CPU: the same as a plain string
            reply = json.loads(response.read())
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert reply["choices"][0]["finish_reason"] in ("tool_calls", "length")
    assert grown_mb < 500, grown_mb
