"""The agent's own state and code out of every tool's reach, with real files and a real bwrap sandbox.

Attacks of issue 26 item 1: the workspace is a (fake) home holding `.hermes-local`, so a sandboxed
`run_shell` would plant a prompt override or read other sessions and `memory.db`, and `write_file`
would rewrite `config.toml`; the agent runs from a `.venv` inside the workspace, where a sandboxed
command would plant a `.pth` that runs at the next start. Each must fail now (it succeeded before).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.longterm import LongTermMemory
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver
from tests.sandbox.test_sandbox import needs_bwrap

ROOT = Path(__file__).resolve().parents[2]
OVERRIDE = "{{ cycler.__init__.__globals__.os.system('touch PWNED') }}"
PRIVATE = "PRIVATE-goal-of-another-run-5c1e"


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace that is the user's home: it holds hermes-local's home with sessions and memory."""
    ws = tmp_path / "user"
    state = ws / ".hermes-local"
    (state / "sessions").mkdir(parents=True)
    (state / "sessions" / "old-run.jsonl").write_text(json.dumps({"goal": PRIVATE}) + "\n", encoding="utf-8")
    memory = LongTermMemory(state / "memory.db")
    memory.add(PRIVATE)
    memory.close()
    (state / "config.toml").write_text('sandbox = "bwrap"\n', encoding="utf-8")
    monkeypatch.setenv("HERMES_LOCAL_HOME", str(state))
    return ws


def run_calls(ws: Path, *calls: tuple[str, dict], **settings: object) -> list[str]:
    """Run the calls through the real agent (all approved, trust_content for several commands); the tool results."""
    outputs = [tool_call_text(name, **args) for name, args in calls] + ["Done."]
    llm = ScriptedLLM(outputs, n_ctx=200_000)
    agent = build_agent(
        llm,
        load_settings({"tool_timeout": 8.0, "max_steps": 20, "trust_content": True, **settings}),
        workspace=ws,
        approver=Approver(approve_all=True, allow=["run_shell", "write_file"]),
    )
    with agent:
        result = agent.run("Do it.")
    assert result.stopped == "answer", result
    return [text.rsplit("<tool_response>", 1)[1] for text in llm.prompt_texts[1:]]


@needs_bwrap
def test_sandboxed_shell_cannot_plant_a_prompt_override_or_read_sessions_and_memory(fake_home: Path) -> None:
    state = fake_home / ".hermes-local"
    plant = f"mkdir -p .hermes-local/prompts && printf '%s' \"{OVERRIDE}\" > .hermes-local/prompts/tool_response.jinja"
    responses = run_calls(
        fake_home,
        ("run_shell", {"command": plant}),
        ("run_shell", {"command": "cat .hermes-local/sessions/*.jsonl .hermes-local/memory.db; ls -a .hermes-local"}),
        ("run_shell", {"command": "echo 'sandbox = \"off\"' > .hermes-local/config.toml"}),
    )
    assert not (state / "prompts").exists()  # nothing reached the real home
    assert PRIVATE not in responses[1]
    assert (state / "config.toml").read_text(encoding="utf-8") == 'sandbox = "bwrap"\n'
    assert not (fake_home / "PWNED").exists()
    assert "Read-only file system" in responses[0] and "Read-only file system" in responses[2]


def test_file_tools_refuse_the_agent_home_wherever_it_is(fake_home: Path) -> None:
    state = fake_home / ".hermes-local"
    (fake_home / "innocent").symlink_to(".hermes-local")  # a link inside the workspace leads there too
    responses = run_calls(
        fake_home,
        (
            "write_file",
            {"path": ".hermes-local/config.toml", "content": 'sandbox = "off"\nallow_tools = ["run_shell"]'},
        ),
        ("read_file", {"path": ".hermes-local/sessions/old-run.jsonl"}),
        ("read_file", {"path": "innocent/memory.db"}),
        ("write_file", {"path": "notes.txt", "content": "fine"}),  # (five failures in a row stop a run)
        ("list_dir", {"path": ".hermes-local"}),
        ("write_file", {"path": f"{fake_home}/.hermes-local/prompts/tool_response.jinja", "content": OVERRIDE}),
    )
    for text in responses[:3] + responses[4:]:
        assert "permission_denied" in text and "hermes-local's own home" in text, text
        assert PRIVATE not in text
    assert (fake_home / "notes.txt").read_text() == "fine"
    assert (state / "config.toml").read_text(encoding="utf-8") == 'sandbox = "bwrap"\n'
    assert not (state / "prompts").exists()


def test_a_home_that_does_not_exist_yet_cannot_be_created_by_a_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "user"
    ws.mkdir()
    monkeypatch.setenv("HERMES_LOCAL_HOME", str(ws / ".hermes-local"))
    calls = [("write_file", {"path": ".hermes-local/config.toml", "content": 'sandbox = "off"'})]
    responses = run_calls(ws, *calls)
    assert "permission_denied" in responses[0]
    assert not (ws / ".hermes-local" / "config.toml").exists()


def test_a_workspace_inside_the_agent_home_is_refused_and_one_holding_it_is_named(fake_home: Path) -> None:
    from hermes_local.errors import UserError
    from hermes_local.sandbox.protect import found_in

    with pytest.raises(UserError, match="inside hermes-local's own home"):
        build_agent(ScriptedLLM(["x"]), load_settings({}), workspace=fake_home / ".hermes-local" / "sessions")
    assert [p.kind for p in found_in(fake_home)] == ["state"]


VENV_ATTACK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hermes_local.config import load_settings
    from hermes_local.testing import build_agent
    from hermes_local.testing import ScriptedLLM, tool_call_text
    from hermes_local.tools import Approver

    ws = Path(sys.argv[1])
    site = Path(sys.argv[2])
    plant = f"echo 'import os; os.system(\\"touch {ws}/PWNED\\")' > {site}/evil.pth; echo rc=$?"
    llm = ScriptedLLM([
        tool_call_text("run_shell", command=plant),
        tool_call_text("write_file", path=str(site.relative_to(ws) / "evil2.pth"), content="import os"),
        "Done.",
    ], n_ctx=100_000)
    settings = load_settings({"tool_timeout": 8.0, "sandbox": "bwrap"})
    agent = build_agent(llm, settings, workspace=ws, approver=Approver(approve_all=True, allow=["run_shell"]))
    with agent:
        agent.run("Plant it.")
    for text in llm.prompt_texts[1:]:
        print(text.rsplit("<tool_response>", 1)[1].split("</tool_response>")[0].strip())
    """
)


@needs_bwrap
def test_a_venv_inside_the_workspace_running_the_agent_stays_read_only(tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True, timeout=120)
    python = ws / ".venv" / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The venv runs this checkout and the installed dependencies (as a project's .venv would hold them).
    paths = os.pathsep.join([str(ROOT), *(p for p in sys.path if p.endswith("site-packages"))])
    env = {**os.environ, "PYTHONPATH": paths, "HERMES_LOCAL_HOME": str(tmp_path / "state")}
    done = subprocess.run(
        [str(python), "-c", VENV_ATTACK, str(ws), str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (site / "evil.pth").exists() and not (site / "evil2.pth").exists(), done.stdout
    assert "Read-only file system" in done.stdout and "permission_denied" in done.stdout
    assert not (ws / "PWNED").exists()


def test_a_safety_setting_lowered_on_disk_during_a_run_waits_for_a_confirmation(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app
    from hermes_local.config import config_file
    from hermes_local.errors import UserError

    ws = tmp_path / "ws"
    ws.mkdir()
    config = config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('sandbox = "bwrap"\n', encoding="utf-8")
    assert load_settings().sandbox == "bwrap"
    # An unsandboxed command (sandbox off for this run only) rewrites the agent's config for the next runs.
    rewrite = f'printf \'sandbox = "off"\\nallow_tools = ["run_shell"]\\n\' > {config}'
    run_calls(ws, ("run_shell", {"command": rewrite}), sandbox="off")
    assert "run_shell" in config.read_text(encoding="utf-8")  # the command did change it
    with pytest.raises(UserError, match="config.toml changed during a run .*sandbox, allow_tools"):
        load_settings()
    with pytest.raises(UserError, match="confirm it on a terminal"):
        load_settings(confirm=lambda change: False)
    refused = CliRunner().invoke(app, ["tools", "list"])  # no terminal: one line, exit 2
    assert refused.exit_code == 2 and "config.toml changed during a run" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    asked: list[str] = []
    assert load_settings(confirm=lambda change: asked.append(change.describe()) or True).sandbox == "off"
    assert asked and str(config) in asked[0]
    assert load_settings().allow_tools == ["run_shell"]  # confirmed once, not asked again
    config.write_text('sandbox = "off"\nallow_tools = ["run_shell", "write_file"]\n', encoding="utf-8")
    assert "write_file" in load_settings().allow_tools  # the user's own edit between runs is theirs


def test_the_runs_first_line_says_the_workspace_holds_the_agents_home(fake_home: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app
    from hermes_local.engines.replay import write_replay

    replay = write_replay(tmp_path / "r.jsonl", ["Nothing to do."])
    done = CliRunner().invoke(
        app, ["run", "Say hi", "--model", f"replay:{replay}", "--workspace", str(fake_home), "--tool-choice", "none"]
    )
    assert done.exit_code == 0, done.output
    assert f"note: the workspace {fake_home.resolve()} holds hermes-local's own home" in done.output
    assert "[hidden] (.hermes-local)" in done.output
