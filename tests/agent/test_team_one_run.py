"""Issue 43, item 3: a team run is one run. A specialist's writes are in `sessions diff|undo PARENT` (and serve's
diff and undo of the parent run), labelled with the specialist and its step; a plan-only team run's specialist
proposals are in the parent's plan and `sessions apply PARENT` runs them; and resume after kill -9 never repeats
a finished write wherever in the child the kill lands (during the write, during a later slow read, during the
child's own final answer). Real processes killed with SIGKILL, real files, the replay model.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import tool_call_text, write_replay
from hermes_local.session import read_records, sessions_dir
from tests.agent.test_team import delegate_call, kill_when, write_profiles

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
WRITER = {"writer": {"description": "Writes notes into files.", "tools": ["files", "memory"], "max_steps": 4}}
SLOW_TOOLS = textwrap.dedent(
    '''
    import time
    from pathlib import Path
    from hermes_local.tools import ToolContext, tool

    import os
    from hermes_local.engines import replay

    _complete = replay.ReplayLLM.complete

    def complete(self, tokens, options=replay.DEFAULT_OPTIONS, *, on_token=None):
        """The model takes a minute over a reply scripted as "slow:..." (a kill lands while it answers)."""
        if self._cursor < len(self.outputs) and self.outputs[self._cursor].startswith("slow:"):
            Path(os.environ["TEAM_TEST_MARK"]).write_text("answering")
            time.sleep(60)
        return _complete(self, tokens, options, on_token=on_token)

    replay.ReplayLLM.complete = complete

    @tool(permission="read", timeout=120)
    def slow_lookup(topic: str, ctx: ToolContext) -> str:
        """Look a topic up (slowly)."""
        (ctx.workspace.parent / "lookup.started").write_text(topic)
        time.sleep(60)
        return "found"
    '''
)


def _team_run(tmp_path: Path, workspace: Path, outputs: list[str], *extra: str) -> dict:
    write_profiles(WRITER)
    replay = write_replay(tmp_path / f"t{len(list(tmp_path.glob('t*.jsonl')))}.jsonl", outputs)
    args = ["run", "Have the writer draft the notes", "--model", f"replay:{replay}", "--workspace", str(workspace)]
    res = runner.invoke(app, [*args, "--json", *extra])
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


def test_sessions_diff_and_undo_of_the_parent_include_the_specialists_writes(tmp_path: Path, workspace: Path) -> None:
    (workspace / "notes.md").write_text("old\n")
    out = _team_run(
        tmp_path, workspace,
        [delegate_call("writer", "Draft the notes"),
         tool_call_text("write_file", path="notes.md", content="drafted\n"),
         tool_call_text("append_to_memo", content="notes drafted"), "Drafted.",
         tool_call_text("write_file", path="summary.md", content="the writer drafted the notes\n"), "Done."],
        "--yes",
    )  # fmt: skip
    parent = out["session_id"]
    assert (workspace / "notes.md").read_text() == "drafted\n" and (workspace / "memo.md").exists()
    diff = runner.invoke(app, ["sessions", "diff", parent, "--json"])
    assert diff.exit_code == 0, diff.output
    files = {d["path"]: d for d in map(json.loads, diff.stdout.splitlines())}
    assert sorted(files) == ["memo.md", "notes.md", "summary.md"]
    (by,) = files["notes.md"]["by"]
    assert by["agent"] == "writer" and by["step"] == 1 and by["child_step"] == 1 and by["child"].startswith(parent)
    assert files["summary.md"]["by"] == [{"step": 2}]
    text = runner.invoke(app, ["sessions", "diff", parent]).stdout
    assert "# notes.md: changed by writer (its step 1) in step 1" in text and "+drafted" in text
    undo = runner.invoke(app, ["sessions", "undo", parent])
    assert undo.exit_code == 0, undo.output
    assert (workspace / "notes.md").read_text() == "old\n"
    assert not (workspace / "memo.md").exists() and not (workspace / "summary.md").exists()
    redo = runner.invoke(app, ["sessions", "undo", parent, "--redo"])
    assert redo.exit_code == 0 and (workspace / "notes.md").read_text() == "drafted\n"


def test_a_plan_only_team_run_lists_and_applies_the_specialists_proposals(tmp_path: Path, workspace: Path) -> None:
    out = _team_run(
        tmp_path, workspace,
        [delegate_call("writer", "Draft the notes"),
         tool_call_text("write_file", path="notes.md", content="drafted\n"), "Proposed.",
         tool_call_text("append_to_memo", content="writer asked to draft"), "Done."],
        "--plan",
    )  # fmt: skip
    parent = out["session_id"]
    assert not (workspace / "notes.md").exists()
    assert [(p["name"], p.get("agent")) for p in out["proposals"]] == [
        ("write_file", "writer"),
        ("append_to_memo", None),
    ]
    shown = runner.invoke(app, ["sessions", "show", parent]).stdout
    assert '([writer] proposed, not run: write_file({"path": "notes.md"' in shown
    res = runner.invoke(app, ["sessions", "apply", parent, "--yes"])
    assert res.exit_code == 0, res.output
    assert "applied 2 of 2 proposal(s)" in res.stderr and "[writer]" in res.stdout
    assert (workspace / "notes.md").read_text() == "drafted\n" and (workspace / "memo.md").exists()
    again = runner.invoke(app, ["sessions", "apply", parent, "--yes"])
    assert again.exit_code == 0 and "(applied before)" in again.stdout
    assert (workspace / "memo.md").read_text().count("\n") == 1  # never applied twice


# -- resume after kill -9, wherever in the child it lands -------------------------------------------------------
MEMO = tool_call_text("append_to_memo", content="the notes are drafted")


def _child_log() -> Path:
    (sub,) = sessions_dir().glob("*.writer-*.jsonl")
    return sub


def _after_memo_in_slow_read(tmp_path: Path, workspace: Path) -> tuple[list[str], Callable[[], bool]]:
    return [MEMO, tool_call_text("slow_lookup", topic="notes")], (tmp_path / "lookup.started").exists


def _after_memo_in_same_turn_slow_read(tmp_path: Path, workspace: Path) -> tuple[list[str], Callable[[], bool]]:
    both = MEMO + "\n" + tool_call_text("slow_lookup", topic="notes")
    return [both], (tmp_path / "lookup.started").exists


def _during_the_childs_final_answer(tmp_path: Path, workspace: Path) -> tuple[list[str], Callable[[], bool]]:
    return [MEMO, "slow:Drafted and noted."], (tmp_path / "answering").exists  # the model is writing its answer


KILLS = {
    "later-slow-read": _after_memo_in_slow_read,
    "same-turn-slow-read": _after_memo_in_same_turn_slow_read,
    "child-final-answer": _during_the_childs_final_answer,
}


@pytest.mark.parametrize("where", KILLS)
def test_resume_after_kill_9_in_the_child_never_repeats_its_finished_write(
    tmp_path: Path, workspace: Path, where: str
) -> None:
    tools = tmp_path / "slow_tools.py"
    tools.write_text(SLOW_TOOLS)
    write_profiles({"writer": {**WRITER["writer"], "tools": ["files", "memory", "slow_tools"]}})
    task = "Have the writer note that the notes are drafted"
    child_script, ready = KILLS[where](tmp_path, workspace)
    first = write_replay(tmp_path / "first.jsonl", [delegate_call("writer", "Note it"), *child_script])
    cmd = [sys.executable, "-m", "hermes_local", "run", task, "--tools-module", str(tools), "--yes"]
    kill_when([*cmd, "--workspace", str(workspace), "--model", f"replay:{first}"], ready,
              TEAM_TEST_MARK=str(tmp_path / "answering"))  # fmt: skip
    assert (workspace / "memo.md").read_text() == "- the notes are drafted\n"
    (parent,) = [p.stem for p in sessions_dir().glob("*.jsonl") if ".writer-" not in p.name]
    child = _child_log()

    again = write_replay(
        tmp_path / "again.jsonl",
        [delegate_call("writer", task),  # the manager asks again in other words: another child, of the same run
         MEMO,  # whose model asks for the same memo line again: not appended a second time
         "Noted.", "The writer noted it."],
    )  # fmt: skip
    args = ["run", "--resume", parent, "--tools-module", str(tools), "--yes", "--json", "--model", f"replay:{again}"]
    args += ["--workspace", str(workspace)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (workspace / "memo.md").read_text() == "- the notes are drafted\n"  # exactly once
    (second,) = [p for p in sessions_dir().glob("*.writer-*.jsonl") if p != child]
    repeat = [r for r in read_records(second) if r["kind"] == "tool_result" and r["name"] == "append_to_memo"]
    assert repeat[-1]["summary"].startswith("(already done earlier in this run; not repeated)")


# -- serve: the parent run's diff, undo and plan include the specialist's ------------------------------------------
def test_serve_diff_undo_and_plan_of_a_team_run_include_the_specialist(workspace: Path) -> None:
    from hermes_local.testing import ScriptedLLM
    from tests.fixtures.service_server import http, served, wait_status

    script = [delegate_call("writer", "Draft the notes"), tool_call_text("write_file", path="notes.md", content="d\n"),
              "Drafted.", "Done.",  # the run
              delegate_call("writer", "Draft the notes"), tool_call_text("write_file", path="plan.md", content="p\n"),
              "Proposed.", "Planned."]  # the plan-only run  # fmt: skip
    with served(ScriptedLLM(script), workspace, token="owner", tokens=("owner", "other"), agents=WRITER,
                allow_tools=["write_file"]) as (url, _):  # fmt: skip
        _, created = http("POST", f"{url}/v1/runs", {"task": "Draft the notes"}, token="owner")
        run_id = created["id"]
        assert wait_status(url, run_id, {"done", "error"}, token="owner")["status"] == "done"
        status, diff = http("GET", f"{url}/v1/runs/{run_id}/diff", token="owner")
        assert status == 200 and [f["path"] for f in diff["files"]] == ["notes.md"]
        assert diff["files"][0]["by"][0]["agent"] == "writer" and "changed by writer" in diff["diff"]
        assert http("POST", f"{url}/v1/runs/{run_id}/undo", {}, token="other")[0] == 403
        status, report = http("POST", f"{url}/v1/runs/{run_id}/undo", {}, token="owner")
        assert status == 200 and report["removed"] == ["notes.md"] and not (workspace / "notes.md").exists()

        _, planned = http("POST", f"{url}/v1/runs", {"task": "Plan the notes", "plan": True}, token="owner")
        done = wait_status(url, planned["id"], {"done", "error"}, token="owner")
        assert done["status"] == "done" and not (workspace / "plan.md").exists()
        proposals = done["result"]["proposals"]
        assert proposals == [
            {"name": "write_file", "arguments": {"path": "plan.md", "content": "p\n"}, "agent": "writer"}
        ]
    res = runner.invoke(app, ["sessions", "apply", planned["id"], "--yes"])
    assert res.exit_code == 0 and (workspace / "plan.md").read_text() == "p\n"
