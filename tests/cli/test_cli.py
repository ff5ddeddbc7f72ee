"""The CLI through typer's runner: replay runs, the embedded model, user mistakes, listings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.agent.result import EXIT_CODES, exit_code_for
from hermes_local.cli.app import app
from hermes_local.testing import tool_call_text as call
from hermes_local.testing import write_replay

runner = CliRunner()
TASK = "What time is it? Note it in my memo."


def run_json(*args: str) -> tuple[int, dict, str]:
    res = runner.invoke(app, ["run", *args, "--json"])
    out = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
    return res.exit_code, out, res.stderr


def test_replay_two_step_run_writes_the_memo(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(
        tmp_path / "r.jsonl",
        [call("get_current_time"), call("append_to_memo", content="It is 10:00"), "Noted the time."],
    )
    code, out, _ = run_json(TASK, "--model", f"replay:{replay}", "--workspace", str(workspace))
    assert code == 0
    assert out["stopped"] == "answer" and out["answer"] == "Noted the time." and out["steps"] == 3
    assert [(c["name"], c["ok"]) for c in out["tool_calls"]] == [("get_current_time", True), ("append_to_memo", True)]
    assert set(out["usage"]) >= {"prompt_tokens", "prompt_tokens_evaluated", "completion_tokens"}
    assert (workspace / "memo.md").read_text() == "- It is 10:00\n"


def test_unsandboxed_commands_are_announced_once_on_stderr(tmp_path: Path, workspace: Path) -> None:
    commands = [call("run_shell", command="echo a"), call("run_shell", command="echo b"), "Done."]
    replay = write_replay(tmp_path / "r.jsonl", commands)
    args = ["--model", f"replay:{replay}", "--workspace", str(workspace), "--sandbox", "off", "--allow", "run_shell"]
    args.append("--trust-content")  # the first command's output is untrusted: the second would be asked again
    code, out, err = run_json(TASK, *args)
    assert code == 6 and [c["ok"] for c in out["tool_calls"]] == [True, True], err  # the memo goal, no memo: unverified
    warnings = [line for line in err.splitlines() if "WITHOUT a sandbox" in line]
    assert warnings == ["warning: run_shell runs WITHOUT a sandbox: sandbox = off in the settings"]


def test_replay_with_unused_outputs_fails(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["answer", "extra"])
    res = runner.invoke(app, ["run", "x", "--model", f"replay:{replay}", "--workspace", str(workspace)])
    assert res.exit_code == 1 and "unused output" in res.stderr


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("no-such-model", "neither a file nor a known model name"),
        ("replay:/nonexistent/file.jsonl", "does not exist"),
    ],
)
def test_bad_model_is_one_line_exit_2(model: str, message: str, workspace: Path) -> None:
    res = runner.invoke(app, ["run", "x", "--model", model, "--workspace", str(workspace)])
    assert res.exit_code == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr + res.stdout


def test_not_a_gguf_is_one_line_exit_2(tmp_path: Path, workspace: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"this is not a model" * 10)
    res = runner.invoke(app, ["run", "x", "--model", str(bogus), "--workspace", str(workspace)])
    assert res.exit_code == 2 and "not a GGUF" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_bad_replay_line_and_bad_workspace(tmp_path: Path, workspace: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    res = runner.invoke(app, ["run", "x", "--model", f"replay:{bad}", "--workspace", str(workspace)])
    assert res.exit_code == 2 and "bad.jsonl:1" in res.stderr
    good = write_replay(tmp_path / "g.jsonl", ["a"])
    res = runner.invoke(app, ["run", "x", "--model", f"replay:{good}", "--workspace", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "is not a directory" in res.stderr


def test_tools_list_and_help() -> None:
    res = runner.invoke(app, ["tools", "list"])
    assert res.exit_code == 0 and "get_current_time" in res.stdout and "append_to_memo" in res.stdout
    assert "[write]" in res.stdout
    res = runner.invoke(app, ["run", "--help"])
    assert res.exit_code == 0 and "replay:FILE" in res.stdout


def test_session_is_logged(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [call("get_current_time"), "ok"])
    code, out, _ = run_json("t", "--model", f"replay:{replay}", "--workspace", str(workspace))
    assert code == 0 and out["session_id"]
    res = runner.invoke(app, ["sessions", "list"])
    assert out["session_id"] in res.stdout


@pytest.mark.real_model
def test_full_run_on_the_embedded_model(workspace: Path) -> None:
    code, out, err = run_json(TASK, "--workspace", str(workspace), "--max-steps", "3", "--n-ctx", "2048")
    assert out["stopped"] in ("answer", "max_steps", "empty"), err
    assert code == exit_code_for(out["stopped"], out["outcome"]), err
    assert out["usage"]["prompt_tokens"] > 100 and out["usage"]["completion_tokens"] > 0
    assert 0 < out["usage"]["prompt_tokens_evaluated"] <= out["usage"]["prompt_tokens"]


@pytest.mark.real_model
def test_python_dash_m_runs_required_tool_calls(workspace: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_local",
            "run",
            TASK,
            "--json",
            "--tool-choice",
            "required",
            "--max-steps",
            "2",
            "--n-ctx",
            "2048",
            "--workspace",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    out = json.loads(proc.stdout)
    assert proc.returncode == exit_code_for(out["stopped"], out["outcome"]), proc.stderr
    assert out["tool_calls"] and out["steps"] <= 2
    # every step called a tool; a run that ended early did so through final_answer
    assert out["stopped"] == "max_steps" or out["tool_calls"][-1]["name"] == "final_answer"


@pytest.mark.real_model
def test_readme_first_command_calls_a_tool_without_tool_choice_required(workspace: Path) -> None:
    code, out, err = run_json(TASK, "--workspace", str(workspace), "--max-steps", "3", "--n-ctx", "2048")
    assert code == exit_code_for(out["stopped"], out["outcome"]), err
    valid = [c for c in out["tool_calls"] if c["name"] not in ("invalid_tool_call",)]
    assert valid, out  # step 1 starts with the call grammar on: the goal needs a tool
    assert len(out["guarded"]) <= 2
    assert all(c["error_kind"] in (None, "permission_denied") for c in out["tool_calls"])
    second = out["llm_calls"][1]
    assert second["prompt_tokens_evaluated"] < second["prompt_tokens"] / 2


@pytest.mark.real_model
def test_readme_first_command_never_ends_in_a_blank_answer_with_exit_0(workspace: Path) -> None:
    """Issue 27: on the embedded model every auto-mode run ended `stopped: answer`, an empty answer, exit 0."""
    command = [sys.executable, "-m", "hermes_local", "run", TASK, "--max-steps", "3", "--workspace", str(workspace)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.stdout.strip(), (proc.returncode, proc.stderr[-2000:])  # a line, never a blank one
    assert proc.returncode in (0, 1, 3, 4, 6, 7), proc.stderr  # never a crash
    # Issue 42: exit 0 only when it did both (the memo written, approval answered as the README says: a
    # terminal-less run is refused the write, which ends it denied/unverified, non-zero, with the reason)
    if proc.returncode == 0:
        assert (workspace / "memo.md").is_file(), proc.stderr
    else:
        assert "outcome: " in proc.stderr, proc.stderr
    if proc.returncode == EXIT_CODES["empty"]:  # said so, with what the run did
        assert proc.stdout.startswith("(no answer: the model gave an empty reply"), proc.stdout
        assert "it called " in proc.stdout or "it made no tool calls" in proc.stdout, proc.stdout


def test_only_models_download_may_reach_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_local.cli.app import force_hub_offline

    monkeypatch.delenv("HF_HUB_OFFLINE")
    force_hub_offline(["models", "download", "smollm2"])
    force_hub_offline(["doctor"])
    assert "HF_HUB_OFFLINE" not in os.environ
    force_hub_offline(["run", "task"])
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_terminal_progress_uses_the_session_show_lines(capsys: pytest.CaptureFixture[str]) -> None:
    from hermes_local.cli.terminal import TerminalPrinter
    from hermes_local.events import RunEnd, StepStart, Token, ToolCallStarted, ToolFinished, ToolOutcome
    from hermes_local.outcome import ToolResult

    printer = TerminalPrinter(stream_tokens=True)
    printer(StepStart(1))
    printer(Token("<tool_call>"))
    printer(ToolCallStarted(1, "get_current_time", {}))
    printer(ToolFinished(ToolOutcome(1, "get_current_time", {}, ToolResult(False, "not_found: x"))))
    printer(RunEnd({"stopped": "answer"}))
    # the call's markup is not streamed: the parsed call has its own line
    assert capsys.readouterr().err == ("── step 1\n   → get_current_time({})\n     ✗ not_found: x\n")


def test_flags_become_settings_the_same_way_for_every_command(tmp_path: Path, hermetic_home: Path) -> None:
    from hermes_local.cli.common import settings_from_flags
    from hermes_local.config import config_file

    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text('allow_hosts = ["docs.local"]\nallow_tools = ["write_file"]\n', encoding="utf-8")
    rules = tmp_path / "rules.txt"
    rules.write_text("Be brief.\n", encoding="utf-8")
    flags = {
        "task": "not a setting",
        "workspace": tmp_path,
        "n_ctx": 2048,
        "temperature": None,  # not given: the default stays
        "no_grammar": True,
        "no_prompt_cache": False,
        "instructions": f"@{rules}",
        "tensor_split": "0.6,0.4",
        "token": "secret",
        "allow_host": ["example.org"],
        "allow": None,
    }
    settings = settings_from_flags(flags)
    assert settings.n_ctx == 2048 and settings.temperature == 0.2
    assert settings.grammar is False and settings.prompt_cache is True  # --no-prompt-cache not given
    assert settings.instructions == "Be brief." and settings.tensor_split == [0.6, 0.4]
    assert settings.serve_token == "secret"
    assert settings.allow_hosts == ["docs.local", "example.org"] and settings.allow_tools == ["write_file"]
