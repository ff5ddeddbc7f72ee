"""Issue 42 on the scripted model: a run's outcome comes from what the tools did, never from the model's words.

Each case is a run a small model really produced on an everyday task (an answer after a failed read, a made-up
total, a bounced answer said again, a write never made, a denial, the step limit), checked for its outcome, its
evidence, its bounce and its exit code; and a plan-only write outside the workspace refused, never proposed.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.agent.evidence import Need, judge, unsupported_figures, unsupported_names, unused_files
from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.events import Event, Guarded, Proposal, TurnAdded
from hermes_local.outcome import ToolOutcome, ToolResult
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text, write_replay
from hermes_local.tools import Approver

call = tool_call_text
ORDERS = "id,customer,amount,status\n1,ann,1200.50,paid\n2,bob,799.25,open\n3,cy,42,paid\n"


def run(workspace: Path, script: list[str], goal: str, events: list[Event] | None = None, **settings: object):
    approver = Approver(allow=["run_shell"], interactive=False)
    agent = build_agent(
        ScriptedLLM(script), load_settings(settings), workspace=workspace, approver=approver, on_event=events.append
        if events is not None else None,
    )  # fmt: skip
    with agent:
        return agent.run(goal)


def test_an_answer_after_the_only_call_failed_goes_back_once_then_ends_unverified(workspace: Path) -> None:
    events: list[Event] = []
    wrong = call("read_file", path="order.csv")  # after the bounce the next step must call a tool
    script = [wrong, "The total is 10.", wrong, "The total is 10."]
    result = run(workspace, script, "What is the total amount in orders.csv?", events)
    assert result.stopped == "answer" and result.answer == "The total is 10."
    assert [g["reason"] for g in result.guarded] == ["no_success"]
    [bounce] = [e for e in events if isinstance(e, Guarded)]
    assert bounce.reason == "no_success"
    notes = [str(e.content) for e in events if isinstance(e, TurnAdded) and e.role == "user"]
    said = "You answered, but no tool call succeeded: read_file not_found; the last error was: "
    assert any(said in note for note in notes), notes
    assert result.outcome == "unverified" and result.exit_code == 6
    assert result.evidence.startswith("no tool call succeeded: read_file not_found ×2; the last error was: ")
    assert result.to_json()["outcome"] == "unverified"


def test_a_figure_in_no_tool_result_goes_back_and_the_real_one_is_done(workspace: Path) -> None:
    (workspace / "orders.csv").write_text(ORDERS)
    script = [call("read_file", path="orders.csv"), "There are 17 orders.", "There are 3 orders; ann paid 1200.50."]
    result = run(workspace, script, "How many orders are in orders.csv?")
    assert [g["reason"] for g in result.guarded] == ["figures"]
    assert result.outcome == "done" and result.exit_code == 0 and result.evidence == "succeeded: read_file"
    script = [call("read_file", path="orders.csv"), "Total: 2041.75", "Total: 2041.75", "Total: 2041.75"]
    made_up = run(workspace, script, "Sum orders.csv")
    assert [g["reason"] for g in made_up.guarded] == ["figures", "repeated"]  # bounded: two bounces at most
    assert made_up.outcome == "unverified" and "2041.75" in made_up.evidence and made_up.exit_code == 6


def test_a_bounced_answer_said_again_after_a_call_is_unverified(workspace: Path) -> None:
    (workspace / "todo.txt").write_text("TODO: call Bob\n")
    said = "Done, I found them."
    script = [said, call("read_file", path="todo.txt"), said, said]  # said again after the read: once more
    result = run(workspace, script, "Find the TODO lines in todo.txt")
    assert [g["reason"] for g in result.guarded] == ["no_tool", "repeated"]
    assert result.outcome == "unverified" and "repeats" in result.evidence


def test_knowledge_is_answered_and_a_goal_with_no_call_is_not(workspace: Path) -> None:
    assert run(workspace, ["Four."], "What is 2 + 2?").outcome == "answered"
    lazy = run(workspace, ["It is noon."], "What time is it?", answer_guard=False)
    assert lazy.outcome == "unverified" and lazy.evidence == "no tool was called" and lazy.exit_code == 6


def test_a_goal_asking_for_a_change_needs_a_write_that_worked(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("meeting at 3\n")
    script = [call("read_file", path="notes.txt"), "Summarised into summary.md.", "Done: summary.md is written."]
    result = run(workspace, script, "Summarise notes.txt into summary.md")
    assert [g["reason"] for g in result.guarded] == ["files"]  # no call used summary.md: sent back once
    assert result.outcome == "unverified" and "nothing in the workspace changed" in result.evidence
    assert not (workspace / "summary.md").exists()


def test_a_command_that_exits_non_zero_is_a_failure_and_backs_nothing(workspace: Path) -> None:
    script = [call("run_shell", command="nosuchcommand"), "Renamed.", "Renamed."]
    result = run(workspace, script, "Rename all .txt files to .md")
    [shell] = [c for c in result.tool_calls if c.name == "run_shell"]
    assert not shell.ok and shell.summary.startswith("run_shell failed: exit 127")
    assert result.outcome == "unverified" and "run_shell tool_error" in result.evidence


def test_denied_failed_and_cannot(workspace: Path) -> None:
    write = call("write_file", path="a.txt", content="x")
    denied = build_agent(ScriptedLLM([write, "Saved."]), load_settings({}), workspace=workspace, approver=Approver())
    with denied:
        result = denied.run("Save x to a.txt")
    assert result.outcome == "denied" and result.exit_code == 7 and "write_file permission_denied" in result.evidence
    limit = run(workspace, [call("get_current_time")] * 2 + [""], "What time is it?", max_steps=2)
    assert limit.outcome == "failed" and limit.exit_code == 3
    cannot = run(workspace, [call("read_file", path="x.txt"), "I cannot find x.txt."], "Read x.txt")
    assert cannot.outcome == "failed" and cannot.exit_code == 1 and cannot.guarded == []


def test_judge_on_its_own() -> None:
    ok = ToolOutcome(1, "read_file", {"path": "a"}, ToolResult.success("total 2,041.75 on 2026-12-05", "read"))
    assert unsupported_figures("It is 2041.75 (05 Dec 2026), 3 rows", [ok], "") == []
    assert unsupported_figures("It is 2041.70", [ok], "") == ["2041.7"]
    assert unsupported_figures("Top 10 rows", [ok], "show the top 10") == []
    need = Need(tool="read_file", user_text="sum a")
    assert judge("2041.75", "answer", [ok], need).outcome == "done"
    assert judge(None, "max_steps", [ok], need, why="the step limit").outcome == "failed"
    assert judge("x", "answer", [], Need()).outcome == "answered"
    clock = ToolOutcome(1, "get_current_time", {}, ToolResult.success("2026-12-05T08:13:03+00:00", "time"))
    time_need = Need(tool="get_current_time", user_text="What time is it?")
    assert judge("It is 8:13 in the morning.", "answer", [clock], time_need).outcome == "done"
    ready = judge("I'm ready to help. What's your next question?", "answer", [ok], need)
    assert ready.outcome == "failed" and "answers nothing" in ready.evidence  # issue 42: a non-answer is no success


def test_a_name_in_no_tool_result_is_unverified_on_a_question_and_the_real_one_is_done() -> None:
    """Issue 42 item 1: names in the answer that appear in no tool result and no user text are not evidence."""
    rows = ToolResult.success('[{"customer": "Ann Lee", "total": 120}]', "1 row")
    query = ToolOutcome(1, "query_database", {"sql": "SELECT ..."}, rows)
    need = Need(tool="query_database", user_text="Who is our top customer?")
    made_up = judge("The top customer is Bob Marsh.", "answer", [query], need)
    assert made_up.outcome == "unverified" and made_up.evidence.endswith("no tool result: Bob, Marsh")
    assert judge("The top customer is Ann Lee, on 05 Dec.", "answer", [query], need).outcome == "done"
    assert unsupported_names("Bob wrote it. It was sent on Monday to Ann.", [query], "") == []  # first words, dates
    change = Need(tool="write_file", user_text="Note the top customer in memo.md", change=True)
    write = ToolOutcome(2, "write_file", {"path": "memo.md"}, ToolResult.success("wrote memo.md", "write"))
    assert (
        judge("Noted it in Markdown for Ann.", "answer", [query, write], change, changed={"memo.md"}).outcome == "done"
    )


def test_plan_only_write_outside_the_workspace_is_refused_not_proposed(workspace: Path) -> None:
    events: list[Event] = []
    script = [call("write_file", path="../ideas.md", content="x"), "Added it to ideas.md.", "Added it to ideas.md."]
    agent = build_agent(
        ScriptedLLM(script), load_settings({}), workspace=workspace, approver=Approver(), on_event=events.append,
        plan=True,
    )  # fmt: skip
    with agent:
        result = agent.run("Add a line to ../ideas.md")
    [outside] = result.tool_calls[:1]
    assert not outside.ok and "outside the workspace" in (outside.error or "") and outside.approval != "proposed"
    assert not [e for e in events if isinstance(e, Proposal)] and result.proposals() == []
    assert result.outcome != "done"


def test_the_cli_exit_code_and_outcome_line(tmp_path: Path, workspace: Path) -> None:
    nope = call("read_file", path="nope.txt")
    replay = write_replay(tmp_path / "r.jsonl", [nope, "It says hi.", nope, "It says hi."])
    args = ["run", "What does nope.txt say?", "--workspace", str(workspace), "--model", f"replay:{replay}"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 6, res.output
    assert "outcome: unverified (no tool call succeeded: read_file not_found" in res.stderr
    res = CliRunner().invoke(app, ["sessions", "list"])
    assert "unverified" in res.stdout and "-> It says hi." in res.stdout
    sid = res.stdout.split()[0]
    shown = CliRunner().invoke(app, ["sessions", "show", sid]).stdout
    assert "outcome: unverified (no tool call succeeded" in shown
    stats = json.loads(CliRunner().invoke(app, ["stats", "--json"]).stdout)
    assert stats["results"]["unverified"] == 1 and stats["success_rate"] == 0.0


def test_sessions_apply_prints_the_tools_own_reason(workspace: Path) -> None:
    """A proposal logged before plan-only runs checked paths: apply says why it fails, never "not approved"."""
    from hermes_local.events import RunEnd, RunStart
    from hermes_local.session import SessionLog

    with SessionLog(None) as log:
        log.log(RunStart("Add to ../ideas.md", [], workspace=str(workspace.resolve()), plan=True))
        log.log(Proposal(1, "write_file", {"path": "../ideas.md", "content": "x"}))
        log.log(RunEnd({"answer": "Added.", "stopped": "answer"}))
        sid = log.id
    res = CliRunner().invoke(app, ["sessions", "apply", sid, "--yes"])
    assert res.exit_code == 1 and "outside the workspace" in res.stdout and "not approved" not in res.stdout
    assert not (workspace.parent / "ideas.md").exists()


def test_the_change_is_read_from_the_checkpoints_and_information_from_a_read(tmp_path: Path, workspace: Path) -> None:
    """From the embedded model's runs: `ls` run for "rename", a memo written for "which customer": no success."""
    (workspace / "a.txt").write_text("alpha\n")
    replay = write_replay(tmp_path / "r.jsonl", [call("run_shell", command="ls"), "Renamed them."])
    args = ["run", "Rename all .txt files in this folder to .md", "--allow", "run_shell", "--json"]
    res = CliRunner().invoke(app, [*args, "--workspace", str(workspace), "--model", f"replay:{replay}"])
    out = json.loads(res.stdout)
    assert res.exit_code == 6 and "nothing in the workspace changed" in out["evidence"], out
    memo = [call("append_to_memo", content="ann"), "ann buys most.", "ann buys most of all."]  # one bounce: orders.csv
    replay = write_replay(tmp_path / "m.jsonl", memo)
    args = ["run", "Which customer buys most, in orders.csv?", "--yes", "--json", "--workspace", str(workspace)]
    out = json.loads(CliRunner().invoke(app, [*args, "--model", f"replay:{replay}"]).stdout)
    assert out["outcome"] == "unverified" and "only writes succeeded" in out["evidence"], out
    mv = write_replay(tmp_path / "mv.jsonl", [call("run_shell", command="mv a.txt a.md"), "Renamed a.txt."])
    args = ["run", "Rename all .txt files in this folder to .md", "--allow", "run_shell", "--json"]
    out = json.loads(CliRunner().invoke(app, [*args, "--workspace", str(workspace), "--model", f"replay:{mv}"]).stdout)
    assert out["outcome"] == "done" and (workspace / "a.md").exists(), out


def test_an_answer_that_says_nothing_any_result_says_is_unverified() -> None:
    """Issue 42 item 1: an answer with words of its own and none of any result's does not depend on the call."""
    clock = ToolOutcome(1, "get_current_time", {}, ToolResult.success("2026-12-05T12:26:14+00:00", "now"))
    need = Need(tool="get_current_time", user_text="What time is it?")
    meta = judge("This tool is not available in the current time.", "answer", [clock], need)
    assert meta.outcome == "unverified" and meta.evidence.startswith("the answer says nothing that any tool result")
    assert judge("It is 12:26.", "answer", [clock], need).outcome == "done"
    listing = ToolOutcome(
        1, "list_dir", {}, ToolResult.success({"path": "docs", "entries": [{"name": "plan.md"}]}, "2")
    )
    found = Need(tool="list_dir", user_text="Find the launch date in my docs folder.")
    junk = "You're right, I'm not a tool. You can't write your own response to the question."
    assert judge(junk, "answer", [listing], found).outcome == "unverified"
    assert judge("The launch plan lives in docs, see plan.md.", "answer", [listing], found).outcome == "done"  # shares
    assert judge("Yes.", "answer", [listing], found).outcome == "done"  # too short to judge by its words
    empty = ToolOutcome(1, "list_dir", {}, ToolResult.success({"path": "docs", "entries": []}, "0"))
    assert judge("The folder holds nothing whatsoever yet.", "answer", [empty], found).outcome == "done"
    wrote = ToolOutcome(1, "write_file", {"path": "src/app.py"}, ToolResult.success({"bytes": 9}, "ok"))
    made = Need(tool="write_file", user_text="Write the app and its notes", writers=frozenset({"write_file"}))
    said = judge("Created the application; its notes were not approved.", "answer", [wrote], made)
    assert said.outcome == "done", said  # a write's receipt is not something read: the rule has nothing to judge by


def test_a_question_followed_by_a_hint_is_a_question(workspace: Path) -> None:
    """ "Where is the meeting? The details are in notes.txt." answered after only overwriting notes.txt."""
    from hermes_local.testing import ScriptedLLM, build_agent
    from hermes_local.tools import Approver

    goal = "Where is the team meeting? The details are in notes.txt."
    script = [call("write_file", path="notes.txt", content="x"), "It is in Room 4B.", "It is in Room 4B."]
    approver = Approver(allow=["write_file"])
    with build_agent(ScriptedLLM(script), load_settings({}), workspace=workspace, approver=approver) as agent:
        result = agent.run(goal)
    assert result.outcome == "unverified" and "only writes succeeded" in result.evidence


def test_an_answer_about_a_file_no_call_used_is_unverified() -> None:
    """Seen on a real Gemma 3 270M run: `cat /dev/null` succeeded, then "mendatang mendatang" answered "What does
    notes.txt say?" and was judged done (exit 0). A file the goal names must be used by some call."""
    shell = ToolOutcome(1, "run_shell", {"command": "cat /dev/null"}, ToolResult.success("", "run_shell exit 0"))
    need = Need(tool="read_file", user_text="What does notes.txt say?", question=True)
    verdict = judge("mendatang mendatang", "answer", [shell], need)
    assert verdict.outcome == "unverified"
    assert verdict.evidence.startswith("the goal names notes.txt and no tool call used it")
    read = ToolOutcome(2, "read_file", {"path": "./Notes.TXT"}, ToolResult.success("hello world", "read"))
    assert judge("It says hello world.", "answer", [shell, read], need).outcome == "done"
    gone = ToolOutcome(1, "read_file", {"path": "secret.txt"}, ToolResult.failure("not_found", "no such file"))
    listing = ToolOutcome(2, "list_dir", {"path": "."}, ToolResult.success(["a.txt"], "1 entry"))
    assert unused_files("Is there a data/secret.txt here?", [gone, listing]) == []  # a failed try is evidence too
    assert unused_files("Copy a.txt to b.md", [listing]) == ["a.txt", "b.md"]  # a listing that shows it is no use
    assert unused_files("How many rows in shop.db?", [listing]) == []  # query_database never names its file
    cut = ToolOutcome(2, "slow_write", {"filename": "out.txt"}, ToolResult.failure("tool_error", "interrupted"))
    assert unused_files("Note A, then write out.txt", [cut]) == []  # as a question's evidence it would count
    assert unused_files("Note A, then write out.txt", [cut], change=True) == ["out.txt"]  # a change needs it done


def test_an_answer_about_a_file_no_call_used_goes_back_once(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("meet Ann at noon\n")
    script = [call("get_current_time"), "It says nothing.", call("read_file", path="notes.txt"), "Meet Ann at noon."]
    result = run(workspace, script, "What does notes.txt say?")
    assert [g["reason"] for g in result.guarded] == ["files"]
    assert result.outcome == "done" and result.answer == "Meet Ann at noon."
