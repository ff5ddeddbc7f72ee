"""A team beyond one model (issue 30): a profile's own `model`, and `router_model` choosing the toolsets too.

The real loop, tools and files; replay files stand in for the models (the specialist's own, the router's), and the
embedded SmolLM2 for the real path. A test fails if the specialist ran on its caller's model (the caller's script
would be drawn from), or if the big model's prompt still carried the tools the router left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hermes_local.agent.router import parse_toolsets, route, route_toolsets, subset_grammar
from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.dialects import select_dialect
from hermes_local.events import LLMCall, Routed, RunEnd, RunStart
from hermes_local.runtime import Model, RunSpec, Sinks, build_registry, start_run
from hermes_local.session import read_events, read_records, sessions_dir
from hermes_local.testing import ScriptedLLM, tool_call_text, write_replay
from hermes_local.tools import Approver
from tests.agent.test_team import PROFILES, delegate_call, run_team, write_profiles


def with_model(**models: str) -> dict[str, Any]:
    """The test profiles, these ones naming a model of their own."""
    profiles = json.loads(json.dumps(PROFILES))
    for name, model in models.items():
        profiles[name]["model"] = model
    return profiles


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


# -- a profile's own model -------------------------------------------------------------------------------------------
def test_a_specialist_runs_on_the_replay_its_profile_names_loaded_once_for_two_delegations(
    tmp_path: Path, workspace: Path
) -> None:
    own = write_replay(
        tmp_path / "writer.jsonl",
        [
            tool_call_text("write_file", path="a.md", content="from the writer's own model"),
            "The writer's model wrote a.md.",
            "The writer's model has nothing to add.",  # the second delegation goes on in the same recording
        ],
    )
    settings = load_settings({"agents": with_model(writer=f"replay:{own}"), "answer_guard": False})
    script = [delegate_call("writer", "Write a.md"), delegate_call("writer", "Anything to add?"), "Both done."]
    result, _, llm = run_team(workspace, script, "Write a.md, then ask for more", settings=settings)
    llm.assert_all_used()  # the manager's model made the manager's three calls, none of the writer's
    assert result.answer == "Both done."
    assert (workspace / "a.md").read_text() == "from the writer's own model"
    first, second = (c.data for c in result.tool_calls)
    assert first["answer"] == "The writer's model wrote a.md." and first["files_written"] == ["a.md"]
    assert second["answer"] == "The writer's model has nothing to add." and second["steps"] == 1  # not reloaded
    children = sorted(sessions_dir().glob("*.writer-*.jsonl"))
    assert len(children) == 2 and all(read_events(p)[-1].kind == "run_end" for p in children)


def test_a_nested_specialist_without_a_model_runs_on_its_callers_own_model(tmp_path: Path, workspace: Path) -> None:
    profiles = with_model(writer=f"replay:{tmp_path / 'writer.jsonl'}")
    profiles["writer"]["tools"].append("delegate")
    own = [delegate_call("analyst", "Total revenue?"), "Revenue is 10.", "Report: revenue 10."]
    write_replay(tmp_path / "writer.jsonl", own)  # the writer's calls and, below it, the analyst's
    script = [delegate_call("writer", "Write the revenue report"), "Done."]
    result, _, llm = run_team(
        workspace, script, "Write the revenue report", settings=load_settings({"agents": profiles})
    )
    llm.assert_all_used()
    envelope = result.tool_calls[0].data
    assert envelope["status"] == "answered" and envelope["answer"] == "Report: revenue 10."


def test_run_team_straight_to_a_specialist_runs_it_on_its_own_model(tmp_path: Path, workspace: Path) -> None:
    own = write_replay(tmp_path / "w.jsonl", [tool_call_text("write_file", path="d.md", content="own"), "Drafted."])
    main = write_replay(tmp_path / "main.jsonl", [])  # the run's model is never asked
    write_profiles(with_model(writer=f"replay:{own}"))
    args = ["run", "Draft a note into d.md", "--team", "--json", "--yes", "--model", f"replay:{main}"]
    res = run_cli(*args, "--workspace", str(workspace))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["answer"] == "Drafted." and (workspace / "d.md").read_text() == "own"
    assert f"max_steps 3, model replay:{own}]" in run_cli("agents", "list").stdout  # the listing names it
    assert read_events(sessions_dir() / f"{out['session_id']}.jsonl")[0].chosen == "writer"  # type: ignore[attr-defined]


def test_a_team_run_delegates_to_a_specialist_on_its_own_replay(tmp_path: Path, workspace: Path) -> None:
    own = write_replay(
        tmp_path / "w.jsonl", [tool_call_text("write_file", path="m.md", content="We met."), "m.md is written."]
    )
    main = write_replay(tmp_path / "main.jsonl", [delegate_call("writer", "Write m.md"), "The writer wrote m.md."])
    write_profiles(with_model(writer=f"replay:{own}"))
    args = ["run", "Find the revenue with SQL, then write a report", "--team", "--json", "--yes"]
    res = run_cli(*args, "--model", f"replay:{main}", "--workspace", str(workspace))
    assert res.exit_code == 0, res.output  # and every output of the main replay was used (else exit 1)
    out = json.loads(res.stdout)
    assert out["answer"] == "The writer wrote m.md." and (workspace / "m.md").read_text() == "We met."
    (link,) = out["delegations"]
    child = read_records(sessions_dir() / f"{link['child']}.jsonl")
    assert [r["name"] for r in child if r["kind"] == "tool_result"] == ["write_file"]
    assert next(r for r in child if r["kind"] == "run_end")["answer"] == "m.md is written."


@pytest.mark.parametrize(
    ("model", "line"),
    [
        ("no-such-model", "[agents.writer] model 'no-such-model' is neither in models.toml nor a GGUF file"),
        ("replay:/no/such/file.jsonl", "[agents.writer] model 'replay:/no/such/file.jsonl' names no replay file"),
    ],
)
def test_a_profile_model_that_does_not_exist_is_refused_in_one_line(tmp_path: Path, model: str, line: str) -> None:
    write_profiles(with_model(writer=model))
    main = write_replay(tmp_path / "main.jsonl", ["x"])
    for args in (["agents", "list"], ["run", "x", "--team", "--model", f"replay:{main}"]):
        res = run_cli(*args)
        assert res.exit_code == 2, res.output
        assert res.stderr.strip().splitlines() == [f"error: {line}; fix it in config.toml"]


@pytest.mark.real_model
def test_a_specialist_on_the_embedded_gguf_beside_a_replayed_manager(
    tmp_path: Path, workspace: Path, embedded_model_path: Path
) -> None:
    """The manager is replayed; the writer's profile names the embedded SmolLM2, which llama.cpp loads beside it:
    the child's model calls are real (timed, with real token counts), the manager's are the recording's."""
    profile = {"description": "Writes short notes.", "tools": ["read_file"], "max_steps": 1}
    write_profiles({"writer": {**profile, "model": str(embedded_model_path)}}, extra="n_gpu_layers = 0")
    main = write_replay(tmp_path / "main.jsonl", [delegate_call("writer", "Say hello in one sentence."), "Done."])
    args = ["run", "Greet me", "--json", "--no-memory", "--no-answer-guard", "--model", f"replay:{main}"]
    res = run_cli(*args, "--workspace", str(workspace))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["answer"] == "Done." and all(c["seconds"] == 0.0 for c in out["llm_calls"])  # the replay
    (link,) = out["delegations"]
    child = read_events(sessions_dir() / f"{link['child']}.jsonl")
    assert any(isinstance(e, RunEnd) for e in child)
    calls = [e for e in child if isinstance(e, LLMCall)]
    assert calls and all(c.seconds > 0 and c.prompt_seconds > 0 and c.completion_tokens > 0 for c in calls)
    start = next(e for e in child if isinstance(e, RunStart))
    assert start.dialect == "hermes"  # models.toml: smollm2 is chatml with hermes calls, found from the GGUF itself


# -- router_model picks the toolsets too -----------------------------------------------------------------------------
CATALOG = {
    "db": "query_database (read-only SQL on the user's SQLite database)",
    "files": "read_file (read, list and write files in the workspace)",
}


def test_the_router_model_picks_the_toolsets_in_one_more_constrained_call() -> None:
    llm = ScriptedLLM(["analyst", "db"])
    settings = load_settings({"agents": PROFILES, "router_model": "smollm2-135m"})
    event = route("How many orders in March?", settings, llm, select_dialect("hermes"), lambda who: CATALOG)
    assert isinstance(event, Routed) and event.router == "router_model"
    assert event.chosen == "analyst" and event.toolsets == ["db"] and "toolsets: the model chose 'db'" in event.reason
    pick, toolsets = llm.calls
    assert pick.constrained and toolsets.constrained and toolsets.max_tokens <= 32
    assert "query_database (read-only SQL" in llm.prompt_texts[1] and "The analyst agent" in llm.prompt_texts[1]
    assert event.to_dict()["toolsets"] == ["db"]
    old = {k: v for k, v in event.to_dict().items() if k != "toolsets"}  # a log written before toolsets existed
    assert Routed.from_dict(old).toolsets is None  # type: ignore[attr-defined]


def test_the_toolset_grammar_is_a_non_empty_list_of_distinct_names_and_the_reply_is_read_leniently() -> None:
    from hermes_local.engines.inprocess.automaton import GrammarAutomaton

    names = ["time", "files", "db"]
    grammar = GrammarAutomaton(subset_grammar(names))
    for good in ("time", "db", "files, db", "time, files, db"):
        assert grammar.is_complete(grammar.advance(grammar.initial, good)), good
    for bad in ("", "db, db", "files, files", "web", "db, time"):
        assert not grammar.is_complete(grammar.advance(grammar.initial, bad)), bad
    assert parse_toolsets("`db` and files.", names) == ["files", "db"]
    assert parse_toolsets('["db", "db", "web"]', names) == ["db"]
    dialect = select_dialect("hermes")
    kept, why = route_toolsets("x", "manager", CATALOG, ScriptedLLM(["nothing useful"]), dialect)
    assert kept == ["db", "files"] and "names none of them, so all are kept" in why
    one = ScriptedLLM([])  # one toolset: nothing to choose, no call
    assert route_toolsets("x", "writer", {"files": "read_file"}, one, dialect)[0] == ["files"] and not one.calls


def test_the_rules_and_model_routers_choose_no_toolsets() -> None:
    llm = ScriptedLLM(["writer"])
    dialect = select_dialect("hermes")
    event = route("Draft it", load_settings({"agents": PROFILES, "router": "model"}), llm, dialect, lambda w: CATALOG)
    assert event.toolsets is None and len(llm.calls) == 1
    rules = route("Write a report", load_settings({"agents": PROFILES}), ScriptedLLM([]), dialect, lambda w: CATALOG)
    assert rules.router == "rules" and rules.toolsets is None


def test_the_big_models_first_prompt_carries_only_the_chosen_toolsets(tmp_path: Path, workspace: Path) -> None:
    router = write_replay(tmp_path / "router.jsonl", ["manager", "files, time"])
    settings = load_settings({"agents": PROFILES, "router_model": f"replay:{router}", "answer_guard": False})
    registry = build_registry((), settings)
    seen: list[Any] = []
    llm = ScriptedLLM([tool_call_text("append_to_memo", text="x"), "No memo here."])
    spec = RunSpec(task="Note the time in t.md", settings=settings, workspace=workspace, tools=registry, team=True,
                   approver=Approver(allow=["append_to_memo"]))  # fmt: skip
    with start_run(spec, Model(llm, select_dialect("hermes")), Sinks(display=seen.append)) as handle:
        result = handle.run()
    (routed,) = [e for e in seen if isinstance(e, Routed)]
    assert routed.toolsets == ["time", "files"]  # in the catalog's order
    assert "db" not in routed.reason  # no --db: the database toolset was not among the candidates
    first = llm.prompt_texts[0]
    assert '"read_file"' in first and '"write_file"' in first and '"get_current_time"' in first
    assert '"delegate"' in first  # the manager still delegates
    for gone in ('"run_shell"', '"append_to_memo"', '"remember"', '"http_get"'):
        assert gone not in first, gone
    (call,) = result.tool_calls  # a call to a tool the router left out is told why, as any tool not in the run
    assert call.error_kind == "not_found" and "the router left out of this task" in (call.error or "")


def test_run_team_logs_the_toolsets_and_a_continued_run_keeps_them_without_routing_again(
    tmp_path: Path, workspace: Path
) -> None:
    router = write_replay(tmp_path / "router.jsonl", ["writer", "files"])  # the writer has one toolset: no 2nd call
    write_profiles(PROFILES, extra=f'router_model = "replay:{router}"')
    main = write_replay(tmp_path / "main.jsonl", [tool_call_text("write_file", path="n.md", content="n"), "Noted."])
    args = ["run", "Put a note in n.md", "--team", "--json", "--yes", "--workspace", str(workspace)]
    res = run_cli(*args, "--model", f"replay:{main}")
    assert res.exit_code == 0, res.output
    sid = json.loads(res.stdout)["session_id"]
    routed = read_events(sessions_dir() / f"{sid}.jsonl")[0]
    assert isinstance(routed, Routed) and routed.chosen == "writer" and routed.toolsets == ["files"]
    shown = run_cli("sessions", "show", sid).stdout
    assert "routed (router_model) to writer with files: the model chose 'writer'" in shown

    write_replay(router, [])  # a second routing call would now fail the run
    write_profiles(PROFILES, extra=f'router_model = "replay:{router}"\nallow_hosts = ["docs.example.com"]')
    again = write_replay(tmp_path / "again.jsonl", [tool_call_text("http_get", url="https://docs.example.com/"), "No."])
    res = run_cli("run", "--continue", sid, "Fetch the docs", "--json", "--workspace", str(workspace),
                  "--model", f"replay:{again}", "--no-answer-guard")  # fmt: skip
    assert res.exit_code == 6, res.output  # an answer no successful call backs: unverified
    events = read_events(sessions_dir() / f"{sid}.jsonl")
    assert [type(e) for e in events].count(Routed) == 1
    fetch = [r for r in read_records(sessions_dir() / f"{sid}.jsonl") if r["kind"] == "tool_result"][-1]
    assert fetch["name"] == "http_get" and fetch["error_kind"] == "not_found"  # the writer has no web tool anyway


def test_a_resumed_manager_keeps_its_narrowed_tools(tmp_path: Path, workspace: Path) -> None:
    router = write_replay(tmp_path / "router.jsonl", ["manager", "files"])
    write_profiles(PROFILES, extra=f'router_model = "replay:{router}"')
    main = write_replay(tmp_path / "main.jsonl", [tool_call_text("get_current_time"), "I cannot tell."])
    args = ["run", "Find the revenue and write it down", "--team", "--json", "--yes", "--no-answer-guard"]
    res = run_cli(*args, "--workspace", str(workspace), "--model", f"replay:{main}")
    assert res.exit_code == 1, res.output  # its only call failed and it says it cannot: an honest failure
    assert json.loads(res.stdout)["outcome"] == "failed"
    sid = json.loads(res.stdout)["session_id"]
    clock = [r for r in read_records(sessions_dir() / f"{sid}.jsonl") if r["kind"] == "tool_result"][0]
    assert clock["error_kind"] == "not_found" and "router left out" in clock["summary"] + json.dumps(clock)

    write_replay(router, [])  # resumed: the logged choice stands, the router is not asked again
    again = write_replay(tmp_path / "again.jsonl", [tool_call_text("get_current_time"), "Still no clock."])
    res = run_cli("run", "--continue", sid, "And now?", "--json", "--workspace", str(workspace),
                  "--model", f"replay:{again}", "--no-answer-guard")  # fmt: skip
    assert res.exit_code == 6, res.output  # an answer no successful call backs: unverified
    records = read_records(sessions_dir() / f"{sid}.jsonl")
    assert [r["kind"] for r in records].count("routed") == 1
    clock = [r for r in records if r["kind"] == "tool_result"][-1]
    assert clock["name"] == "get_current_time" and clock["error_kind"] == "not_found"


def test_the_labelled_sets_toolsets_are_among_those_the_labelled_role_would_see() -> None:
    """`tests/data/routing.jsonl`'s `toolsets` (what `scripts/team_routing.py` scores router_model's choice on)."""
    import importlib.util

    from hermes_local.runtime import role_catalog

    spec = importlib.util.spec_from_file_location("team_routing", Path(__file__).parents[2] / "scripts/team_routing.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    settings = load_settings({"agents": script.readme_profiles(), "allow_hosts": ["docs.example.com"]})
    registry = build_registry()
    rows = [r for r in script.labelled() if "toolsets" in r]
    assert len(rows) >= 40
    for r in rows:
        seen = role_catalog(settings, registry, r["agent"], db=True)
        assert r["toolsets"] and set(r["toolsets"]) <= set(seen), (r, list(seen))
    assert set(role_catalog(settings, registry, "manager", db=True)) == {
        "time",
        "files",
        "memory",
        "db",
        "shell",
        "web",
    }
