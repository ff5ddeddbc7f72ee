"""Issue 43 item 6 (MCP): `allow_hosts` on a sandboxed stdio server used to give it the whole network, the host's
127.0.0.1 services included, silently. Now the config refuses it without `full_network = true`, `mcp list` says
what network each server reaches, and a sandboxed server without it reaches nothing on the host. A real MCP
server (tests/fixtures/mcp_test_server.py over stdio, in bwrap) probes a real TCP listener on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import McpServerConfig
from hermes_local.sandbox.policy import SandboxPolicy, bwrap_status
from hermes_local.tools import Approver, ToolRegistry
from hermes_local.tools.execution import Executor
from hermes_local.tools.mcp import McpManager
from hermes_local.tools.registry import ToolContext

SERVER = str(Path(__file__).parents[2] / "fixtures" / "mcp_test_server.py")
needs_bwrap = pytest.mark.skipif(not bwrap_status()[0], reason="needs a working bwrap")


@contextlib.contextmanager
def host_service() -> Iterator[int]:
    """A TCP service on the host's 127.0.0.1 that greets whoever connects; yields its port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = sock.accept()
                conn.sendall(b"host-secret")
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        sock.close()


def server(folder: Path, **extra: Any) -> dict[str, Any]:
    """A stdio server config; its script is copied into `folder` (the sandbox shows the server only that)."""
    script = folder / "mcp_test_server.py"
    script.write_text(Path(SERVER).read_text())
    args = [str(script)]
    return {"command": sys.executable, "args": args, "env": {"MCP_TEST_PROBE": "1"}, "sandbox": True} | extra


def probe(config: dict[str, Any], workspace: Path, port: int) -> str:
    m = McpManager({"notes": McpServerConfig(**config)}, sandbox=SandboxPolicy(), workspace=workspace)
    try:
        m.start()
        registry = ToolRegistry()
        for t, source in m.tools():
            registry.register(t, source=source)
        approver = Approver(interactive=False, allow=["notes__probe"])
        executor = Executor(registry, ToolContext(workspace=workspace), approver)
        result = executor.execute("notes__probe", {"port": port})
        assert result.ok, result.summary
        return str(result.data)
    finally:
        m.close()


def test_allow_hosts_without_full_network_is_refused_in_one_line(hermetic_home: Path, workspace: Path) -> None:
    with pytest.raises(ValidationError) as err:
        McpServerConfig(**server(workspace, allow_hosts=["api.example.org"]))
    assert "add full_network = true to accept that, or remove allow_hosts" in str(err.value)
    config = hermetic_home / "hermes" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    command = json.dumps(sys.executable)
    config.write_text(f'[mcp.servers.notes]\ncommand = {command}\nallow_hosts = ["api.example.org"]\n')
    res = CliRunner().invoke(app, ["mcp", "list"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert "full_network = true" in res.stderr and "Traceback" not in res.output


@needs_bwrap
def test_a_sandboxed_server_reaches_nothing_on_the_host_and_full_network_is_said_plainly(
    workspace: Path, hermetic_home: Path
) -> None:
    with host_service() as port:
        assert probe(server(workspace), workspace, port).startswith("unreachable")
        opened = server(workspace, allow_hosts=["api.example.org"], full_network=True)
        assert probe(opened, workspace, port) == "connected: host-secret"  # what full_network means, as documented
    config = hermetic_home / "hermes" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    script = json.dumps(str(workspace / "mcp_test_server.py"))
    lines = ["[mcp.servers.closed]", f"command = {json.dumps(sys.executable)}", f"args = [{script}]"]
    lines += [f"cwd = {json.dumps(str(workspace))}"]
    lines += ["[mcp.servers.opened]", f"command = {json.dumps(sys.executable)}", f"args = [{script}]"]
    lines += [f"cwd = {json.dumps(str(workspace))}"]
    lines += ['allow_hosts = ["api.example.org"]', "full_network = true"]
    config.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(app, ["mcp", "list"])
    assert res.exit_code == 0, res.output
    assert "network: none (sandboxed, its own loopback only)" in res.stdout
    assert "network: FULL (full_network = true, meant for api.example.org; the host's 127.0.0.1 included)" in res.stdout
    rows = json.loads(CliRunner().invoke(app, ["mcp", "list", "--json"]).stdout)
    assert [r["network"].split(" ")[0] for r in rows] == ["none", "FULL"]
