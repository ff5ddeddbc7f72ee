"""MCP servers as tools, against real servers: the reference `mcp-server-time` and `mcp-server-git` over
stdio, and our own server (tests/fixtures/mcp_test_server.py) over streamable HTTP on 127.0.0.1 and over stdio.

Covers: naming and schemas, permissions from annotations and config, result conversion (structured,
images), allow-lists, loopback-only URLs, start failures (one line with stderr, the run goes on), a
crash (tool_error, one restart), shutdown with the run, name clashes, `mcp list`, `tools list`, and
end-to-end runs with the replay model (approval, output cap, session log, resume) and the embedded model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import McpServerConfig, load_settings
from hermes_local.errors import UserError
from hermes_local.runtime import build_registry
from hermes_local.session import read_records, sessions_dir
from hermes_local.testing import build_agent, tool_call_text, write_replay
from hermes_local.tools import Approver, Executor, ToolContext, ToolRegistry
from hermes_local.tools.mcp import McpManager

sys.path.insert(0, str(Path(__file__).parents[2] / "fixtures"))
from tests.fixtures import mcp_test_server  # noqa: E402

call = tool_call_text
runner = CliRunner()
TEST_SERVER = str(Path(__file__).parents[2] / "fixtures" / "mcp_test_server.py")
# trusted: the user believes its annotations, so read-only tools are `read` (an untrusted server's floor is `write`)
TIME_SERVER = {
    "command": sys.executable,
    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    "trusted": True,
}
BROKEN_SERVER = {
    "command": sys.executable,
    "args": ["-c", "import sys; sys.stderr.write('missing API token\\n'); sys.exit(2)"],
}


@pytest.fixture
def notes_url() -> Iterator[str]:
    mcp_test_server.NOTES.clear()
    with mcp_test_server.serve_http() as url:
        yield url


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "hello.txt").write_text("hello\n")
    subprocess.run([*git, "add", "hello.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "First commit: hello"], check=True)
    (repo / "hello.txt").write_text("hello world\n")
    return repo


def write_config(home: Path, servers: dict[str, dict[str, Any]], extra: str = "") -> None:
    lines = [extra]
    for name, server in servers.items():
        lines.append(f"[mcp.servers.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in server.items()]
    path = home / "hermes" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def manager(servers: dict[str, dict[str, Any]], notices: list[str] | None = None, **kw: Any) -> McpManager:
    configs = {name: McpServerConfig(**server) for name, server in servers.items()}
    return McpManager(configs, on_notice=(notices.append if notices is not None else None), **kw)


def executor_for(m: McpManager, workspace: Path) -> Executor:
    registry = ToolRegistry()
    for t, source in m.tools():
        registry.register(t, source=source)
    return Executor(registry, ToolContext(workspace=workspace), Approver(interactive=False))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of this process counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_time_server_over_stdio(workspace: Path) -> None:
    m = manager({"time": TIME_SERVER})
    try:
        ex = executor_for(m, workspace)
        assert ex.registry.names() == ["time__get_current_time", "time__convert_time"]
        t = ex.registry.get("time__get_current_time")
        assert t is not None and t.permission == "read" and ex.registry.source(t.name) == "mcp:time"
        assert t.parameters_schema()["required"] == ["timezone"] and "title" not in t.parameters_schema()
        ok = ex.execute("time__get_current_time", {"timezone": "Europe/Paris"})
        assert ok.ok and ok.data["timezone"] == "Europe/Paris" and ok.data["datetime"].startswith("20")
        bad = ex.execute("time__get_current_time", {"zone": "UTC"})  # checked here, never sent
        assert bad.error_kind == "invalid_arguments" and "timezone" in (bad.error or "")
        err = ex.execute("time__get_current_time", {"timezone": "Mars/Olympus"})
        assert err.error_kind == "tool_error" and "Mars/Olympus" in (err.error or "")
    finally:
        m.close()
    assert m.servers["time"].status == "stopped"


def test_git_server_on_a_temporary_repository(workspace: Path, git_repo: Path) -> None:
    git = {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(git_repo)], "trusted": True}
    m = manager({"git": git})
    try:
        ex = executor_for(m, workspace)
        names = ex.registry.names()
        assert "git__git_status" in names and "git__git_log" in names and len(names) >= 10
        assert ex.registry.get("git__git_status").permission == "read"  # type: ignore[union-attr]
        assert ex.registry.get("git__git_commit").permission in ("write", "dangerous")  # type: ignore[union-attr]
        log = ex.execute("git__git_log", {"repo_path": str(git_repo)})
        assert log.ok and "First commit: hello" in json.dumps(log.data)
        diff = ex.execute("git__git_diff_unstaged", {"repo_path": str(git_repo)})
        assert diff.ok and "+hello world" in json.dumps(diff.data)
        commit = ex.execute("git__git_commit", {"repo_path": str(git_repo), "message": "x"})
        assert commit.error_kind == "permission_denied"  # write tools still need approval
    finally:
        m.close()
    only = manager({"git": {**git, "tools": ["git_status", "git_log"]}})
    try:
        assert [t.name for t, _ in only.tools()] == ["git__git_status", "git__git_log"]
    finally:
        only.close()


def test_own_server_over_http_permissions_and_results(workspace: Path, notes_url: str) -> None:
    untrusted = manager({"notes": {"url": notes_url}})
    try:  # annotations of a server not marked trusted may raise a permission, never lower it below write
        perms = {t.name: t.permission for t, _ in untrusted.tools()}
        assert perms["notes__add"] == "write" and perms["notes__fetch_remote"] == "dangerous"
    finally:
        untrusted.close()
    m = manager({"notes": {"url": notes_url, "trusted": True}})
    try:
        ex = executor_for(m, workspace)
        perms = {t.name: t.permission for t in ex.registry}
        assert perms["notes__add"] == "read" and perms["notes__save_note"] == "write"
        assert perms["notes__fetch_remote"] == "dangerous"  # openWorldHint, even though read-only
        assert ex.execute("notes__add", {"a": 2, "b": 40}).data == 42
        picture = ex.execute("notes__picture", {})
        assert picture.ok and picture.data.startswith("a 1x1 pixel\n[image image/png, about")
        assert "iVBOR" not in picture.data  # described, not pasted
        assert all(not t.cacheable for t in ex.registry)
    finally:
        m.close()
    configured = manager({"notes": {"url": notes_url, "permission": "dangerous", "cache": True}})
    try:
        assert {(t.permission, t.cacheable) for t, _ in configured.tools()} == {("dangerous", True)}
    finally:
        configured.close()


def test_timeout_and_resource_results(workspace: Path, notes_url: str) -> None:
    from mcp import types

    m = manager({"notes": {"url": notes_url, "timeout": 1, "trusted": True}})
    try:
        ex = executor_for(m, workspace)
        slow = ex.execute("notes__slow", {"seconds": 5})
        assert slow.error_kind == "timeout" and "1 s" in (slow.error or "")
        assert ex.execute("notes__add", {"a": 1, "b": 1}).data == 2  # the connection is still usable
    finally:
        m.close()
    from hermes_local.tools.mcp.results import to_tool_result

    result = types.CallToolResult(
        content=[
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", mime_type="text/plain", text="alpha"),
            ),
            types.EmbeddedResource(
                type="resource", resource=types.BlobResourceContents(uri="file:///b.bin", blob="AAAAAAAA")
            ),
            types.ResourceLink(type="resource_link", name="report", uri="file:///r.md", description="the report"),
        ]
    )
    data = to_tool_result("x__y", result).data
    assert data.splitlines() == [
        "[resource file:///a.txt text/plain]",
        "alpha",
        "[resource file:///b.bin, about 6 bytes of binary data, not shown]",
        "[resource link report: file:///r.md - the report]",
    ]


def test_only_loopback_or_allow_listed_urls(notes_url: str) -> None:
    notices: list[str] = []
    m = manager({"far": {"url": "http://mcp.example.com/mcp"}, "notes": {"url": notes_url}}, notices)
    try:
        assert {s for _, s in m.tools()} == {"mcp:notes"}
    finally:
        m.close()
    assert notices == [
        "MCP server far: host mcp.example.com is neither loopback nor in allow_hosts; add it to allow_hosts "
        "to use it; continuing without its tools"
    ]


def test_crash_gives_tool_error_then_one_restart_and_close_stops_it(tmp_path: Path, workspace: Path) -> None:
    pids = tmp_path / "pids.txt"
    m = manager({"own": {"command": sys.executable, "args": [TEST_SERVER, str(pids)], "trusted": True}})
    try:
        ex = executor_for(m, workspace)
        first = ex.execute("own__die", {})
        assert first.error_kind == "tool_error" and "dying on request" in (first.error or "")
        assert "It was restarted" in (first.error or "")
        assert ex.execute("own__add", {"a": 1, "b": 2}).data == 3  # the restarted server answers
        second = ex.execute("own__die", {})
        assert "already restarted once" in (second.error or "")
        gone = ex.execute("own__add", {"a": 1, "b": 2})
        assert gone.error_kind == "tool_error" and "not running" in (gone.error or "")
    finally:
        m.close()
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2 and not any(pid_alive(p) for p in started)


def test_a_server_that_crashes_for_good_mid_run_is_an_mcp_failed_event(
    tmp_path: Path, workspace: Path, hermetic_home: Path
) -> None:
    pids = tmp_path / "pids.txt"
    write_config(
        hermetic_home,
        {"own": {"command": sys.executable, "args": [TEST_SERVER, str(pids)], "sandbox": False, "trusted": True}},
    )
    script = [call("own__die"), call("own__die"), call("own__add", a=1, b=2), "It is gone."]
    replay = write_replay(tmp_path / "r.jsonl", script)
    res = runner.invoke(app, ["run", "t", "--json", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 6, res.stderr  # every call failed: the answer is unverified (issue 42)
    out = json.loads(res.stdout)
    assert [f["server"] for f in out["mcp_failed"]] == ["own"]
    assert "stopped during die" in out["mcp_failed"][0]["error"]
    kinds = [r["kind"] for r in read_records(sessions_dir() / f"{out['session_id']}.jsonl")]
    # logged once, right after the turn in which the restarted server crashed again (step 2)
    assert kinds.count("mcp_failed") == 1
    step_starts = [i for i, k in enumerate(kinds) if k == "step_start"]
    assert step_starts[1] < kinds.index("mcp_failed") < step_starts[2]


def test_name_clash_between_module_and_server_is_one_line(tmp_path: Path, hermetic_home: Path, notes_url: str) -> None:
    module = tmp_path / "mine.py"
    module.write_text(
        'from hermes_local.tools import tool\n\n@tool\ndef notes__add(a: int) -> int:\n    """Add."""\n    return a\n'
    )
    write_config(hermetic_home, {"notes": {"url": notes_url}})
    with pytest.raises(UserError, match=r"'notes__add' from mcp:notes is already taken by module:.*mine\.py"):
        build_registry([str(module)], load_settings())


def test_failing_server_is_one_line_with_stderr_and_the_run_goes_on(
    tmp_path: Path, workspace: Path, hermetic_home: Path
) -> None:
    write_config(hermetic_home, {"broken": BROKEN_SERVER, "missing": {"command": "no-such-mcp-server-xyz"}})
    replay = write_replay(tmp_path / "r.jsonl", [call("get_current_time"), "It is late."])
    res = runner.invoke(app, ["run", "t", "--json", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["answer"] == "It is late."
    lines = res.stderr.splitlines()
    broken = [line for line in lines if "MCP server broken" in line]
    assert len(broken) == 1 and "failed to start" in broken[0] and "stderr: missing API token" in broken[0]
    assert broken[0].endswith("continuing without its tools")
    assert any("MCP server missing: command 'no-such-mcp-server-xyz' was not found" in line for line in lines)
    # The failures are typed events in the session log (after run_start), in `--json` and in `sessions show`.
    out = json.loads(res.stdout)
    assert {f["server"]: f["error"] for f in out["mcp_failed"]}.keys() == {"broken", "missing"}
    assert "missing API token" in next(f["error"] for f in out["mcp_failed"] if f["server"] == "broken")
    records = read_records(sessions_dir() / f"{out['session_id']}.jsonl")
    kinds = [r["kind"] for r in records]
    assert kinds[:3] == ["run_start", "mcp_failed", "mcp_failed"]
    failed = {r["server"]: r["error"] for r in records if r["kind"] == "mcp_failed"}
    assert "stderr: missing API token" in failed["broken"] and "was not found" in failed["missing"]
    shown = runner.invoke(app, ["sessions", "show", out["session_id"]])
    assert shown.exit_code == 0
    broken_lines = [line for line in shown.stdout.splitlines() if "MCP server broken failed to start" in line]
    assert len(broken_lines) == 1 and "missing API token" in broken_lines[0]
    assert broken_lines[0].endswith("the run went on without its tools)")
    raw = runner.invoke(app, ["sessions", "show", out["session_id"], "--json"]).stdout.splitlines()
    assert sum(json.loads(line)["kind"] == "mcp_failed" for line in raw) == 2


def test_end_to_end_replay_approval_cap_log_and_resume(
    tmp_path: Path, workspace: Path, hermetic_home: Path, notes_url: str
) -> None:
    pids = tmp_path / "pids.txt"
    own = {"command": sys.executable, "args": [TEST_SERVER, str(pids)], "sandbox": False}  # writes its pid here
    write_config(hermetic_home, {"notes": {"url": notes_url, "trusted": True}, "time": TIME_SERVER, "own": own})
    script = [
        call("notes__save_note", text="first"),
        call("notes__big_output", lines=3000),
        call("time__get_current_time", timezone="UTC"),
        "All done.",
    ]
    base = ["run", "Save a note", "--json", "--workspace", str(workspace)]
    denied = runner.invoke(app, [*base, "--model", f"replay:{write_replay(tmp_path / 'a.jsonl', script)}"])
    assert denied.exit_code == 0, denied.stderr
    out = json.loads(denied.stdout)
    assert [(c["name"], c["ok"], c["error_kind"]) for c in out["tool_calls"]] == [
        ("notes__save_note", False, "permission_denied"),  # write tool, no terminal, not --allow'ed
        ("notes__big_output", True, None),
        ("time__get_current_time", True, None),
    ]
    assert mcp_test_server.NOTES == []
    events = read_records(sessions_dir() / f"{out['session_id']}.jsonl")
    results = {e["name"]: e for e in events if e["kind"] == "tool_result"}
    assert results["notes__save_note"]["approval"] == "no_terminal"
    assert "output truncated" in results["notes__big_output"]["summary"]
    assert len(results["notes__big_output"]["data"]) < 9000  # capped like any tool
    assert results["time__get_current_time"]["data"]["timezone"] == "UTC"
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 1 and not pid_alive(started[0])  # the stdio server stopped with the run

    # Approved; then the log is cut after step 1 (a crash) and the run resumed: the write is not redone.
    allowed = runner.invoke(
        app,
        [*base, "--allow", "notes__save_note", "--model", f"replay:{write_replay(tmp_path / 'b.jsonl', script)}"],
    )
    session_id = json.loads(allowed.stdout)["session_id"]
    assert mcp_test_server.NOTES == ["first"]
    path = sessions_dir() / f"{session_id}.jsonl"
    kept = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "step_start" and event["step"] == 2:
            break
        kept.append(line)
    path.write_text("\n".join(kept) + "\n")
    resumed = runner.invoke(
        app,
        [
            "run",
            "--resume",
            session_id,
            "--json",
            "--workspace",
            str(workspace),
            "--allow",
            "notes__save_note",
            "--trust-content",  # the logged MCP results are untrusted: save_note (open-world) would be asked again
            "--model",
            f"replay:{write_replay(tmp_path / 'c.jsonl', [call('notes__save_note', text='first'), 'Resumed.'])}",
        ],
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout)["answer"] == "Resumed."
    assert mcp_test_server.NOTES == ["first"]
    again = [e for e in read_records(path) if e["kind"] == "tool_result" and e["step"] == 2]
    assert "already done" in again[0]["summary"]


def test_mcp_list_and_tools_list(hermetic_home: Path, notes_url: str) -> None:
    empty = runner.invoke(app, ["mcp", "list"])
    assert empty.exit_code == 0 and "no MCP servers configured" in empty.stdout
    write_config(hermetic_home, {"notes": {"url": notes_url, "trusted": True}, "broken": BROKEN_SERVER})
    res = runner.invoke(app, ["mcp", "list"])
    assert res.exit_code == 1, res.stderr  # "broken" did not start
    lines = res.stdout.splitlines()
    assert lines[0].split()[:4] == ["notes", "running", "20", "tools"]
    assert lines[1].split()[:4] == ["broken", "failed", "0", "tools"] and "missing API token" in lines[2]
    rows = json.loads(runner.invoke(app, ["mcp", "list", "--json"]).stdout)
    assert rows[0]["tool_names"][0] == "notes__add" and rows[1]["status"] == "failed"
    listed = runner.invoke(app, ["tools", "list"])
    assert "notes__add(a: integer, b: integer)  [read] [notes, mcp:notes]" in listed.stdout
    assert "get_current_time()  [read] [time, builtin]" in listed.stdout
    only = runner.invoke(app, ["tools", "list", "--tools", "notes,get_current_time"])
    assert len(only.stdout.splitlines()) == 22  # 21 tools > 8: open_toolset is offered too
    assert only.stdout.splitlines()[-1].startswith("open_toolset(toolset: string)  [read] [routing, builtin]")


@pytest.mark.real_model
def test_embedded_model_calls_an_mcp_tool_through_the_loop(
    real_llm: Any, workspace: Path, hermetic_home: Path, notes_url: str
) -> None:
    write_config(hermetic_home, {"notes": {"url": notes_url, "tools": ["add"], "trusted": True}})
    settings = load_settings(
        {
            "tools": ["notes"],
            "tool_choice": "required",
            "max_steps": 1,
            "max_tokens": 64,
            "deny_tools": ["final_answer"],
        }
    )
    registry = build_registry([], settings)
    events: list[Any] = []
    agent = build_agent(real_llm, settings, workspace=workspace, registry=registry, on_event=events.append)
    try:
        result = agent.run("Add 2 and 3.")
    finally:
        agent.close()
    assert result.tool_calls and result.tool_calls[0].name == "notes__add"
    outcome = next(e.to_dict() for e in events if e.kind == "tool_result")
    assert outcome["ok"] and outcome["data"] == outcome["arguments"]["a"] + outcome["arguments"]["b"]
