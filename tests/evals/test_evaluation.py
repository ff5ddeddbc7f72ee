"""`hermes-local eval`: case files, checks, pass^k, the starter suite on replays, and `sessions export --as-case`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hermes_local.cli.common import HermesGroup
from hermes_local.cli.evals import eval_command, sessions_export, workflow_app
from hermes_local.evals.cases import Case, check_run, value_matches
from hermes_local.testing import outcome as Call  # noqa: N812
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay as write_replay_file

EVAL_DIR = Path(__file__).parents[1] / "data" / "eval"
runner = CliRunner()


def make_app() -> typer.Typer:
    """Mounted the way cli/app.py mounts them."""
    app = typer.Typer(cls=HermesGroup)
    app.command("eval")(eval_command)
    app.add_typer(workflow_app, name="workflow")
    sessions = typer.Typer()
    sessions.command("export")(sessions_export)
    app.add_typer(sessions, name="sessions")
    return app


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_replay(folder: Path, case_id: str, texts: list[str]) -> None:
    write_replay_file(folder / f"{case_id}.jsonl", texts)


def run_eval(*args: str):
    res = runner.invoke(make_app(), ["eval", *args])
    return res


# -- the starter suite -----------------------------------------------------------------------------
def test_starter_suite_passes_on_its_replays(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    res = run_eval(str(EVAL_DIR / "starter.jsonl"), "--model", f"replay:{EVAL_DIR / 'replay'}", "--report", str(report))
    assert res.exit_code == 0, res.stdout + res.stderr
    data = json.loads(report.read_text())
    summary = data["summary"]
    assert summary["cases"] >= 15 and summary["failed"] == 0 and summary["success_rate"] == 1.0
    assert (
        summary["false_successes"] == 0 and summary["outcomes"].get("unverified", 0) == 0
    )  # every recorded answer backed
    assert 0.9 < summary["tool_call_validity_rate"] < 1.0  # recover_bad_arguments makes one invalid call
    assert summary["mean_steps"] > 1 and summary["mean_prompt_tokens"] > 0
    ids = {c["id"] for c in data["cases"]}
    assert {"db_denied_delete", "write_denied", "db_report_to_file", "time_to_memo"} <= ids
    assert "21/21 cases passed" in res.stdout or f"{summary['cases']}/{summary['cases']} cases passed" in res.stdout
    every_replay = {p.stem for p in (EVAL_DIR / "replay").glob("*.jsonl")}
    assert ids == every_replay


def test_wrong_replay_fails_the_right_case_at_the_right_step(tmp_path: Path) -> None:
    replay = tmp_path / "replay"
    shutil.copytree(EVAL_DIR / "replay", replay)
    # Step 2 of db_report_to_file writes the wrong file; everything else is unchanged.
    write_replay(
        replay,
        "db_report_to_file",
        [
            call("query_database", sql="SELECT created_at, SUM(amount) FROM orders GROUP BY created_at"),
            call("write_file", path="summary.md", content="- 2024-05-01: 195.5\n"),
            "Done.",
            "Done, the totals are written.",
        ],
    )
    # Step 1 of db_revenue_by_region forgets the GROUP BY.
    write_replay(
        replay, "db_revenue_by_region", [call("query_database", sql="SELECT SUM(amount) FROM orders"), "north: 350"]
    )
    report = tmp_path / "report.json"
    res = run_eval(str(EVAL_DIR / "starter.jsonl"), "--model", f"replay:{replay}", "--report", str(report))
    assert res.exit_code == 1
    data = json.loads(report.read_text())
    failures = {f["case"]: f for f in data["failures"]}
    assert set(failures) == {"db_report_to_file", "db_revenue_by_region"}
    assert failures["db_report_to_file"]["step"] == 2 and "write_file" in failures["db_report_to_file"]["message"]
    assert failures["db_revenue_by_region"]["step"] == 1
    assert data["summary"]["failed"] == 2
    # the wrong write worked and the model said "Done.": no call used report.md, which the goal names, so the
    # answer went back once and the run ends unverified, not a false success
    assert data["summary"]["false_successes"] == 0
    line = next(li for li in res.stdout.splitlines() if li.startswith("db_report_to_file"))
    assert "FAIL" in line and "step 2" in line


def test_default_report_goes_under_the_home_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hermetic_home: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    res = run_eval(str(EVAL_DIR / "starter.jsonl"), "--model", f"replay:{EVAL_DIR / 'replay'}", "--case", "time_now")
    assert res.exit_code == 0, res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder
    (written,) = (hermetic_home / "hermes" / "evals").glob("*-starter.json")
    assert f"report: {written}" in res.stdout
    data = json.loads(written.read_text())
    assert [c["id"] for c in data["cases"]] == ["time_now"]
    out = tmp_path / "mine.json"
    again = run_eval(
        str(EVAL_DIR / "starter.jsonl"),
        "--model",
        f"replay:{EVAL_DIR / 'replay'}",
        "--case",
        "time_now",
        "--out",
        str(out),
    )
    assert again.exit_code == 0 and json.loads(out.read_text()).keys() == data.keys()


# -- malformed files --------------------------------------------------------------------------------
GOOD = {"id": "ok", "task": "What time is it?", "tools": ["get_current_time"]}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"id": "x", "task": "t", "tools": [], "extra": 1}), "extra"),
        (json.dumps({"id": "x", "task": "t", "tools": ["no_such_tool"]}), "unknown tool 'no_such_tool'"),
        (json.dumps({**GOOD, "id": "x", "checks": {"tool_calls": [{"name": "read_file"}]}}), "not in the case's tools"),
        (json.dumps({**GOOD, "id": "x", "checks": {"answer_regex": "("}}), "answer_regex"),
        (json.dumps({**GOOD, "id": "x", "fixtures": {"files": {"../out.txt": "x"}}}), "inside the workspace"),
        (json.dumps({**GOOD, "id": "x", "fixtures": {"database": ["CREATE TABLE"]}}), "fixtures.database"),
        (json.dumps({**GOOD, "id": "x", "checks": {"order": "sorted"}}), "checks.order"),
        (json.dumps(GOOD), "duplicate case id"),
    ],
)
def test_malformed_cases_file_is_one_line_exit_2(tmp_path: Path, bad: str, message: str) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(GOOD) + "\n\n" + bad + "\n", encoding="utf-8")
    res = run_eval(str(cases), "--model", "replay:/nowhere", "--report", str(tmp_path / "r.json"))
    assert res.exit_code == 2
    assert f"{cases}:3" in res.stderr and message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_missing_replay_file_and_missing_cases_file(tmp_path: Path) -> None:
    cases = write_jsonl(tmp_path / "cases.jsonl", [GOOD])
    res = run_eval(str(cases), "--model", f"replay:{tmp_path}", "--report", str(tmp_path / "r.json"))
    assert res.exit_code == 2 and "ok.jsonl" in res.stderr
    res = run_eval(str(tmp_path / "none.jsonl"), "--report", str(tmp_path / "r.json"))
    assert res.exit_code == 2 and "does not exist" in res.stderr


# -- runs -----------------------------------------------------------------------------------------
FLAKY = '''
from hermes_local.tools import tool

CALLS = []


@tool
def flaky_lookup(key: str) -> str:
    """Look a key up; fails every second call.

    Args:
        key: The key.
    """
    CALLS.append(key)
    if len(CALLS) % 2 == 0:
        raise RuntimeError("backend hiccup")
    return key.upper()
'''


def test_pass_k_needs_every_run_to_pass(tmp_path: Path) -> None:
    (tmp_path / "flaky.py").write_text(FLAKY, encoding="utf-8")
    case = {
        "id": "flaky",
        "task": "Look up abc.",
        "tools": ["flaky.py"],
        "checks": {"tool_calls": [{"name": "flaky_lookup", "arguments": {"key": "abc"}}]},
    }
    cases = write_jsonl(tmp_path / "cases.jsonl", [case])
    write_replay(tmp_path / "replay", "flaky", [call("flaky_lookup", key="abc"), "ABC"])
    report = tmp_path / "r.json"
    res = run_eval(str(cases), "--model", f"replay:{tmp_path / 'replay'}", "--repeat", "3", "--report", str(report))
    assert res.exit_code == 1
    data = json.loads(report.read_text())
    assert data["cases"][0]["runs_passed"] == 2 and data["cases"][0]["runs"] == 3 and not data["cases"][0]["passed"]
    assert data["summary"]["success_rate"] == 0.0 and data["summary"]["run_success_rate"] == pytest.approx(0.6667)
    assert data["failures"] == [
        {"case": "flaky", "run": 2, "step": 1, "check": "tool_calls", "message": data["failures"][0]["message"]}
    ]
    assert "tool_error" in data["failures"][0]["message"]
    assert "1/3" not in res.stdout and "2/3" in res.stdout


def test_replay_that_runs_out_or_has_leftovers_fails(tmp_path: Path) -> None:
    cases = write_jsonl(
        tmp_path / "cases.jsonl",
        [
            {"id": "short", "task": "time?", "tools": ["get_current_time"]},
            {"id": "long", "task": "Say hello.", "tools": ["get_current_time"]},
        ],
    )
    write_replay(tmp_path / "rp", "short", [call("get_current_time")])  # no final answer: runs out at step 2
    write_replay(tmp_path / "rp", "long", ["Hello.", "an output nobody asked for"])
    report = tmp_path / "r.json"
    res = run_eval(str(cases), "--model", f"replay:{tmp_path / 'rp'}", "--report", str(report))
    assert res.exit_code == 1
    failures = {f["case"]: f for f in json.loads(report.read_text())["failures"]}
    assert failures["short"]["step"] == 2 and "ReplayExhausted" in failures["short"]["message"]
    assert failures["long"]["check"] == "replay" and failures["long"]["step"] == 1


def test_forbidden_tool_and_files_checks(tmp_path: Path) -> None:
    case = {
        "id": "no_writes",
        "task": "Read a.txt",
        "tools": ["read_file", "write_file"],
        "fixtures": {"files": {"a.txt": "alpha"}},
        "checks": {"forbidden_tools": ["write_file"], "files": [{"path": "a.txt", "contains": "alpha"}]},
    }
    cases = write_jsonl(tmp_path / "cases.jsonl", [case])
    write_replay(
        tmp_path / "rp",
        "no_writes",
        [call("read_file", path="a.txt"), call("write_file", path="a.txt", content="b"), "ok"],
    )
    report = tmp_path / "r.json"
    assert run_eval(str(cases), "--model", f"replay:{tmp_path / 'rp'}", "--report", str(report)).exit_code == 1
    run = json.loads(report.read_text())["cases"][0]["details"][0]
    assert run["failed_step"] == 2
    assert {f["check"] for f in run["failures"]} == {"forbidden_tools", "files"}


# -- check semantics ---------------------------------------------------------------------------------
def test_value_matches() -> None:
    assert value_matches({"a": 1}, {"a": 1, "b": 2})
    assert not value_matches({"a": 1}, {"b": 1})
    assert value_matches({"q": {"$contains": "SELECT"}}, {"q": "select 1"})
    assert value_matches({"q": {"$regex": "^sel"}}, {"q": "select"}) and not value_matches({"$regex": "^S"}, "select")
    assert value_matches({"o": {"x": [1, {"y": 2}]}}, {"o": {"x": [1, {"y": 2, "z": 3}], "w": 0}})
    assert not value_matches(True, 1) and not value_matches(1, True) and value_matches(1, 1.0)


def _case(**checks: object) -> Case:
    return Case.model_validate({"id": "c", "task": "t", "tools": ["read_file", "list_dir"], "checks": checks})


def test_any_order_matches_each_expectation_to_its_own_call(tmp_path: Path) -> None:
    calls = [Call(1, "read_file", {"path": "b"}, True), Call(2, "read_file", {"path": "a"}, True)]
    loose_then_strict = [{"name": "read_file"}, {"name": "read_file", "arguments": {"path": "b"}}]
    failures, _ = check_run(_case(tool_calls=loose_then_strict), calls, "x", "answer", tmp_path)
    assert failures == []
    twice = [{"name": "read_file", "arguments": {"path": "a"}}] * 2
    failures, _ = check_run(_case(tool_calls=twice), calls, "x", "answer", tmp_path)
    assert len(failures) == 1 and failures[0].step == 1  # the unmatched read_file(b) is the closest attempt


def test_exact_order_reports_the_first_divergence(tmp_path: Path) -> None:
    calls = [Call(1, "list_dir", {}, True), Call(2, "read_file", {"path": "a"}, True), Call(3, "list_dir", {}, True)]
    expected = [{"name": "list_dir"}, {"name": "read_file"}]
    failures, _ = check_run(_case(tool_calls=expected, order="exact"), calls, "x", "answer", tmp_path)
    assert [(f.check, f.step) for f in failures] == [("tool_calls", 3)] and "extra" in failures[0].message
    failures, _ = check_run(_case(tool_calls=expected[::-1], order="exact"), calls, "x", "answer", tmp_path)
    assert failures[0].step == 1


# -- sessions export ---------------------------------------------------------------------------------
def record_session(workspace: Path, texts: list[str], task: str, allow: list[str]) -> str:
    from hermes_local.config import load_settings
    from hermes_local.runtime import build_registry
    from hermes_local.session import SessionLog
    from hermes_local.testing import ScriptedLLM, build_agent
    from hermes_local.tools import Approver

    session = SessionLog()
    agent = build_agent(
        ScriptedLLM(texts),
        load_settings({}),
        workspace=workspace,
        registry=build_registry(),
        approver=Approver(allow=allow, interactive=False),
        on_event=session.log,
    )
    agent.run(task)
    session.close()
    return session.id


def test_export_session_as_case_replays_and_passes(tmp_path: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("Budget: 1200 EUR\n", encoding="utf-8")
    texts = [
        call("read_file", path="notes.txt"),
        call("write_file", path="budget.md", content="# Budget\n1200 EUR\n"),
        call("append_to_memo", content="budget noted"),
        "The budget is 1200 EUR; I wrote budget.md.",
    ]
    sid = record_session(
        workspace, texts, "Put the budget from notes.txt into budget.md", allow=["write_file", "append_to_memo"]
    )
    cases = tmp_path / "suite" / "cases.jsonl"
    cases.parent.mkdir()
    res = runner.invoke(make_app(), ["sessions", "export", sid, "--as-case", "--output", str(cases), "--id", "budget"])
    assert res.exit_code == 0, res.stderr
    case = json.loads(cases.read_text())
    assert case["task"] == "Put the budget from notes.txt into budget.md"
    assert case["tools"] == ["read_file", "write_file", "append_to_memo"]
    assert [c["name"] for c in case["checks"]["tool_calls"]] == ["read_file", "write_file", "append_to_memo"]
    assert case["checks"]["tool_calls"][1]["arguments"] == {"path": "budget.md", "content": "# Budget\n1200 EUR\n"}
    assert case["checks"]["answer_contains"] == ["The budget is 1200 EUR;"]
    assert case["fixtures"]["files"] == {"notes.txt": "Budget: 1200 EUR\n"}
    replay = cases.parent / "replay" / "budget.jsonl"
    assert [json.loads(li)["text"] for li in replay.read_text().splitlines()] == texts

    report = tmp_path / "r.json"
    res = run_eval(str(cases), "--model", f"replay:{replay.parent}", "--report", str(report))
    assert res.exit_code == 0, res.stdout + res.stderr

    again = runner.invoke(
        make_app(), ["sessions", "export", sid, "--as-case", "--output", str(cases), "--id", "budget"]
    )
    assert again.exit_code == 2 and "already has a case 'budget'" in again.stderr


def test_export_denied_write_and_plain_export(tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [call("write_file", path="x.txt", content="x"), "I was not allowed to write x.txt."]
    sid = record_session(workspace, texts, "Write x.txt", allow=[])
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(make_app(), ["sessions", "export", sid, "--as-case"])
    assert res.exit_code == 0, res.stderr
    case = json.loads(res.stdout)
    assert case["id"] == f"session-{sid}" and case["deny"] == ["write_file"] and case["checks"]["tool_calls"] == []
    assert (tmp_path / "replay" / f"session-{sid}.jsonl").is_file()
    cases = write_jsonl(tmp_path / "cases.jsonl", [case])
    res = run_eval(str(cases), "--model", f"replay:{tmp_path / 'replay'}", "--report", str(tmp_path / "r.json"))
    assert res.exit_code == 0, res.stdout

    plain = runner.invoke(make_app(), ["sessions", "export", sid])
    kinds = [json.loads(li)["kind"] for li in plain.stdout.splitlines()]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    missing = runner.invoke(make_app(), ["sessions", "export", "nope", "--as-case"])
    assert missing.exit_code == 2 and "no session" in missing.stderr


def test_team_cases_are_routed_first_and_the_report_gives_routing_accuracy(tmp_path: Path) -> None:
    from tests.agent.test_team import PROFILES, write_profiles

    write_profiles(PROFILES)
    rows = [
        {"id": "draft", "task": "Draft a note into n.md", "team": True, "specialist": "writer",
         "tools": ["read_file", "write_file"], "checks": {"files": [{"path": "n.md", "contains": ["hi"]}]}},
        {"id": "revenue", "task": "Total revenue and write a report", "team": True, "specialist": "analyst",
         "checks": {"answer_contains": ["Done"]}},
    ]  # fmt: skip
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    write_replay(tmp_path / "replay", "draft", [call("write_file", path="n.md", content="hi"), "Drafted."])
    inner = [call("delegate", agent="writer", task="Write the report"), call("list_dir", path="."), "Empty.", "Done."]
    write_replay(tmp_path / "replay", "revenue", inner)
    report = tmp_path / "r.json"
    res = run_eval(str(cases), "--model", f"replay:{tmp_path / 'replay'}", "--report", str(report))
    assert res.exit_code == 0, res.stdout + res.stderr
    data = json.loads(report.read_text())
    assert {c["id"]: c["routed"] for c in data["cases"]} == {"draft": ["writer"], "revenue": ["manager"]}
    assert data["summary"]["routing_accuracy"] == 0.5 and data["summary"]["routed_runs"] == 2
    assert "routing accuracy 50% of 2 routed runs" in res.stdout


def test_a_team_case_with_a_router_model_runs_on_the_toolsets_it_chose(tmp_path: Path) -> None:
    """eval routes as `run --team` does: with router_model the case's prompt keeps only the chosen toolsets, so
    the clock (left out) fails as a tool not in the run, which this case expects."""
    from tests.agent.test_team import PROFILES, write_profiles

    router = write_replay_file(tmp_path / "router.jsonl", ["manager", "files"])
    write_profiles(PROFILES, extra=f'router_model = "replay:{router}"\nanswer_guard = false')
    checks = {"tool_calls": [{"name": "get_current_time", "ok": False}], "answer_contains": ["no clock"]}
    tools = ["get_current_time", "read_file", "write_file"]
    rows = [{"id": "clock", "task": "Tell the time, then note it", "team": True, "specialist": "manager",
             "tools": tools, "checks": checks}]  # fmt: skip
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    write_replay(tmp_path / "replay", "clock", [call("get_current_time"), "There is no clock here."])
    report = tmp_path / "r.json"
    res = run_eval(str(cases), "--model", f"replay:{tmp_path / 'replay'}", "--report", str(report))
    assert res.exit_code == 0, res.stdout + res.stderr
    data = json.loads(report.read_text())
    assert data["cases"][0]["routed"] == ["manager"] and data["summary"]["routing_accuracy"] == 1.0
