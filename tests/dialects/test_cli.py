"""`--dialect` and `hermes-local prompt` through the CLI with the replay model (no llama.cpp needed)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.testing import write_replay

runner = CliRunner()


def test_run_with_a_dialect_replays_its_call_format(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ['{"name": "get_current_time", "parameters": {}}', "It is noon."])
    args = ["run", "t", "--model", f"replay:{replay}", "--workspace", str(workspace), "--dialect", "llama3", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["answer"] == "It is noon." and [c["name"] for c in out["tool_calls"]] == ["get_current_time"]


def test_unknown_dialect_is_one_line_exit_2(tmp_path: Path, workspace: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", ["hi"])
    res = runner.invoke(app, ["run", "t", "--model", f"replay:{replay}", "--dialect", "klingon"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "--dialect" in res.stderr


def test_prompt_prints_the_first_prompt_and_its_token_count(tmp_path: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [])
    res = runner.invoke(app, ["prompt", "What time is it?", "--model", f"replay:{replay}", "--json"])
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["dialect"] == "hermes" and out["token_count"] > 50
    assert out["text"].startswith("<|im_start|>system\nYou are a function calling AI model.")
    assert out["text"].endswith("<|im_start|>user\nWhat time is it?<|im_end|>\n<|im_start|>assistant\n")
    plain = runner.invoke(app, ["prompt", "What time is it?", "--model", f"replay:{replay}"])
    assert plain.stdout == out["text"] and f"-- {out['token_count']} tokens, dialect hermes" in plain.stderr


def test_prompt_warns_when_the_vocabulary_lacks_the_dialects_tokens(tmp_path: Path) -> None:
    replay = write_replay(tmp_path / "r.jsonl", [])
    args = ["prompt", "hi", "--model", f"replay:{replay}", "--dialect", "mistral", "--json", "--tool-choice", "none"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and res.stderr.startswith("warning:") and "[INST]" in res.stderr
    out = json.loads(res.stdout)
    assert out["dialect"] == "mistral" and out["text"].startswith("[INST]") and "[AVAILABLE_TOOLS]" not in out["text"]


def test_prompt_shows_only_the_selected_tools(tmp_path: Path) -> None:
    replay = tmp_path / "r.jsonl"
    replay.write_text('{"text": "x"}\n')
    res = runner.invoke(app, ["prompt", "read a file", "--model", f"replay:{replay}", "--tools", "files", "--json"])
    assert res.exit_code == 0, res.output
    text = json.loads(res.stdout)["text"]
    assert "read_file" in text and "run_shell" not in text and "get_current_time" not in text
    bad = runner.invoke(app, ["prompt", "x", "--model", f"replay:{replay}", "--tools", "nonsense"])
    assert bad.exit_code == 2 and "nonsense" in bad.output
