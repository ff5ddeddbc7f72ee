"""`GET /v1/runs/ID/diff` and `POST /v1/runs/ID/undo` over real HTTP (uvicorn on 127.0.0.1, replay model).

The run writes real files through the service; the diff and undo answer through the guard like the
other run routes (another credential gets 403), and undo restores the workspace.
"""

from __future__ import annotations

from pathlib import Path

from hermes_local.engines.replay import tool_call_text
from hermes_local.testing import ScriptedLLM
from tests.fixtures.service_server import http, served, wait_status


def test_a_served_run_is_diffed_and_undone_over_http(workspace: Path) -> None:
    (workspace / "plan.md").write_text("old plan\n")
    llm = ScriptedLLM(
        [tool_call_text("write_file", path="plan.md", content="new plan\n"),
         tool_call_text("write_file", path="sub/made.txt", content="made\n"), "Done."]
    )  # fmt: skip
    with served(llm, workspace, token="owner-token", tokens=("owner-token", "other-token"),
                allow_tools=["write_file"]) as (base, _):  # fmt: skip
        _, created = http("POST", f"{base}/v1/runs", {"task": "Rewrite the plan"}, token="owner-token")
        run_id = created["id"]
        assert wait_status(base, run_id, {"done", "error"}, token="owner-token")["status"] == "done"
        status, diff = http("GET", f"{base}/v1/runs/{run_id}/diff", token="owner-token")
        assert status == 200 and [f["path"] for f in diff["files"]] == ["plan.md", "sub", "sub/made.txt"]
        assert "-old plan\n+new plan\n" in diff["diff"]
        status, step2 = http("GET", f"{base}/v1/runs/{run_id}/diff?step=2", token="owner-token")
        assert status == 200 and [f["path"] for f in step2["files"]] == ["sub", "sub/made.txt"]
        assert http("POST", f"{base}/v1/runs/{run_id}/undo", {}, token="other-token")[0] == 403
        assert (workspace / "plan.md").read_text() == "new plan\n"
        status, report = http("POST", f"{base}/v1/runs/{run_id}/undo", {}, token="owner-token")
        assert status == 200 and report["restored"] == ["plan.md"] and not report["refused"]
        assert sorted(report["removed"]) == ["sub", "sub/made.txt"]
        assert (workspace / "plan.md").read_text() == "old plan\n" and not (workspace / "sub").exists()
        status, again = http("POST", f"{base}/v1/runs/{run_id}/undo", {"redo": True}, token="owner-token")
        assert status == 200 and (workspace / "sub/made.txt").read_text() == "made\n"
        assert http("POST", f"{base}/v1/runs/{run_id}/undo", {"to_step": "x"}, token="owner-token")[0] == 400
