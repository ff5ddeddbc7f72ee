"""Plan-only runs and hand-offs in the loop itself (the library API: `build_agent(plan=True)`), scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.events import Event, Proposal, ToolFinished
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, default_registry

call = tool_call_text


def agent(llm: ScriptedLLM, workspace: Path, events: list[Event], *, plan: bool, **settings: object):
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(allow=["write_file"], interactive=False),
        on_event=events.append,
        plan=plan,
    )


def test_deny_tools_still_refuse_a_call_in_a_plan_and_reads_run(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    events: list[Event] = []
    llm = ScriptedLLM([call("read_file", path="a.txt"), call("run_shell", command="ls"), "Done."])
    result = agent(llm, workspace, events, plan=True, deny_tools=["run_shell"]).run("Read a.txt and list files")
    assert [(o.name, o.ok, o.approval) for o in result.tool_calls] == [
        ("read_file", True, "read"),
        ("run_shell", False, ""),
    ]
    assert "alpha" in result.tool_calls[0].data and not any(isinstance(e, Proposal) for e in events)


def test_a_resumed_plan_run_stays_plan_only(workspace: Path) -> None:
    events: list[Event] = []
    script = [call("write_file", path="one.md", content="1"), call("write_file", path="two.md", content="2"), "Done."]

    def killed_after_the_first_call(event: Event) -> None:
        events.append(event)
        if isinstance(event, ToolFinished):
            raise KeyboardInterrupt  # the run is killed here; its log ends with this event

    first = agent(ScriptedLLM(script[:1]), workspace, [], plan=True)
    first.on_event = killed_after_the_first_call
    with pytest.raises(KeyboardInterrupt):
        first.run("Write one.md and two.md")
    logged = list(events)
    more: list[Event] = []
    resumed = agent(ScriptedLLM(script[1:]), workspace, more, plan=False).resume(logged)
    assert resumed.stopped == "answer" and list(workspace.iterdir()) == []
    assert [e.arguments["path"] for e in more if isinstance(e, Proposal)] == ["two.md"]


def test_the_failure_cap_hands_off_with_the_goal_left(workspace: Path) -> None:
    events: list[Event] = []
    llm = ScriptedLLM([call("read_file", path=f"missing{i}.md") for i in range(2)] + ["Sorry."])
    capped = agent(llm, workspace, events, plan=False)
    capped.config.max_consecutive_failures = 2
    result = capped.run("Summarise the report")
    assert result.stopped == "error" and result.handoff is not None
    assert result.handoff["why"] == "2 steps in a row had only failed tool calls"
    assert [line.split(" →")[0] for line in result.handoff["failed"]] == [
        "step 1: read_file missing0.md",
        "step 2: read_file missing1.md",
    ]
    assert result.handoff["done"] == [] and result.handoff["left"] == "the rest of the goal: Summarise the report"
    assert [e for e in events if isinstance(e, ToolFinished)][-1].outcome.error_kind == "not_found"


def test_a_hand_off_says_a_repeated_failure_once_with_its_count() -> None:
    """Seen on Gemma 3 270M: one step of 26 identical refused calls filled the hand-off with 8 copies."""
    from hermes_local.agent.result import handoff
    from hermes_local.outcome import ToolOutcome, ToolResult

    looped = [
        ToolOutcome(5, "run_shell", {"command": "cat /dev/null"}, ToolResult.failure("loop", "repeated"))
        for _ in range(26)
    ]
    missing = ToolOutcome(4, "read_file", {"path": "a.md"}, ToolResult.failure("not_found", "no such file"))
    failed = handoff([missing, *looped], "Read a.md", "", "it gave up")["failed"]
    assert len(failed) == 2 and failed[0].startswith("step 4: read_file a.md")
    assert failed[1].startswith("step 5: run_shell cat /dev/null") and failed[1].endswith("(×26)")
