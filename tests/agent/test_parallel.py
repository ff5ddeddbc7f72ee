"""Several calls in one assistant turn: reads run concurrently, writes keep their order, results stay in order."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hermes_local.config import load_settings
from hermes_local.events import Event, ToolCallStarted, ToolFinished
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, ToolRegistry, tool

BARRIER = threading.Barrier(2, timeout=10)
ORDER: list[str] = []
LOCK = threading.Lock()


@tool
def meet(who: str) -> str:
    """Wait until a second reader arrives (fails if the two never run at the same time).

    Args:
        who: Who is waiting.
    """
    BARRIER.wait()
    return f"{who} met"


@tool
def slow_read(seconds: float) -> str:
    """Sleep, then answer.

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    with LOCK:
        ORDER.append(f"read{seconds}")
    return f"slept {seconds}"


@tool(permission="write")
def record(tag: str) -> str:
    """Record a tag (a write).

    Args:
        tag: The tag.
    """
    with LOCK:
        ORDER.append(tag)
    return tag


def one_turn(*calls: str) -> str:
    return "\n".join(calls)


def run(workspace: Path, text: str, events: list[Event] | None = None):
    registry = ToolRegistry([meet, slow_read, record])
    llm = ScriptedLLM([text, "done"])
    agent = build_agent(
        llm,
        load_settings({"tool_timeout": 30}),
        workspace=workspace,
        registry=registry,
        approver=Approver(allow=["record"], interactive=False),
        on_event=events.append if events is not None else None,
    )
    return agent.run("go")


def test_two_reads_of_one_turn_run_at_the_same_time(workspace: Path) -> None:
    BARRIER.reset()
    result = run(workspace, one_turn(tool_call_text("meet", who="a"), tool_call_text("meet", who="b")))
    assert [(c.ok, c.data) for c in result.tool_calls] == [(True, "a met"), (True, "b met")]


def test_two_two_second_reads_take_about_two_seconds(workspace: Path, capsys) -> None:
    started = time.monotonic()
    result = run(workspace, one_turn(tool_call_text("slow_read", seconds=2), tool_call_text("slow_read", seconds=2.0)))
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(f"\ntwo 2-second reads in one turn: {elapsed:.2f} s")
    assert all(c.ok for c in result.tool_calls)
    assert elapsed < 3.8  # run one after the other they would take at least 4 s


def test_writes_keep_their_order_and_results_come_back_in_call_order(workspace: Path) -> None:
    ORDER.clear()
    events: list[Event] = []
    text = one_turn(
        tool_call_text("slow_read", seconds=0.6),
        tool_call_text("slow_read", seconds=0.1),
        tool_call_text("record", tag="w1"),
        tool_call_text("slow_read", seconds=0.2),
        tool_call_text("record", tag="w2"),
    )
    result = run(workspace, text, events)
    assert [c.arguments for c in result.tool_calls] == [
        {"seconds": 0.6},
        {"seconds": 0.1},
        {"tag": "w1"},
        {"seconds": 0.2},
        {"tag": "w2"},
    ]
    # the two first reads overlap (the short one finishes first); the writes are barriers in order
    assert ORDER == ["read0.1", "read0.6", "w1", "read0.2", "w2"]
    finished = [e.outcome.arguments for e in events if isinstance(e, ToolFinished)]
    assert finished == [c.arguments for c in result.tool_calls]
    kinds = [type(e).__name__ for e in events if isinstance(e, ToolCallStarted | ToolFinished)]
    assert kinds[:4] == ["ToolCallStarted", "ToolCallStarted", "ToolFinished", "ToolFinished"]
