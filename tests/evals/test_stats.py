"""`hermes-local stats` and `GET /v1/stats`: figures aggregated from real session logs of served runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.replay import tool_call_text
from hermes_local.evals.stats import gather
from hermes_local.testing import ScriptedLLM
from tests.fixtures.service_server import http, served, wait_status


def _served_runs(workspace: Path) -> dict:
    """Five runs, one after the other: answered, denied, timed out, a failing tool, and one cancelled."""
    write = tool_call_text("write_file", path="a.txt", content="x")
    script = [tool_call_text("get_current_time"), "It is noon.", write, "Not written.", write, "No one answered."]
    script += [tool_call_text("read_file", path="missing.txt")] + ["There is no such file."] * 2 + [write]  # one bounce
    with served(ScriptedLLM(script), workspace) as (base, manager):

        def start(task: str) -> str:
            return http("POST", f"{base}/v1/runs", {"task": task})[1]["id"]

        wait_status(base, start("What time is it?"), {"done"})
        denied = start("Write a.txt")
        [pending] = wait_status(base, denied, {"waiting_approval"})["pending_approvals"]
        http("POST", f"{base}/v1/runs/{denied}/approvals", {"call": pending["call"], "decision": "deny"})
        wait_status(base, denied, {"done"})
        manager.approval_timeout = 0.2  # nobody answers this one
        wait_status(base, start("Write a.txt again"), {"done"})
        manager.approval_timeout = 60.0
        wait_status(base, start("Read missing.txt"), {"done"})
        cancelled = start("Write a.txt once more")
        wait_status(base, cancelled, {"waiting_approval"})
        http("POST", f"{base}/v1/runs/{cancelled}/cancel")
        wait_status(base, cancelled, {"cancelled"})
        status, served_figures = http("GET", f"{base}/v1/stats?since=1h")
        bad = http("GET", f"{base}/v1/stats?since=soon")
    assert status == 200 and bad[0] == 400 and "12h, 7d or 2w" in bad[1]["error"]["message"]
    return served_figures


def test_stats_count_runs_outcomes_tools_and_approvals(workspace: Path) -> None:
    served_figures = _served_runs(workspace)
    res = CliRunner().invoke(app, ["stats", "--since", "7d", "--json"])
    assert res.exit_code == 0, res.output
    figures = json.loads(res.stdout)
    assert figures["runs"] == 5 and figures["sessions"] == 5
    assert figures["outcomes"] == {"answer": 4, "max_steps": 0, "error": 0, "empty": 0, "budget": 0, "unfinished": 1}
    # issue 42: only the answer a successful call backs is a success; denied writes and an answer after a failed
    # read are not, whatever the model said
    results = {"done": 1, "answered": 0, "unverified": 1, "failed": 0, "denied": 2, "unjudged": 0, "unfinished": 1}
    assert figures["results"] == results
    assert figures["success_rate"] == 0.2 and figures["success_rate_finished"] == 0.25
    tools = figures["tools"]
    assert tools["get_current_time"] == {"calls": 1, "failed": 0, "refused": 0, "failure_rate": 0.0}
    assert tools["read_file"] == {"calls": 1, "failed": 1, "refused": 0, "failure_rate": 1.0}
    assert tools["write_file"] == {"calls": 2, "failed": 0, "refused": 2, "failure_rate": None}  # never ran
    assert figures["approvals"] == {"asked": 2, "allowed": 0, "denied": 1, "timed_out": 1, "refused_unasked": 0}
    assert figures["tokens_per_run"]["prompt"]["mean"] > 0 and figures["seconds_per_run"]["wall"]["total"] > 0
    assert {k: v for k, v in served_figures.items() if k != "since_seconds"} == {
        k: v for k, v in figures.items() if k != "since_seconds"
    }  # the route gives the command's figures
    text = CliRunner().invoke(app, ["stats"])
    head = "5 runs in all sessions (5 sessions): done 1, unverified 1, denied 2, unfinished 1"
    assert text.exit_code == 0 and head in text.stdout
    assert "stopped: answer 4, unfinished 1" in text.stdout and "success rate: 20% done or answered" in text.stdout
    assert "1 denied, 1 timed out" in text.stdout and "read_file" in text.stdout
    assert gather(since=60, now=time.time() + 3600)["runs"] == 0  # all started more than a minute before


def test_stats_with_no_sessions_and_a_bad_window() -> None:
    res = CliRunner().invoke(app, ["stats", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["runs"] == 0
    assert json.loads(res.stdout)["success_rate"] is None
    res = CliRunner().invoke(app, ["stats", "--since", "a week"])
    assert res.exit_code == 2 and res.stderr.strip().count("\n") == 0 and "7d" in res.stderr
