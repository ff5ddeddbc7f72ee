"""`hermes-local eval` with MCP tools: the configured servers start once per eval run and stop with it,
and a case's `tools` can name MCP tools (the real `mcp-server-time` over stdio, our test server over stdio).

Replay and scripted models; no protocol mocks.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.evals.cases import load_cases
from hermes_local.evals.suite import eval_tools, run_once
from hermes_local.testing import ScriptedLLM, tool_call_text, write_replay
from tests.tools.mcp.test_mcp import BROKEN_SERVER, TIME_SERVER, write_config

runner = CliRunner()
TEST_SERVER = str(Path(__file__).parents[1] / "fixtures" / "mcp_test_server.py")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def descendants() -> list[int]:
    """Live (non-zombie) processes below this one."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    out, frontier = [], {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        out += sorted(frontier)
    return out


TIME_CASE = {
    "id": "utc_time",
    "task": "What time is it in UTC?",
    "tools": ["time__get_current_time"],
    "checks": {
        "tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}],
        "answer_contains": ["UTC"],
    },
}


def test_eval_cases_call_the_real_time_server(tmp_path: Path, hermetic_home: Path) -> None:
    write_config(hermetic_home, {"time": TIME_SERVER})
    own_case = {
        "id": "plain",
        "task": "What time is it?",
        "tools": ["get_current_time"],
        "checks": {"tool_calls": [{"name": "get_current_time"}]},
    }
    cases = write_jsonl(tmp_path / "cases.jsonl", [TIME_CASE, own_case])
    replay = tmp_path / "replay"
    write_replay(
        replay / "utc_time.jsonl", [tool_call_text("time__get_current_time", timezone="UTC"), "It is 12:00 UTC."]
    )
    write_replay(replay / "plain.jsonl", [tool_call_text("get_current_time"), "It is noon."])
    before = set(descendants())
    report = tmp_path / "report.json"
    res = runner.invoke(
        app, ["eval", str(cases), "--model", f"replay:{replay}", "--report", str(report), "--repeat", "2"]
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    data = json.loads(report.read_text())
    assert data["summary"]["passed"] == 2
    details = data["cases"][0]["details"][0]
    assert details["calls"][0]["result"]["ok"] and details["calls"][0]["result"]["data"]["timezone"] == "UTC"
    assert set(descendants()) <= before  # the server stopped with the eval run


def test_servers_start_once_per_eval_run_and_stop_with_it(tmp_path: Path, hermetic_home: Path) -> None:
    pids = tmp_path / "pids.txt"
    write_config(
        hermetic_home, {"own": {"command": sys.executable, "args": [TEST_SERVER, str(pids)], "sandbox": False}}
    )
    rows = [
        {"id": f"add{i}", "task": "Add", "tools": ["own__add"], "checks": {"tool_calls": [{"name": "own__add"}]}}
        for i in range(3)
    ]
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    for i in range(3):
        write_replay(tmp_path / "rp" / f"add{i}.jsonl", [tool_call_text("own__add", a=i, b=1), f"{i + 1}"])
    res = runner.invoke(
        app, ["eval", str(cases), "--model", f"replay:{tmp_path / 'rp'}", "--report", str(tmp_path / "r")]
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 1  # three cases, one server start
    assert not Path(f"/proc/{started[0]}").exists() or started[0] not in descendants()


def test_a_case_sees_only_its_mcp_tools(tmp_path: Path, hermetic_home: Path) -> None:
    write_config(hermetic_home, {"time": TIME_SERVER})
    settings = load_settings({})
    cases = write_jsonl(tmp_path / "cases.jsonl", [TIME_CASE])
    with eval_tools(settings) as everything:
        assert "time__convert_time" in everything.names() and "read_file" in everything.names()
        suite = load_cases(cases, registry=everything)
        llm = ScriptedLLM([tool_call_text("time__get_current_time", timezone="UTC"), "It is 12:00 UTC."])
        outcome = run_once(suite.cases[0], settings, llm)
    assert outcome.passed, outcome.failures
    prompt = llm.prompt_texts[0]
    assert "time__get_current_time" in prompt and "time__convert_time" not in prompt and "read_file" not in prompt


def test_a_case_naming_a_tool_of_a_server_that_did_not_start_is_one_line(tmp_path: Path, hermetic_home: Path) -> None:
    write_config(hermetic_home, {"broken": BROKEN_SERVER})
    row = {"id": "b", "task": "t", "tools": ["broken__anything"]}
    cases = write_jsonl(tmp_path / "cases.jsonl", [row])
    res = runner.invoke(app, ["eval", str(cases), "--model", f"replay:{tmp_path}", "--report", str(tmp_path / "r")])
    assert res.exit_code == 2
    last = res.stderr.strip().splitlines()[-1]
    assert "case 'b'" in last and "broken__anything" in last and "MCP server broken failed to start" in last
    assert "missing API token" in last


def test_a_session_with_mcp_calls_exports_to_a_case_that_passes(
    tmp_path: Path, hermetic_home: Path, workspace: Path
) -> None:
    write_config(hermetic_home, {"time": TIME_SERVER})
    script = [tool_call_text("time__get_current_time", timezone="UTC"), "It is 12:00 UTC."]
    replay = write_replay(tmp_path / "run.jsonl", script)
    res = runner.invoke(
        app, ["run", "What time is it in UTC?", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json"]
    )
    assert res.exit_code == 0, res.stderr
    session = json.loads(res.stdout)["session_id"]
    cases = tmp_path / "cases.jsonl"
    exported = runner.invoke(app, ["sessions", "export", session, "--as-case", "--output", str(cases), "--id", "utc"])
    assert exported.exit_code == 0, exported.stderr
    assert "not built in" not in exported.stderr
    case = json.loads(cases.read_text())
    assert case["tools"] == ["time__get_current_time"]
    assert case["checks"]["tool_calls"] == [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]
    again = runner.invoke(
        app, ["eval", str(cases), "--model", f"replay:{tmp_path / 'replay'}", "--report", str(tmp_path / "r.json")]
    )
    assert again.exit_code == 0, again.stdout + again.stderr
