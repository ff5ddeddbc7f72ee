"""The per-run result cache of read tools, its invalidation by writes, and the optional cross-run TTL."""

from __future__ import annotations

import json
from pathlib import Path

from hermes_local.config import load_settings
from hermes_local.events import Event, ToolFinished
from hermes_local.session import SessionLog, read_events, session_path
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, default_registry, tool

call = tool_call_text
RUNS: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up (counts its real runs).

    Args:
        key: The key.
    """
    RUNS.append(key)
    return f"value of {key}"


@tool(cache_ttl=3600)
def slow_lookup(key: str) -> str:
    """Look a key up slowly; results may be reused for an hour.

    Args:
        key: The key.
    """
    RUNS.append("slow:" + key)
    return f"slow value of {key}"


def make_agent(llm: ScriptedLLM, workspace: Path, events: list[Event] | None = None, **settings: object):
    registry = default_registry()
    registry.register(lookup)
    registry.register(slow_lookup)
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=registry,
        approver=Approver(allow=["append_to_memo", "write_file"], interactive=False),
        on_event=events.append if events is not None else None,
    )


def test_identical_read_call_is_served_from_the_cache(workspace: Path) -> None:
    RUNS.clear()
    (workspace / "notes.txt").write_text("first version\n")
    llm = ScriptedLLM(
        [call("read_file", path="notes.txt"), call("lookup", key="a"), call("read_file", path="notes.txt"), "ok"]
    )
    events: list[Event] = []
    agent = make_agent(llm, workspace, events)
    session = SessionLog()
    agent.on_event = lambda e: (events.append(e), session.log(e))
    result = agent.run("read notes.txt")
    session.close()
    assert [c.result.cached for c in result.tool_calls] == [False, False, True]
    assert result.tool_calls[2].data == result.tool_calls[0].data
    briefs = result.to_json()["tool_calls"]
    assert [b["cached"] for b in briefs] == [False, False, True]
    logged = [e for e in read_events(session_path(session.id)) if isinstance(e, ToolFinished)]
    assert [e.outcome.result.cached for e in logged] == [False, False, True]
    raw = [json.loads(line) for line in session_path(session.id).read_text().splitlines()]
    assert [r.get("cached") for r in raw if r["kind"] == "tool_result"] == [None, None, True]


def test_cached_call_does_not_run_the_tool_again(workspace: Path) -> None:
    RUNS.clear()
    llm = ScriptedLLM([call("lookup", key="a"), call("lookup", key="b"), call("lookup", key="a"), "ok"])
    make_agent(llm, workspace).run("look up")
    assert RUNS == ["a", "b"]


def test_a_write_in_between_invalidates_the_cache(workspace: Path) -> None:
    RUNS.clear()
    (workspace / "notes.txt").write_text("old\n")
    outputs = [
        call("read_file", path="notes.txt"),
        call("write_file", path="notes.txt", content="new\n"),
        call("read_file", path="notes.txt"),
        call("lookup", key="a"),
        call("append_to_memo", content="x"),
        call("lookup", key="a"),
        "ok",
    ]
    result = make_agent(ScriptedLLM(outputs), workspace, max_steps=8).run("update notes.txt")
    assert [c.result.cached for c in result.tool_calls] == [False] * 6
    assert "new" in result.tool_calls[2].data and RUNS == ["a", "a"]


def test_volatile_tools_are_never_cached(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), call("lookup", key="x"), call("get_current_time"), "ok"])
    result = make_agent(llm, workspace).run("time")
    assert not any(c.result.cached for c in result.tool_calls)


def test_each_run_starts_with_an_empty_cache(workspace: Path) -> None:
    RUNS.clear()
    agent = make_agent(ScriptedLLM([call("lookup", key="a"), "ok", call("lookup", key="a"), "ok"]), workspace)
    agent.run("one")
    second = agent.run("two")
    assert RUNS == ["a", "a"] and not second.tool_calls[0].result.cached


def test_cross_run_ttl_from_the_declaration_or_the_config(workspace: Path) -> None:
    RUNS.clear()
    make_agent(ScriptedLLM([call("slow_lookup", key="k"), "ok"]), workspace).run("one")
    second = make_agent(ScriptedLLM([call("slow_lookup", key="k"), "ok"]), workspace).run("two")
    assert RUNS == ["slow:k"] and second.tool_calls[0].result.cached
    # off by default for other tools; config cache_ttl = {lookup = SECONDS} turns it on
    make_agent(ScriptedLLM([call("lookup", key="k"), "ok"]), workspace).run("three")
    assert (
        not make_agent(ScriptedLLM([call("lookup", key="k"), "ok"]), workspace).run("four").tool_calls[0].result.cached
    )
    make_agent(ScriptedLLM([call("lookup", key="z"), "ok"]), workspace, cache_ttl={"lookup": 60}).run("five")
    sixth = make_agent(ScriptedLLM([call("lookup", key="z"), "ok"]), workspace, cache_ttl={"lookup": 60}).run("six")
    assert sixth.tool_calls[0].result.cached and RUNS.count("z") == 1
