"""User instructions (--instructions TEXT|@FILE, config), prompt overrides in the home, chat options."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay

runner = CliRunner()


def run(tmp_path: Path, workspace: Path, outputs: list[str], *args: str):
    replay = write_replay(tmp_path / "r.jsonl", outputs)
    return runner.invoke(app, ["run", "Say hi.", "--model", f"replay:{replay}", "--workspace", str(workspace), *args])


def system_prompt_seen(workspace: Path, **settings: object) -> str:
    from hermes_local.config import load_settings
    from hermes_local.testing import ScriptedLLM, build_agent

    llm = ScriptedLLM(["hi"])
    build_agent(llm, load_settings(settings), workspace=workspace).run("Say hi.")
    return llm.prompt_texts[0].split("<|im_start|>user", 1)[0]  # the system turns (dialect tool block, rules)


def test_instructions_text_and_file_reach_the_system_prompt(tmp_path: Path, workspace: Path) -> None:
    from hermes_local.cli.common import read_instructions

    res = run(tmp_path, workspace, ["hi"], "--instructions", "Default to the last 7 days and say so.", "--json")
    assert res.exit_code == 0, res.output
    rules = tmp_path / "rules.txt"
    rules.write_text("Always answer in French.\n", encoding="utf-8")
    res = run(tmp_path, workspace, ["hi"], "--instructions", f"@{rules}", "--json")
    assert res.exit_code == 0, res.output
    assert read_instructions(f"@{rules}") == "Always answer in French."
    assert "Always answer in French." in system_prompt_seen(workspace, instructions=read_instructions(f"@{rules}"))


def test_instructions_file_missing_is_one_line_exit_2(tmp_path: Path, workspace: Path) -> None:
    res = run(tmp_path, workspace, ["hi"], "--instructions", "@/no/such/rules.txt")
    assert res.exit_code == 2 and "--instructions @/no/such/rules.txt" in res.stderr
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1


def test_config_instructions(tmp_path: Path, workspace: Path) -> None:
    home = Path(os.environ["HERMES_LOCAL_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('instructions = "Sign every answer with -- H."\n', encoding="utf-8")
    from hermes_local.config import load_settings
    from hermes_local.testing import ScriptedLLM, build_agent

    llm = ScriptedLLM(["hi"])
    build_agent(llm, load_settings(), workspace=workspace).run("Say hi.")
    assert "Sign every answer with -- H." in llm.prompt_texts[0].split("<|im_start|>user", 1)[0]


def test_prompt_override_replaces_a_shipped_template(tmp_path: Path, workspace: Path) -> None:
    folder = Path(os.environ["HERMES_LOCAL_HOME"]) / "prompts"
    folder.mkdir(parents=True)
    (folder / "goal_reminder.jinja").write_text("REMEMBER THE GOAL: {{ goal }} ({{ progress }})\n", encoding="utf-8")
    from hermes_local.config import load_settings
    from hermes_local.testing import ScriptedLLM, build_agent

    llm = ScriptedLLM([call("get_current_time"), call("list_dir"), call("get_current_time"), "done"])
    build_agent(llm, load_settings({"reminder_every": 3}), workspace=workspace).run("Tell the time.")
    assert "REMEMBER THE GOAL: Tell the time." in llm.prompt_texts[3]
    assert "Reminder - the goal is" not in llm.prompt_texts[3]


def test_bad_prompt_overrides_are_one_line_errors(tmp_path: Path, workspace: Path) -> None:
    folder = Path(os.environ["HERMES_LOCAL_HOME"]) / "prompts"
    folder.mkdir(parents=True)
    broken = folder / "system.jinja"
    broken.write_text("{% if tools %}unclosed\n", encoding="utf-8")
    res = run(tmp_path, workspace, ["hi"])
    assert res.exit_code == 2 and "system.jinja" in res.stderr and "Traceback" not in res.output
    broken.unlink()
    (folder / "sytem.jinja").write_text("typo in the name\n", encoding="utf-8")
    res = run(tmp_path, workspace, ["hi"])
    assert res.exit_code == 2 and "does not replace a shipped template" in res.stderr
    (folder / "sytem.jinja").unlink()
    (folder / "system.jinja").write_text("{{ no_such_variable }}\n", encoding="utf-8")
    res = run(tmp_path, workspace, ["hi"])
    assert res.exit_code == 2 and "system prompt does not render" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_chat_takes_the_run_options(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["Hello!"])
    res = runner.invoke(
        app,
        [
            "chat",
            "--model",
            f"replay:{replay}",
            "--workspace",
            str(workspace),
            "--temperature",
            "0.3",
            "--answer-temperature",
            "0.6",
            "--max-steps",
            "2",
            "--tool-choice",
            "auto",
            "--no-answer-guard",
            "--instructions",
            "Be brief.",
            "--allow-host",
            "127.0.0.1",
        ],
        input="Say hello.\n/exit\n",
    )
    assert res.exit_code == 0, res.output
    assert "Hello!" in res.stdout


def test_yes_does_not_approve_dangerous_tools_and_the_denial_names_the_flag(tmp_path: Path, workspace: Path) -> None:
    res = run(tmp_path, workspace, [call("run_shell", command="touch x"), "could not"], "--yes", "--json")
    out = json.loads(res.stdout)
    assert out["tool_calls"][0]["error_kind"] == "permission_denied" and not (workspace / "x").exists()
    res = run(tmp_path, workspace, [call("write_file", path="a.txt", content="A"), "ok"], "--yes", "--json")
    assert json.loads(res.stdout)["tool_calls"][0]["ok"] and (workspace / "a.txt").exists()
