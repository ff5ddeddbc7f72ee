"""What we take from a real MCP server's listing (tests/fixtures/mcp_raw_server.py over stdio): schemas that would
fetch a URL, recurse or backtrack for minutes; a name listed twice; non-JSON lines on stdout; 3,000 tools.

Issue 26 items 4 and 8 (MCP): validation fetches nothing (a real loopback listener must see no request), a bad
schema is one line naming the tool and the run goes on, a pattern cannot hold a call for 50 s.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import McpServerConfig
from hermes_local.testing import tool_call_text, write_replay
from hermes_local.tools import Approver, Executor, ToolContext, ToolRegistry
from hermes_local.tools.mcp import McpManager

RAW_SERVER = str(Path(__file__).parents[2] / "fixtures" / "mcp_raw_server.py")
OK_TOOL = {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A real HTTP server on 127.0.0.1 that records every request it gets (it must get none)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.path)
            body = json.dumps({"type": "string"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def raw_server(tmp_path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / f"spec-{len(list(tmp_path.glob('spec-*')))}.json"
    path.write_text(json.dumps(spec))
    return {"command": sys.executable, "args": [RAW_SERVER, str(path)], "sandbox": False}


def start(tmp_path: Path, spec: dict[str, Any], notices: list[str]) -> McpManager:
    return McpManager({"raw": McpServerConfig(**raw_server(tmp_path, spec))}, on_notice=notices.append)


def executor(m: McpManager, workspace: Path) -> Executor:
    registry = ToolRegistry()
    for t, source in m.tools():
        registry.register(t, source=source)
    return Executor(registry, ToolContext(workspace=workspace), Approver(interactive=False, allow=registry.names()))


def test_a_remote_ref_is_refused_at_listing_and_nothing_is_fetched(
    tmp_path: Path, workspace: Path, listener: tuple[int, list[str]]
) -> None:
    port, seen = listener
    remote = {"type": "object", "properties": {"x": {"$ref": f"http://127.0.0.1:{port}/schema.json"}}}
    relative = {"$id": f"http://127.0.0.1:{port}/base.json", "type": "object", "properties": {"y": {"$ref": "y.json"}}}
    spec = {"tools": [OK_TOOL, {"name": "ssrf", "inputSchema": remote}, {"name": "rel", "inputSchema": relative}]}
    notices: list[str] = []
    m = start(tmp_path, spec, notices)
    try:
        ex = executor(m, workspace)
        assert ex.registry.names() == ["raw__echo"]
        refused = [n for n in notices if "non-local $ref" in n]
        assert len(refused) == 2 and "raw__ssrf" in refused[0] and "raw__rel" in refused[1]
        assert all("\n" not in n for n in notices)
        for name, args in (("raw__ssrf", {"x": "a"}), ("raw__rel", {"y": "b"})):
            assert not ex.execute(name, args).ok  # not a tool of this run
    finally:
        m.close()
    assert seen == []


def test_validation_never_retrieves_even_when_the_listing_check_is_bypassed(listener: tuple[int, list[str]]) -> None:
    from hermes_local.tools.mcp.results import arguments_model

    port, seen = listener
    schema = {"type": "object", "properties": {"x": {"$ref": f"http://127.0.0.1:{port}/schema.json"}}}
    model = arguments_model("t", schema)
    with pytest.raises(ValueError, match="Unresolvable|could not be applied"):
        model.model_validate({"x": "a"})
    assert seen == []


def test_a_registry_refuses_a_given_schema_with_a_remote_ref_in_one_line() -> None:
    from hermes_local.errors import UserError
    from hermes_local.tools.mcp.results import arguments_model
    from hermes_local.tools.registry import Tool

    schema = {"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}}
    t = Tool("lib__t", "d", lambda **kw: kw, arguments_model("lib__t", {"type": "object"}), input_schema=schema)
    with pytest.raises(UserError, match=r"tool lib__t: .*non-local \$ref"):
        ToolRegistry().register(t, source="module:lib")


def test_recursive_ref_and_invalid_schemas_are_one_line_each_and_the_run_goes_on(
    tmp_path: Path, workspace: Path
) -> None:
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
    recursive = {"type": "object", "$defs": {"node": node}, "properties": {"root": {"$ref": "#/$defs/node"}}}
    spec = {
        "tools": [
            {"name": "tree", "inputSchema": recursive},
            {"name": "self", "inputSchema": {"type": "object", "properties": {"a": {"$ref": "#"}}}},
            {"name": "dangling", "inputSchema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}},
            {"name": "listy", "inputSchema": {"type": "object", "properties": {"a": {"type": 5}}}},
            OK_TOOL,
        ]
    }
    notices: list[str] = []
    m = start(tmp_path, spec, notices)
    try:
        assert executor(m, workspace).registry.names() == ["raw__echo"]
    finally:
        m.close()
    assert any("raw__tree" in n and "recursive $ref" in n for n in notices)
    assert any("raw__self" in n and "recursive $ref" in n for n in notices)
    assert any("raw__dangling" in n and "does not resolve" in n for n in notices)
    assert any("raw__listy" in n and "invalid" in n for n in notices)


def test_a_backtracking_pattern_is_bounded_in_time(tmp_path: Path, workspace: Path) -> None:
    patterns = {"a": {"type": "string", "pattern": "^(a+)+$"}, "b": {"type": "string", "pattern": "^(a|aa)+$"}}
    keyed = {"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "string"}}, "additionalProperties": False}
    spec = {
        "tools": [
            {"name": "pat", "inputSchema": {"type": "object", "properties": patterns}},
            {"name": "keys", "inputSchema": keyed},
        ]
    }
    m = start(tmp_path, spec, [])
    try:
        ex = executor(m, workspace)
        evil = "a" * 31 + "!"
        for name, args in (("raw__pat", {"a": evil}), ("raw__pat", {"b": evil}), ("raw__keys", {evil: "x"})):
            began = time.monotonic()
            result = ex.execute(name, args)
            assert time.monotonic() - began < 10  # the `re` engine took 50 s and more
            assert not result.ok and result.error_kind == "invalid_arguments"
        assert ex.execute("raw__pat", {"a": "aaa", "b": "aa"}).ok  # a fine value still passes
    finally:
        m.close()


def test_a_name_listed_twice_keeps_one_with_a_warning(tmp_path: Path, workspace: Path) -> None:
    notices: list[str] = []
    m = start(tmp_path, {"tools": [OK_TOOL, {**OK_TOOL, "description": "again"}]}, notices)
    try:
        ex = executor(m, workspace)
        assert ex.registry.names() == ["raw__echo"]
        assert ex.execute("raw__echo", {"text": "hi"}).ok
    finally:
        m.close()
    assert notices == ["MCP server raw lists tool echo more than once; keeping the first"]


def test_non_json_lines_on_stdout_are_one_notice_not_tracebacks(
    tmp_path: Path, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    notices: list[str] = []
    m = start(tmp_path, {"tools": [OK_TOOL], "noise": 3}, notices)
    try:
        assert executor(m, workspace).execute("raw__echo", {"text": "hi"}).ok
    finally:
        m.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Failed to parse" not in err
    assert [n for n in notices if "Failed to parse JSONRPC message" in n] == [
        "MCP: Failed to parse JSONRPC message from server"
    ]


def test_a_server_with_3000_tools_does_not_make_the_run_fail(
    tmp_path: Path, workspace: Path, hermetic_home: Path
) -> None:
    config = hermetic_home / "hermes" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    server = raw_server(tmp_path, {"tools": [OK_TOOL], "many": 3000})
    config.write_text("[mcp.servers.raw]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in server.items()))
    script = [tool_call_text("raw__t7"), "Done."]
    replay = write_replay(tmp_path / "r.jsonl", script)
    args = ["run", "Use t7", "--json", "--workspace", str(workspace), "--allow", "raw__t7"]
    result = CliRunner().invoke(app, [*args, "--model", f"replay:{replay}"])
    assert result.exit_code == 0, result.output[-2000:]
    out = json.loads(result.stdout)
    assert [(c["name"], c["ok"]) for c in out["tool_calls"]] == [("raw__t7", True)]


def test_allow_hosts_on_a_stdio_server_is_said_to_mean_the_whole_network(tmp_path: Path) -> None:
    """Issue 26 item 8 (MCP): one allowed host gave a stdio server the whole network, silently."""
    notices: list[str] = []
    config = {**raw_server(tmp_path, {"tools": [OK_TOOL]}), "sandbox": True, "allow_hosts": ["api.example.org"]}
    config["full_network"] = True  # without it the config is refused (issue 43: tests/tools/mcp/test_mcp_network.py)
    m = McpManager({"raw": McpServerConfig(**config)}, on_notice=notices.append)
    try:
        m.start()
    finally:
        m.close()
    assert any("whole network" in n and "api.example.org" in n and "raw" in n for n in notices), notices


def test_an_unsandboxed_servers_daemon_does_not_outlive_the_run(tmp_path: Path) -> None:
    """Issue 26 item 8 (MCP): with `sandbox = false` a server's daemon (setsid grandchild) outlived the run."""
    import os

    pidfile = tmp_path / "daemon.pid"
    m = start(tmp_path, {"tools": [OK_TOOL], "daemon": str(pidfile)}, [])
    try:
        assert [t.name for t, _ in m.tools()] == ["raw__echo"]
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()):
            assert time.monotonic() < deadline, "the daemon never started"
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        os.kill(pid, 0)  # alive while the run is
    finally:
        m.close()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, f"daemon {pid} outlived the run"
        time.sleep(0.05)
