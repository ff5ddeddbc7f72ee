"""Settings, the long-term memory store and extensions: every bad input is one line, never a traceback.

The CLI runs as a real subprocess (`python -m hermes_local`) with a temporary home, so what is checked
is exactly what a user sees: stderr, exit code 2, no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.errors import UserError
from hermes_local.longterm import MAX_FACT_CHARS, RECALL_CHARS, LongTermMemory
from hermes_local.tools import Approver, Executor, ToolContext, ToolRegistry
from hermes_local.tools.modules import load_tools_module
from hermes_local.workflow.run import load_workflow

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "hermes_local", *args], capture_output=True, text=True, env=full)


def assert_one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# -- settings -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "1e308", "nan", "-inf", "86401"])
def test_unusable_tool_timeouts_are_rejected_at_load(value: str, hermetic_home: Path) -> None:
    with pytest.raises(UserError, match="tool_timeout"):
        load_settings({"tool_timeout": value})
    config = hermetic_home / "hermes" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"tool_timeout = {value if value != '86401' else '86401.0'}\n")
    with pytest.raises(UserError, match="tool_timeout"):
        load_settings()


def test_cli_tool_timeout_inf_is_one_line(tmp_path: Path) -> None:
    proc = cli("run", "--model", f"replay:{tmp_path / 'none.jsonl'}", "hi", env={"HERMES_LOCAL_TOOL_TIMEOUT": "inf"})
    assert_one_line(proc, "tool_timeout", "finite")


@pytest.mark.parametrize("key", ["engine_timeout", "approval_timeout"])
def test_engine_and_approval_timeout_inf_are_refused_at_load_in_one_line(key: str, hermetic_home: Path) -> None:
    """Issue 26 item 8 (resources): `inf` was accepted and became a traceback when a timer was set."""
    config = hermetic_home / "hermes" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"{key} = inf\n")
    with pytest.raises(UserError, match=key):
        load_settings()
    assert_one_line(cli("run", "--model", "replay:none.jsonl", "hi"), key, "finite")


def test_unreadable_config_is_one_line(hermetic_home: Path) -> None:
    config = hermetic_home / "hermes" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(b"tool_timeout = 5\n\xff\xfe")
    with pytest.raises(UserError, match="config.toml"):
        load_settings()


# -- memory.db ----------------------------------------------------------------------------------------


def test_corrupt_memory_db_is_one_line_naming_it(hermetic_home: Path) -> None:
    db = hermetic_home / "hermes" / "memory.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not sqlite" * 100)
    proc = cli("memory", "list")
    assert_one_line(proc, str(db), "not a valid SQLite database")
    assert db.read_bytes() == b"this is not sqlite" * 100


def test_home_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    proc = cli("memory", "list", env={"HERMES_LOCAL_HOME": str(home)})
    assert_one_line(proc, str(home))


def test_locked_memory_db_is_one_line(hermetic_home: Path) -> None:
    db = hermetic_home / "hermes" / "memory.db"
    LongTermMemory(db).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('PRAGMA locking_mode=EXCLUSIVE'); c.execute('BEGIN EXCLUSIVE'); "
            "print('locked', flush=True); sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        proc = cli("memory", "list")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert_one_line(proc, str(db), "locked")


@pytest.mark.parametrize("number", ["99999999999999999999999999", "9223372036854775808", "0", "-5"])
def test_memory_forget_huge_number_is_one_line(number: str) -> None:
    proc = cli("memory", "forget", "--", number)
    assert_one_line(proc, "no remembered fact")


def test_remember_caps_fact_length(hermetic_home: Path, tmp_path: Path) -> None:
    from hermes_local.longterm import remember

    store = LongTermMemory()
    ctx = ToolContext(workspace=tmp_path, longterm=store)
    ex = Executor(ToolRegistry([remember]), ctx, Approver(approve_all=True))
    big = ex.execute("remember", {"fact": "word " * 200_000})
    assert big.error_kind == "invalid_arguments" and str(MAX_FACT_CHARS) in big.error
    assert ex.execute("remember", {"fact": "Reports go in reports/ as Markdown"}).ok
    assert [f.text for f in store.all()] == ["Reports go in reports/ as Markdown"]
    with pytest.raises(ValueError):
        store.add("x" * (MAX_FACT_CHARS + 1))


def test_recalled_block_has_a_budget_even_for_old_huge_facts(hermetic_home: Path) -> None:
    store = LongTermMemory()
    store.add("the report format is markdown")
    # A fact stored before the cap existed (or by another program): 1 MB.
    store._insert("fact", "report " * 150_000, created=0)
    for _ in range(5):
        store._insert("fact", "report details " * 60, created=0)
    recalled = store.recall("write the report", limit=10)
    assert recalled and sum(len(t) for t in recalled) <= RECALL_CHARS
    assert all(len(t) <= MAX_FACT_CHARS + 1 for t in recalled)


def test_agent_run_with_a_huge_stored_fact_still_fits(hermetic_home: Path, tmp_path: Path) -> None:
    from hermes_local.testing import ScriptedLLM, build_agent

    store = LongTermMemory()
    store._insert("fact", "report " * 150_000, created=0)
    store.close()
    llm = ScriptedLLM(["Done."], n_ctx=4096)
    settings = load_settings({"answer_guard": False})  # "Write the report." would be sent back once for write_file
    agent = build_agent(llm, settings, workspace=tmp_path, approver=Approver(approve_all=True))
    result = agent.run("Write the report.")
    assert result.stopped == "answer" and result.answer == "Done."


# -- extensions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    ["raise SystemExit(3)", "import sys; sys.exit('bye')", "raise RuntimeError('boom')", "def broken(:"],
)
def test_tools_module_that_fails_at_import_is_one_line(body: str, tmp_path: Path) -> None:
    module = tmp_path / "bad_tools.py"
    module.write_text(body + "\n")
    with pytest.raises(UserError, match="bad_tools.py failed to import"):
        load_tools_module(str(module))
    proc = cli("run", "--model", f"replay:{tmp_path / 'none.jsonl'}", "--tools-module", str(module), "hi")
    assert_one_line(proc, "bad_tools.py")


def test_importable_module_name_that_exits_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "exiting_tools_mod.py").write_text("raise SystemExit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserError, match="exiting_tools_mod"):
        load_tools_module("exiting_tools_mod")


def test_workflow_imports_need_an_explicit_flag(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    wf = tmp_path / "wf.toml"
    wf.write_text('name = "w"\ntools_modules = ["evil.py"]\n\n[[steps]]\nid = "a"\ntool = "get_current_time"\n')
    with pytest.raises(UserError, match="--allow-imports"):
        load_workflow(wf)
    assert not marker.exists()
    proc = cli("workflow", "run", str(wf), "--workspace", str(tmp_path))
    assert_one_line(proc, "--allow-imports")
    assert not marker.exists()
    with pytest.raises(UserError, match="no @tool"):  # with the flag the module is imported (and has no tools)
        load_workflow(wf, allow_imports=True)
    assert marker.exists()
