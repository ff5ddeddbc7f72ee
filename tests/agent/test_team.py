"""A team on one model (issue 30): profiles, the `delegate` tool, child sessions, envelopes, the router.

The real loop, real tools and real files (writes land in the workspace); the scripted model stands in for the
model's choices, parent and specialist drawing from one script in the order they ask.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hermes_local.agent.router import route, route_rules
from hermes_local.agent.team import Role
from hermes_local.cli.app import app
from hermes_local.config import Settings, config_file, load_settings
from hermes_local.errors import UserError
from hermes_local.events import Delegation, Routed, RunStart
from hermes_local.llm import DEFAULT_OPTIONS
from hermes_local.runtime import build_registry, check_team
from hermes_local.session import SessionLog, read_events, read_records, sessions_dir
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text, write_replay
from hermes_local.tools import Approver
from hermes_local.tools.approval import ApprovalRequest

PROFILES: dict[str, Any] = {
    "analyst": {
        "description": "Answers questions about the sales data with read-only SQL.",
        "tools": ["db", "read_file"],
        "keywords": ["sql", "revenue", "customers", "orders"],
        "max_steps": 4,
    },
    "writer": {
        "description": "Writes reports and notes as files in the workspace.",
        "instructions": "Write plain, short prose.",
        "tools": ["read_file", "write_file"],
        "keywords": ["write", "report", "draft"],
        "max_steps": 3,
    },
    "researcher": {
        "description": "Reads files and allow-listed web pages and sums up what they say.",
        "tools": ["read_file", "list_dir", "web"],
        "keywords": ["research", "look up", "summarise", "summarize"],
    },
}


def team_settings(**extra: Any) -> Settings:
    return load_settings({"agents": PROFILES, **extra})


def delegate_call(agent: str, task: str, **inputs: Any) -> str:
    return tool_call_text("delegate", agent=agent, task=task, **({"inputs": inputs} if inputs else {}))


def run_team(
    workspace: Path,
    script: list[str],
    goal: str,
    *,
    approver: Approver | None = None,
    settings: Settings | None = None,
) -> tuple[Any, SessionLog, ScriptedLLM]:
    """The manager's run on the scripted model, logged as a session (children log beside it)."""
    llm = ScriptedLLM(script)
    session = SessionLog()
    settings = settings or team_settings()
    approver = approver or Approver(allow=["write_file"], interactive=False)
    registry = build_registry((), settings)
    role = Role(session=session.id)
    agent = build_agent(
        llm, settings, workspace=workspace, registry=registry, approver=approver, on_event=session, role=role
    )
    with agent, session:
        result = agent.run(goal)
    return result, session, llm


def children_of(session: SessionLog) -> list[Delegation]:
    return [e for e in read_events(session.path) if isinstance(e, Delegation) and e.status]


def test_a_delegation_is_a_child_session_that_writes_and_returns_one_envelope(workspace: Path) -> None:
    script = [
        delegate_call("writer", "Write a two-line summary of the quarter into summary.md", quarter="Q3"),
        tool_call_text("write_file", path="summary.md", content="Q3 was good.\nSales grew."),
        "I wrote summary.md with the two lines.",
        "The writer wrote summary.md.",
    ]
    result, session, llm = run_team(workspace, script, "Have the quarter summed up in summary.md")
    llm.assert_all_used()
    assert (workspace / "summary.md").read_text() == "Q3 was good.\nSales grew."
    call = result.tool_calls[0]
    assert call.name == "delegate" and call.ok
    envelope = call.data
    keys = {"status", "answer", "files_written", "findings", "steps", "usage", "outcome", "evidence"}
    assert set(envelope) == keys
    assert envelope["status"] == "answered" and envelope["files_written"] == ["summary.md"]
    assert envelope["outcome"] == "done" and envelope["evidence"] == "succeeded: write_file"  # issue 42
    assert envelope["steps"] == 2 and envelope["usage"]["prompt_tokens"] > 0
    assert "summary.md" in envelope["answer"]
    # the parent's log names the child; the child's own log names the parent and the call first
    (link,) = children_of(session)
    assert link.agent == "writer" and link.parent == session.id and link.status == "answered"
    child_events = read_events(sessions_dir() / f"{link.child}.jsonl")
    assert isinstance(child_events[0], Delegation) and child_events[0].parent == session.id
    assert child_events[0].call == link.call
    start = next(e for e in child_events if isinstance(e, RunStart))
    assert start.goal.startswith("Write a two-line summary") and '"quarter": "Q3"' in start.goal


def test_the_specialist_sees_only_its_profile_tools_and_its_instructions(workspace: Path) -> None:
    script = [
        delegate_call("writer", "Note the time in memo.md"),
        tool_call_text("get_current_time"),  # not in the writer's profile: the ordinary not-available error
        tool_call_text("write_file", path="memo.md", content="time unknown"),
        "I could not read the clock; memo.md says so.",
        "Done.",
    ]
    result, _, llm = run_team(workspace, script, "Note the time")
    child_prompt = llm.prompt_texts[1]
    assert '"write_file"' in child_prompt and "Write plain, short prose." in child_prompt
    assert '"get_current_time"' not in child_prompt and '"delegate"' not in child_prompt
    assert '"delegate"' in llm.prompt_texts[0]  # the manager is offered it, with the specialists listed
    assert "analyst: Answers questions" in llm.prompt_texts[0]
    envelope = result.tool_calls[0].data
    assert envelope["status"] == "answered" and envelope["files_written"] == ["memo.md"]
    assert len(envelope["findings"]) == 1 and "write_file" in envelope["findings"][0]
    child = next(e for e in read_events(next(sessions_dir().glob("*.writer-*.jsonl"))) if e.kind == "tool_result")
    assert child.outcome.error_kind == "not_found"  # type: ignore[attr-defined]


def test_a_denied_write_makes_the_status_denied_even_when_the_specialist_then_answers(workspace: Path) -> None:
    script = [
        delegate_call("writer", "Write hello into a.txt"),
        tool_call_text("write_file", path="a.txt", content="hello"),
        "I was not allowed to write a.txt.",
        "The write was not approved.",
    ]
    result, _, _ = run_team(workspace, script, "Write hello into a.txt", approver=Approver(interactive=False))
    envelope = result.tool_calls[0].data
    assert envelope["status"] == "denied" and envelope["answer"].startswith("I was not allowed")
    assert any("write_file was denied" in f for f in envelope["findings"])
    assert not (workspace / "a.txt").exists()


def test_a_specialist_at_its_step_limit_returns_max_steps(workspace: Path) -> None:
    reads = [tool_call_text("list_dir", path=".") + f"\n<!-- {i} -->" for i in range(3)]
    script = [delegate_call("writer", "Look around"), *reads, "Nothing to write.", "It ran out of steps."]
    result, _, llm = run_team(workspace, script, "Look around the workspace")
    llm.assert_all_used()
    assert result.tool_calls[0].data["status"] == "max_steps"
    assert result.tool_calls[0].data["steps"] == 3  # the writer's own max_steps, not the manager's 8


def test_every_specialist_write_is_asked_on_the_callers_path_labelled_with_the_specialist(workspace: Path) -> None:
    asked: list[ApprovalRequest] = []

    def ask(request: ApprovalRequest) -> str:
        asked.append(request)
        return "y"

    script = [
        delegate_call("writer", "Put the draft in draft.txt"),
        tool_call_text("write_file", path="draft.txt", content="draft"),
        "Wrote draft.txt.",
        "Done.",
    ]
    result, _, _ = run_team(workspace, script, "Draft it", approver=Approver(ask=ask))
    assert result.tool_calls[0].data["status"] == "answered"
    (request,) = asked  # the delegation itself is not asked; the specialist's write is
    assert request.tool.name == "write_file"
    assert "specialist 'writer'" in request.note and "Put the draft in draft.txt" in request.note


def test_an_unknown_specialist_is_an_invalid_argument_and_nothing_raises_to_the_manager(workspace: Path) -> None:
    script = [delegate_call("poet", "Write a poem"), "There is no poet."]
    result, _, _ = run_team(workspace, script, "Ask a poet for a poem", settings=team_settings(answer_guard=False))
    assert result.tool_calls[0].error_kind == "invalid_arguments"
    assert "analyst" in (result.tool_calls[0].error or "")


class EngineDiesForTheSpecialist(ScriptedLLM):
    """The model fails (as a lost remote engine does) for the run whose goal starts with BROKEN."""

    def complete(self, tokens, options=DEFAULT_OPTIONS, *, on_token=None):  # type: ignore[no-untyped-def]
        if "<|im_start|>user\nBROKEN" in self.detokenize(list(tokens)):
            raise RuntimeError("the engine went away")
        return super().complete(tokens, options, on_token=on_token)


def test_a_failing_specialist_is_an_error_envelope_never_an_exception(workspace: Path) -> None:
    llm = EngineDiesForTheSpecialist([delegate_call("writer", "BROKEN: write x"), "The writer failed."])
    settings = team_settings()
    agent = build_agent(llm, settings, workspace=workspace, registry=build_registry((), settings))
    result = agent.run("Write x")
    assert result.stopped == "answer" and result.answer == "The writer failed."
    envelope = result.tool_calls[0].data
    assert envelope["status"] == "error" and "the engine went away" in envelope["answer"]


def test_nesting_is_bounded_and_never_delegates_back_to_the_caller(workspace: Path) -> None:
    profiles = json.loads(json.dumps(PROFILES))
    profiles["writer"]["tools"].append("delegate")
    profiles["analyst"]["tools"].append("delegate")
    script = [
        delegate_call("writer", "Write the revenue report"),
        delegate_call("analyst", "Total revenue?"),  # the writer may delegate: not back to itself
        "Revenue is 10.",  # the analyst, at depth 2: no delegate at all
        "Report: revenue 10.",
        "Done.",
    ]
    settings = load_settings({"agents": profiles})
    result, _, llm = run_team(workspace, script, "Write the revenue report", settings=settings)
    llm.assert_all_used()
    writer_prompt, analyst_prompt = llm.prompt_texts[1], llm.prompt_texts[2]
    assert '"delegate"' in writer_prompt and "writer:" not in writer_prompt.split('"delegate"')[1][:600]
    assert '"delegate"' not in analyst_prompt
    assert result.tool_calls[0].data["status"] == "answered"


def test_profiles_naming_a_missing_tool_or_model_are_refused_in_one_line() -> None:
    registry = build_registry(())
    bad_tool = load_settings({"agents": {"analyst": {"description": "x", "tools": ["db", "query_db"]}}})
    with pytest.raises(UserError, match=r"\[agents.analyst\] tools 'query_db' is neither a toolset"):
        check_team(registry, bad_tool)
    bad_model = load_settings({"agents": {"writer": {"description": "x", "model": "no-such-model"}}})
    with pytest.raises(UserError, match=r"\[agents.writer\] model 'no-such-model' is neither in models.toml"):
        check_team(registry, bad_model)
    bad_dialect = load_settings({"agents": {"writer": {"description": "x", "dialect": "klingon"}}})
    with pytest.raises(UserError, match=r"\[agents.writer\] dialect: unknown dialect 'klingon'"):
        check_team(registry, bad_dialect)
    with pytest.raises(UserError, match="agent name 'Bad Name'"):
        load_settings({"agents": {"Bad Name": {"description": "x"}}})
    check_team(registry, team_settings())  # the three examples are fine


ROUTING = [
    ("Which customers had the most orders last month? Use SQL.", "analyst"),
    ("Write a short report on the offsite into report.md", "writer"),
    ("Research what the README says about sandboxing and summarise it", "researcher"),
    ("Find the revenue per region with SQL, then write a report on it", "manager"),
    ("What is the weather like on Mars?", "manager"),
]


@pytest.mark.parametrize(("task", "expected"), ROUTING)
def test_the_rules_router_picks_by_keywords_and_descriptions(task: str, expected: str) -> None:
    chosen, scores, reason = route_rules(task, team_settings().agents)
    assert chosen == expected, reason
    assert set(scores) == set(PROFILES)


def test_the_model_router_is_one_short_constrained_choice() -> None:
    from hermes_local.dialects import select_dialect

    llm = ScriptedLLM(["writer"])
    settings = team_settings(router="model")
    event = route("Draft the minutes", settings, llm, select_dialect("hermes"))
    assert isinstance(event, Routed) and event.chosen == "writer" and event.router == "model"
    assert event.candidates == ["analyst", "writer", "researcher", "manager"]
    (options,) = llm.calls
    assert options.constrained and '"manager"' in (options.grammar or "") and options.max_tokens <= 16
    assert "Writes reports and notes" in llm.prompt_texts[0]


# -- the command line: agents list, run --team, sessions show, resume after kill -9 ------------------------------
TEAM_TOOLS = textwrap.dedent(
    '''
    import time
    from hermes_local.tools import ToolContext, tool

    @tool(permission="write")
    def append_line(text: str, ctx: ToolContext) -> str:
        """Append one line to log.txt in the workspace."""
        with open(ctx.workspace / "log.txt", "a") as fh:
            fh.write(text + "\\n")
        return "appended"

    @tool(permission="write", timeout=120)
    def slow_append(text: str, ctx: ToolContext) -> str:
        """Append one line to log.txt, then work for a minute."""
        with open(ctx.workspace / "log.txt", "a") as fh:
            fh.write(text + "\\n")
        time.sleep(60)
        return "appended"
    '''
)


def write_profiles(profiles: dict[str, Any], extra: str = "") -> None:
    """config.toml with these [agents.NAME] tables (values as JSON, which TOML reads for strings and lists)."""
    lines = [extra] + [
        line
        for name, p in profiles.items()
        for line in (f"[agents.{name}]", *(f"{k} = {json.dumps(v)}" for k, v in p.items()))
    ]
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_agents_list_shows_the_profiles_and_refuses_a_missing_tool_in_one_line() -> None:
    write_profiles(PROFILES)
    res = CliRunner().invoke(app, ["agents", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = {row["name"]: row for row in json.loads(res.stdout)}
    assert rows["analyst"]["resolved_tools"] == ["read_file", "query_database"]
    assert rows["writer"]["resolved_tools"] == ["read_file", "write_file"] and rows["writer"]["max_steps"] == 3
    text = CliRunner().invoke(app, ["agents", "list"]).stdout
    assert "researcher: Reads files" in text and "http_get" in text
    write_profiles({"analyst": {"description": "x", "tools": ["sql_query"]}})
    for args in (["agents", "list"], ["run", "x", "--model", "replay:/no/such/file.jsonl"]):  # before the model loads
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, res.output
        assert res.stderr.strip().splitlines() == [
            "error: [agents.analyst] tools 'sql_query' is neither a toolset (time, files, memory, db, shell, web, "
            "user) nor a tool; fix it in config.toml (see `hermes-local tools list`)"
        ]


def test_run_team_routes_logs_the_decision_and_sessions_show_prints_the_tree(tmp_path: Path, workspace: Path) -> None:
    write_profiles(PROFILES)
    replay = write_replay(
        tmp_path / "team.jsonl",
        [
            delegate_call("writer", "Write the minutes into minutes.md"),
            tool_call_text("write_file", path="minutes.md", content="We met."),
            "minutes.md is written.",
            "The writer wrote minutes.md.",
        ],
    )
    args = ["run", "Find the revenue with SQL, then write a report", "--team", "--json", "--yes"]
    res = CliRunner().invoke(app, [*args, "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["answer"] == "The writer wrote minutes.md." and (workspace / "minutes.md").read_text() == "We met."
    (link,) = out["delegations"]
    assert link["agent"] == "writer" and link["status"] == "answered"
    assert link["child"].startswith(out["session_id"] + ".writer-")
    events = read_events(sessions_dir() / f"{out['session_id']}.jsonl")
    routed = events[0]
    assert isinstance(routed, Routed) and routed.chosen == "manager" and routed.router == "rules"
    assert routed.candidates == ["analyst", "writer", "researcher", "manager"] and "analyst" in routed.reason
    shown = CliRunner().invoke(app, ["sessions", "show", out["session_id"]]).stdout
    assert "routed (rules) to manager" in shown and "⇢ delegated to writer: Write the minutes" in shown
    assert "      │    → write_file(" in shown and "⇠ writer ended: answered" in shown


def test_the_terminal_shows_the_specialists_steps_tagged_with_its_name(tmp_path: Path, workspace: Path) -> None:
    write_profiles(PROFILES)
    script = [
        delegate_call("writer", "Write the minutes into minutes.md"),
        tool_call_text("write_file", path="minutes.md", content="We met."),
        "minutes.md is written.",
        "Done.",
    ]
    replay = write_replay(tmp_path / "team.jsonl", script)
    args = ["run", "Count the orders with SQL, then write a report", "--team", "--yes", "--model", f"replay:{replay}"]
    res = CliRunner().invoke(app, [*args, "--workspace", str(workspace)])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith("routed (rules) to manager: keywords of several specialists (analyst, writer)")
    assert any(line.startswith("   ⇢ delegated to writer: Write the minutes") for line in lines)
    assert '   [writer] → write_file({"path": "minutes.md", "content": "We met."})' in lines
    assert any(line.startswith("   [writer] ✓ write_file") for line in lines)
    assert any(line.startswith("   ⇠ writer ended: answered") for line in lines)


def test_run_team_can_hand_the_task_straight_to_a_specialist(tmp_path: Path, workspace: Path) -> None:
    write_profiles(PROFILES)
    replay = write_replay(tmp_path / "one.jsonl", [tool_call_text("write_file", path="d.md", content="d"), "Drafted."])
    args = ["run", "Draft a note into d.md", "--team", "--json", "--yes", "--model", f"replay:{replay}"]
    res = CliRunner().invoke(app, [*args, "--workspace", str(workspace)])
    assert res.exit_code == 0, res.output
    session = sessions_dir() / f"{json.loads(res.stdout)['session_id']}.jsonl"
    routed = read_events(session)[0]
    assert isinstance(routed, Routed) and routed.chosen == "writer"
    calls = [e for e in read_records(session) if e["kind"] == "llm_call"]
    assert len(calls) == 2  # the writer ran the task itself: no manager step, no delegate
    # continued (as a resumed one), the session stays the writer's: the clock is not among its tools
    again = write_replay(tmp_path / "two.jsonl", [tool_call_text("get_current_time"), "I cannot tell the time."])
    args = ["run", "--continue", session.stem, "What time is it?", "--json", "--model", f"replay:{again}"]
    res = CliRunner().invoke(app, [*args, "--workspace", str(workspace), "--no-answer-guard"])
    assert res.exit_code == 1 and json.loads(res.stdout)["outcome"] == "failed", res.output  # it could not
    clock = [e for e in read_records(session) if e["kind"] == "tool_result"][-1]
    assert clock["name"] == "get_current_time" and clock["error_kind"] == "not_found"
    assert [type(e) for e in read_events(session)].count(Routed) == 1  # not routed again


def kill_when(cmd: list[str], ready: Callable[[], bool], **env: str) -> None:
    """Run `cmd` (this checkout on its path, `env` added) and kill -9 it once `ready()`; it must not end before."""
    full = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])} | env
    proc = subprocess.Popen(cmd, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached the point to kill it at"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)


def test_a_parent_killed_mid_delegation_resumes_its_child_and_never_repeats_a_finished_write(
    tmp_path: Path, workspace: Path
) -> None:
    tools = tmp_path / "team_tools.py"
    tools.write_text(TEAM_TOOLS)
    write_profiles({"logger": {"description": "Keeps the log file.", "tools": ["team_tools"], "max_steps": 5}})
    task = "Log one and two"
    first = write_replay(
        tmp_path / "first.jsonl",
        [
            delegate_call("logger", task),
            tool_call_text("append_line", text="one"),  # finished before the kill
            tool_call_text("slow_append", text="two"),  # killed while it runs
        ],
    )
    cmd = [sys.executable, "-m", "hermes_local", "run", task, "--tools-module", str(tools), "--yes"]
    log = workspace / "log.txt"
    kill_when([*cmd, "--workspace", str(workspace), "--model", f"replay:{first}"],
              lambda: log.exists() and log.read_text().count("\n") >= 2)  # fmt: skip
    (parent,) = [p.stem for p in sessions_dir().glob("*.jsonl") if ".logger-" not in p.name]
    (sub,) = [p.stem for p in sessions_dir().glob("*.logger-*.jsonl")]
    assert sub.startswith(parent + ".")

    again = write_replay(
        tmp_path / "again.jsonl",
        [
            delegate_call("logger", task),  # the manager asks again: the child resumes, it does not start over
            tool_call_text("append_line", text="one"),  # a finished write asked for again is not repeated
            "Logged one; two was cut off.",
            "The logger logged one; two may need checking.",
        ],
    )
    args = ["run", "--resume", parent, "--tools-module", str(tools), "--yes", "--json"]
    res = CliRunner().invoke(app, [*args, "--workspace", str(workspace), "--model", f"replay:{again}"])
    assert res.exit_code == 0, res.output
    assert (workspace / "log.txt").read_text() == "one\ntwo\n"  # each write happened exactly once
    records = read_records(sessions_dir() / f"{sub}.jsonl")
    assert [r["kind"] for r in records].count("run_resumed") == 1
    repeat = [r for r in records if r["kind"] == "tool_result" and r["name"] == "append_line"][-1]
    assert repeat["summary"].startswith("(already done earlier in this run; not repeated)")
    cut = next(r for r in records if r["kind"] == "turn" and "outcome unknown" in json.dumps(r))
    assert cut  # the specialist is told its slow write was cut off
    envelope = json.loads(res.stdout)["tool_calls"][-1]
    assert envelope["name"] == "delegate" and envelope["ok"]


def test_the_readme_example_profiles_load_and_resolve() -> None:
    import tomllib

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("### Teams", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text(block, encoding="utf-8")
    assert set(tomllib.loads(block)["agents"]) == {"analyst", "writer", "researcher"}
    res = CliRunner().invoke(app, ["agents", "list", "--json"])
    assert res.exit_code == 0, res.output
    tools = {row["name"]: row["resolved_tools"] for row in json.loads(res.stdout)}
    assert tools == {
        "analyst": ["read_file", "query_database"],
        "writer": ["read_file", "list_dir", "write_file"],
        "researcher": ["read_file", "list_dir", "http_get"],
    }


def test_two_delegations_of_one_turn_run_at_the_same_time(workspace: Path) -> None:
    from hermes_local.testing import ScriptsByGoal

    manager = "Sum up the data and draft the note"
    two = "\n".join([delegate_call("analyst", "Count the files"), delegate_call("writer", "Draft the note")])
    scripts = {
        manager: [two, "Both are done."],
        "Count the files": [tool_call_text("list_dir", path="."), "There are no files."],
        "Draft the note": [tool_call_text("write_file", path="note.md", content="note"), "note.md is drafted."],
    }
    delay = 0.8  # per model call: each specialist makes two calls
    walls = {}
    for parallel in (True, False):
        llm = ScriptsByGoal(scripts, delay=delay)
        settings = team_settings()
        registry = build_registry((), settings)
        agent = build_agent(
            llm, settings, workspace=workspace, registry=registry, approver=Approver(allow=["write_file"])
        )
        if not parallel:
            agent.executor.concurrent = lambda name: False  # type: ignore[method-assign]
        started = time.monotonic()
        with agent:
            result = agent.run(manager)
        walls[parallel] = time.monotonic() - started
        assert [c.data["status"] for c in result.tool_calls] == ["answered", "answered"]
        assert result.answer == "Both are done." and llm.remaining == 0
    # manager 2 calls + specialists 2 x 2 calls: one after the other 6 x delay, side by side 4 x delay
    assert walls[False] > 5.5 * delay > walls[True], walls
    print(f"\ntwo delegations in one turn: {walls[True]:.2f} s side by side, {walls[False]:.2f} s one after the other")


def test_the_labelled_routing_set_and_the_rules_router_on_it() -> None:
    """The set `scripts/team_routing.py` measures: 40+ tasks over the README's three profiles and the manager."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("team_routing", Path(__file__).parents[2] / "scripts/team_routing.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows, profiles = script.labelled(), load_settings({"agents": script.readme_profiles()}).agents
    assert len(rows) >= 40 and {r["agent"] for r in rows} == {"analyst", "writer", "researcher", "manager"}
    picks = [route_rules(r["task"], profiles)[0] for r in rows]
    scored = script.score(picks, rows)
    assert scored["accuracy"] >= 0.75, scored["wrong"]  # 34/44 when written; a drop is a routing regression


@pytest.mark.real_model
def test_a_second_small_model_routes_a_team_run(tmp_path: Path, workspace: Path, embedded_model_path: Path) -> None:
    """router_model = the embedded SmolLM2, loaded beside the main (replayed) model: its pick is constrained to a
    profile or the manager, logged, and the run goes on with the pick."""
    write_profiles(PROFILES, extra=f"router_model = {json.dumps(str(embedded_model_path))}\nn_gpu_layers = 0")
    replay = write_replay(tmp_path / "main.jsonl", ["Nothing to do."])
    args = ["run", "How many orders did we get in March? Use SQL.", "--team", "--json", "--no-answer-guard"]
    res = CliRunner().invoke(app, [*args, "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 0, res.output
    routed = read_events(sessions_dir() / f"{json.loads(res.stdout)['session_id']}.jsonl")[0]
    assert isinstance(routed, Routed) and routed.router == "router_model"
    assert routed.chosen in routed.candidates and routed.reason.startswith("the model chose")
    write_profiles(PROFILES, extra='router_model = "no-such-router"')
    res = CliRunner().invoke(app, ["agents", "list"])
    assert res.exit_code == 2 and "router_model 'no-such-router' is neither in models.toml" in res.stderr


def test_the_readme_team_command_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README, Teams: the `--team --db shop.sqlite` line with the README's profiles, the model replayed."""
    import shlex
    import sqlite3

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Teams", 1)[1].split("\n### ", 1)[0]
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text(section.split("```toml\n", 1)[1].split("```", 1)[0], encoding="utf-8")
    (line,) = [x for x in section.split("```sh\n", 1)[1].split("```", 1)[0].splitlines() if x.strip()]
    monkeypatch.chdir(tmp_path)
    with sqlite3.connect(tmp_path / "shop.sqlite") as db:
        db.executescript("CREATE TABLE orders (region TEXT, total REAL); INSERT INTO orders VALUES ('north', 10);")
    sql = "SELECT region, SUM(total) FROM orders GROUP BY region"
    script = [
        delegate_call("analyst", "Revenue per region?"),
        tool_call_text("query_database", sql=sql),
        "north: 10.",
        delegate_call("writer", "Write report.md: north 10"),
        tool_call_text("write_file", path="report.md", content="north: 10"),
        "report.md is written.",
        "Revenue per region is in report.md.",
    ]
    replay = write_replay(tmp_path / "team.jsonl", script)
    argv = shlex.split(line)[1:] + ["--model", f"replay:{replay}", "--yes", "--json"]
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [d["agent"] for d in out["delegations"]] == ["analyst", "writer"]
    assert {d["status"] for d in out["delegations"]} == {"answered"}
    assert (tmp_path / "report.md").read_text() == "north: 10"
