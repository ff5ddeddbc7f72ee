"""MCP stdio commands are found beside the running interpreter (a virtualenv's `bin/`) before PATH (issue 29)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import McpServerConfig
from hermes_local.tools.mcp.launch import McpStartError, stdio_parameters

SERVER = Path(__file__).parents[2] / "fixtures" / "mcp_test_server.py"


@pytest.fixture
def venv_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A virtualenv-like bin/ holding `python` (the real one) and an `my-mcp-server` script, not on PATH."""
    folder = tmp_path / "venv" / "bin"
    folder.mkdir(parents=True)
    (folder / "python").symlink_to(sys.executable)
    script = folder / "my-mcp-server"
    script.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[1:] = []\n"
        f"runpy.run_path({str(SERVER)!r}, run_name='__main__')\n"
    )
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(folder / "python"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return folder


def test_a_command_beside_the_interpreter_is_found_before_path(venv_bin: Path) -> None:
    params = stdio_parameters("mine", McpServerConfig(command="my-mcp-server"))
    assert params.command == str(venv_bin / "my-mcp-server")


def test_a_missing_command_names_both_places_it_looked(venv_bin: Path) -> None:
    with pytest.raises(McpStartError) as err:
        stdio_parameters("gone", McpServerConfig(command="mcp-server-nowhere"))
    assert f"beside the running Python ({venv_bin})" in str(err.value) and "PATH" in str(err.value)


def test_mcp_list_starts_a_server_from_the_venv_bin_without_an_activated_venv(
    venv_bin: Path, hermetic_home: Path
) -> None:
    config = hermetic_home / "hermes" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('sandbox = "off"\n[mcp.servers.mine]\ncommand = "my-mcp-server"\n')
    res = CliRunner().invoke(app, ["mcp", "list", "--json"], env={"PATH": os.environ["PATH"]})
    rows = json.loads(res.stdout)
    assert rows[0]["status"] == "running" and rows[0]["tools"] > 0, rows
    assert res.exit_code == 0
