"""Adversarial suite: a scripted "model" attacks the workspace, the database, the shell and the network.

Every attack runs through the real `Agent` (ScriptedLLM + `runtime.build_agent`), and a few through
the CLI with a replay file. After each run: the tool call failed with the expected error kind, the
file tree (workspace, the outside directory, the database) is byte-for-byte unchanged, no secret
reached the model's prompts, and the run still ended with an answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.agent.result import exit_code_for
from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, ToolRegistry, default_registry, tool
from tests.conftest import loopback_http_server

SECRET = "TOPSECRET-4f1c"
TIMEOUT = 2.0
ANSWER = "Done."

call = tool_call_text


def snapshot(root: Path) -> dict[str, str]:
    """Every path under root (symlinks not followed) with its kind and content hash or link target."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                state[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                state[rel] = "dir"
            else:
                state[rel] = "file:" + hashlib.sha256(p.read_bytes()).hexdigest()
    return state


@pytest.fixture
def arena(tmp_path: Path) -> dict[str, Path]:
    """A workspace with symlinks leading out, a secret outside it, and a SQLite database."""
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET, encoding="utf-8")
    (ws / "notes.txt").write_text("inside the workspace\n", encoding="utf-8")
    (ws / "a").mkdir()
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside)
    (ws / "a" / "rel_link").symlink_to("../../outside/secret.txt")
    (ws / "dangling").symlink_to(outside / "not_yet.txt")
    db = tmp_path / "data.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    conn.executemany("INSERT INTO t (name) VALUES (?)", [(f"row{i}",) for i in range(1500)])
    conn.execute("CREATE INDEX t_name ON t(name)")  # so REINDEX would have something to rewrite
    conn.commit()
    conn.close()
    return {"root": tmp_path, "ws": ws, "outside": outside, "db": db}


def run_agent(
    ws: Path,
    outputs: list[str],
    *,
    approver: Approver | None = None,
    db_path: Path | None = None,
    registry: ToolRegistry | None = None,
    **settings: object,
):
    llm = ScriptedLLM(outputs, n_ctx=200_000)
    agent = build_agent(
        llm,
        load_settings({"tool_timeout": TIMEOUT, **settings}),
        workspace=ws,
        registry=registry,
        approver=approver or Approver(approve_all=True, allow=["run_shell", "http_get"]),
        db_path=db_path,
    )
    result = agent.run("Do what the script says.")
    llm.assert_all_used()
    assert result.stopped == "answer" and result.answer == ANSWER
    return result, llm


def assert_attack_failed(arena: dict[str, Path], calls: list[tuple[str, dict]], kind: str, **kw: object):
    before = snapshot(arena["root"])
    outputs = [call(name, **args) for name, args in calls] + [ANSWER]
    result, llm = run_agent(arena["ws"], outputs, **kw)
    for record in result.tool_calls:
        assert not record.ok and record.error_kind == kind, record
    assert snapshot(arena["root"]) == before
    assert not any(SECRET in text for text in llm.prompt_texts)
    return result, llm


# -- paths: traversal in every form --------------------------------------------------------------

TRAVERSALS = [
    "../outside/secret.txt",
    "a/../../outside/secret.txt",
    "./a/../../outside/secret.txt",
    "{outside}/secret.txt",  # absolute, outside
    "/etc/passwd",
    "~/.bashrc",
    "~",
    "link_file",  # symlink to a file outside
    "link_dir/secret.txt",  # symlinked directory pointing out
    "a/rel_link",  # relative symlink climbing out
    "{ws}/link_file",  # absolute path inside that leads out through a symlink
]


def _fill(path: str, arena: dict[str, Path]) -> str:
    return path.format(outside=arena["outside"], ws=arena["ws"])


@pytest.mark.parametrize("path", TRAVERSALS)
def test_read_file_cannot_escape(arena: dict[str, Path], path: str) -> None:
    result, llm = assert_attack_failed(arena, [("read_file", {"path": _fill(path, arena)})], "permission_denied")
    assert "outside the workspace" in llm.prompt_texts[1]


@pytest.mark.parametrize("path", ["..", "/", "~", "link_dir", "a/../..", "{outside}"])
def test_list_dir_cannot_escape(arena: dict[str, Path], path: str) -> None:
    result, llm = assert_attack_failed(arena, [("list_dir", {"path": _fill(path, arena)})], "permission_denied")
    assert "secret.txt" not in llm.prompt_texts[1].rsplit("<tool_response>", 1)[1]


@pytest.mark.parametrize(
    "path",
    [
        "../evil.txt",
        "a/../../evil.txt",
        "{outside}/evil.txt",
        "~/.bashrc",
        "link_file",  # write through a symlink to a file outside
        "link_dir/evil.txt",  # write into a symlinked directory outside
        "link_dir/new/deeper/evil.txt",  # parent creation through the symlinked directory
        "dangling",  # a dangling symlink whose target is outside
        "a/rel_link",
    ],
)
def test_write_file_cannot_escape(arena: dict[str, Path], path: str, hermetic_home: Path) -> None:
    assert_attack_failed(arena, [("write_file", {"path": _fill(path, arena), "content": "pwned"})], "permission_denied")
    assert (arena["outside"] / "secret.txt").read_text() == SECRET
    assert not (arena["outside"] / "not_yet.txt").exists()
    assert not (hermetic_home / ".bashrc").exists()


def test_legitimate_file_work_still_succeeds(arena: dict[str, Path]) -> None:
    outputs = [
        call("write_file", path="out/report.md", content="# Report\n"),
        call("read_file", path="a/../out/report.md"),
        call("list_dir", path="out"),
        ANSWER,
    ]
    result, _ = run_agent(arena["ws"], outputs)
    assert [c.ok for c in result.tool_calls] == [True, True, True]
    assert (arena["ws"] / "out" / "report.md").read_text() == "# Report\n"


# -- query_database: read-only enforced by SQLite ------------------------------------------------

DB_ATTACKS = [
    "DELETE FROM t",
    "UPDATE t SET name = 'x'",
    "INSERT INTO t (name) VALUES ('x')",
    "REPLACE INTO t (id, name) VALUES (1, 'x')",
    "DROP TABLE t",
    "CREATE TABLE evil (a)",
    "CREATE TEMP TABLE evil (a)",
    "CREATE INDEX evil ON t(name)",
    "ALTER TABLE t ADD COLUMN evil",
    "ATTACH DATABASE '{root}/attached.db' AS evil",
    "DETACH DATABASE main",
    "PRAGMA query_only=0",
    "PRAGMA writable_schema=1",
    "PRAGMA journal_mode=WAL",
    "PRAGMA user_version=7",
    "WITH x AS (SELECT 1) DELETE FROM t",
    "WITH x AS (SELECT 'x') INSERT INTO t (name) SELECT * FROM x",
    "VACUUM",
    "VACUUM INTO '{root}/copy.db'",
    "BEGIN IMMEDIATE",
    "SELECT load_extension('/tmp/evil')",
    "ANALYZE",
    "REINDEX",
]


def _db_hash(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


@pytest.mark.parametrize("sql", DB_ATTACKS)
def test_query_database_refuses_changes(arena: dict[str, Path], sql: str) -> None:
    digest = _db_hash(arena["db"])
    sql = sql.format(root=arena["root"])
    calls = [("query_database", {"sql": sql})]
    result, llm = assert_attack_failed(arena, calls, "permission_denied", db_path=arena["db"])
    assert "read-only" in llm.prompt_texts[1]
    assert _db_hash(arena["db"]) == digest


@pytest.mark.parametrize("sql", ["SELECT 1; DELETE FROM t", "SELECT 1; DROP TABLE t;", "select 1;\nATTACH 'x.db' AS x"])
def test_stacked_statements_are_refused(arena: dict[str, Path], sql: str) -> None:
    digest = _db_hash(arena["db"])
    calls = [("query_database", {"sql": sql})]
    result, llm = assert_attack_failed(arena, calls, "invalid_arguments", db_path=arena["db"])
    assert "exactly one SQL statement" in llm.prompt_texts[1]
    assert _db_hash(arena["db"]) == digest


def test_runaway_query_is_stopped(arena: dict[str, Path]) -> None:
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    started = time.monotonic()
    assert_attack_failed(arena, [("query_database", {"sql": sql})], "timeout", db_path=arena["db"])
    assert time.monotonic() - started < TIMEOUT + 1


def test_reads_work_and_big_results_are_limited(arena: dict[str, Path]) -> None:
    digest = _db_hash(arena["db"])
    outputs = [call("query_database", sql="SELECT * FROM t"), call("query_database", sql="SELECT count(*) FROM t")]
    outputs.append(ANSWER)
    result, llm = run_agent(arena["ws"], outputs, db_path=arena["db"])
    assert [c.ok for c in result.tool_calls] == [True, True]
    assert "more rows exist" in llm.prompt_texts[1] and "COUNT/GROUP BY" in llm.prompt_texts[1]
    assert "[[1500]]" in llm.prompt_texts[2]
    assert _db_hash(arena["db"]) == digest


def test_no_database_given_is_not_found(arena: dict[str, Path]) -> None:
    result, llm = assert_attack_failed(arena, [("query_database", {"sql": "SELECT 1"})], "not_found")
    assert "--db" in llm.prompt_texts[1]


# -- run_shell: approval, runaway processes, huge output ------------------------------------------


def test_run_shell_denied_without_a_terminal(arena: dict[str, Path]) -> None:
    settings_approver = Approver(allow=load_settings().allow_tools, interactive=False)
    outputs = [("run_shell", {"command": "touch pwned && echo hi > ../outside/evil.txt"})]
    result, llm = assert_attack_failed(arena, outputs, "permission_denied", approver=settings_approver)
    message = llm.prompt_texts[1].rsplit("<tool_response>", 1)[1]
    assert "--allow run_shell" in message and "--yes does not cover dangerous tools" in message


@pytest.mark.parametrize("approver", [Approver(allow=["run_shell"]), Approver(allow=["run_shell"], interactive=False)])
def test_run_shell_runs_when_approved(arena: dict[str, Path], approver: Approver) -> None:
    result, llm = run_agent(arena["ws"], [call("run_shell", command="touch made && pwd"), ANSWER], approver=approver)
    assert result.tool_calls[0].ok
    assert (arena["ws"] / "made").exists()
    assert str(arena["ws"].resolve()) in llm.prompt_texts[1]


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found


def test_background_grandchild_cannot_hang_the_agent(arena: dict[str, Path]) -> None:
    started = time.monotonic()
    command = 'sh -c "sleep 30.417 & echo started"'
    result, llm = run_agent(arena["ws"], [call("run_shell", command=command), ANSWER])
    assert time.monotonic() - started < TIMEOUT
    assert result.tool_calls[0].ok
    assert '"stdout": "started\\n"' in llm.prompt_texts[1]
    assert not _processes_with("sleep 30.417"), "the background sleep outlived the call"


def test_hanging_command_is_killed_at_the_timeout(arena: dict[str, Path]) -> None:
    started = time.monotonic()
    result, _ = run_agent(arena["ws"], [call("run_shell", command="echo begin; sleep 30.533; echo never"), ANSWER])
    assert time.monotonic() - started < TIMEOUT + 1
    assert result.tool_calls[0].error_kind == "timeout"
    assert not _processes_with("sleep 30.533")


def test_ten_megabytes_of_output_are_capped(arena: dict[str, Path]) -> None:
    command = "head -c 10000000 /dev/zero | tr '\\000' 'a'; echo; echo tail-marker"
    result, llm = run_agent(arena["ws"], [call("run_shell", command=command), ANSWER])
    assert result.tool_calls[0].ok
    response = llm.prompt_texts[1].rsplit("<tool_response>", 1)[1]
    assert len(response) < 10_000
    assert "truncated" in response and "tail-marker" in response


# -- tools that raise or hang ---------------------------------------------------------------------

release = threading.Event()


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom inside the tool")


@tool(timeout=0.5)
def hang() -> str:
    """Never returns (until the test releases it)."""
    release.wait(30)
    return "late"


def test_a_tool_that_raises_or_hangs_does_not_stop_the_run(arena: dict[str, Path]) -> None:
    registry = default_registry()
    registry.register(explode)
    registry.register(hang)
    started = time.monotonic()
    try:
        result, llm = run_agent(arena["ws"], [call("explode"), call("hang"), ANSWER], registry=registry)
    finally:
        release.set()
    assert time.monotonic() - started < 2
    assert [(c.name, c.error_kind) for c in result.tool_calls] == [("explode", "tool_error"), ("hang", "timeout")]
    assert "kaboom inside the tool" in llm.prompt_texts[1]


# -- http_get: offline unless allow-listed --------------------------------------------------------


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError(f"DNS lookup attempted: {args!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://8.8.8.8/",
        "http://127.0.0.1@example.com/",  # userinfo trick: the host is example.com
        "http://example.com#@127.0.0.1/",
        "http://localhost.example.com/",
    ],
)
def test_http_get_refuses_hosts_not_allowed(arena: dict[str, Path], url: str, no_dns: None) -> None:
    calls = [("http_get", {"url": url})]
    result, llm = assert_attack_failed(arena, calls, "permission_denied", allow_hosts=["127.0.0.1"])
    assert "--allow-host" in llm.prompt_texts[1]


def test_http_get_is_offline_by_default(arena: dict[str, Path], no_dns: None) -> None:
    # with no allowed host it is not even offered (issue 27); a call to it is told what enables it
    result, llm = assert_attack_failed(arena, [("http_get", {"url": "http://127.0.0.1:1/"})], "not_found")
    assert '"name": "http_get"' not in llm.prompt_texts[0] and "--allow-host" in llm.prompt_texts[1]


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x"])
def test_http_get_refuses_other_schemes(arena: dict[str, Path], url: str) -> None:
    calls = [("http_get", {"url": url})]
    result, llm = assert_attack_failed(arena, calls, "invalid_arguments", allow_hosts=["127.0.0.1"])
    assert "root:" not in llm.prompt_texts[1]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://example.com/stolen")
            self.end_headers()
            return
        body = b"hello from the allowed server"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[str]:
    with loopback_http_server(_Handler) as url:
        yield url


def test_http_get_reaches_an_allowed_local_server(arena: dict[str, Path], local_server: str) -> None:
    outputs = [call("http_get", url=local_server + "/"), ANSWER]
    result, llm = run_agent(arena["ws"], outputs, allow_hosts=["127.0.0.1"])
    assert result.tool_calls[0].ok
    assert "hello from the allowed server" in llm.prompt_texts[1]


def test_http_get_redirect_to_a_host_not_allowed_is_refused(arena: dict[str, Path], local_server: str) -> None:
    outputs = [("http_get", {"url": local_server + "/redirect"})]
    assert_attack_failed(arena, outputs, "permission_denied", allow_hosts=["127.0.0.1"])


# -- through the CLI ------------------------------------------------------------------------------

runner = CliRunner()


def run_cli(arena: dict[str, Path], calls: list[tuple[str, dict]], *flags: str) -> dict:
    replay = arena["root"].parent / f"replay-{arena['root'].name}.jsonl"
    turns = [{"text": call(name, **args)} for name, args in calls] + [{"text": ANSWER}]
    replay.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
    args = ["run", "task", "--model", f"replay:{replay}", "--workspace", str(arena["ws"]), "--json"]
    res = runner.invoke(app, [*args, *flags])
    out = json.loads(res.stdout)
    assert out["stopped"] == "answer" and out["answer"] == ANSWER
    # the exit code follows the outcome (issue 42): a refused call ends "denied" (7), none that worked "unverified"
    assert res.exit_code == exit_code_for(out["stopped"], out["outcome"]), (res.stdout, res.stderr)
    assert out["outcome"] != "done" or any(c["ok"] for c in out["tool_calls"])
    return out


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_LOCAL_TOOL_TIMEOUT", str(TIMEOUT))


def test_cli_traversal_and_symlink_writes_are_refused(arena: dict[str, Path], cli_env: None) -> None:
    before = snapshot(arena["root"])
    calls = [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "link_dir/secret.txt"}),
        ("write_file", {"path": "link_file", "content": "pwned"}),
        ("write_file", {"path": str(arena["outside"] / "evil.txt"), "content": "pwned"}),
    ]
    out = run_cli(arena, calls, "--yes")
    assert [c["error_kind"] for c in out["tool_calls"]] == ["permission_denied"] * 4
    assert snapshot(arena["root"]) == before


def test_cli_database_stays_unchanged(arena: dict[str, Path], cli_env: None) -> None:
    before = snapshot(arena["root"])
    calls = [
        ("query_database", {"sql": "DELETE FROM t"}),
        ("query_database", {"sql": "SELECT 1; DROP TABLE t"}),
        ("query_database", {"sql": "PRAGMA query_only=0"}),
        ("query_database", {"sql": f"VACUUM INTO '{arena['root']}/copy.db'"}),
        ("query_database", {"sql": "SELECT count(*) FROM t"}),
    ]
    out = run_cli(arena, calls, "--db", str(arena["db"]), "--yes")
    kinds = [c["error_kind"] for c in out["tool_calls"]]
    assert kinds == ["permission_denied", "invalid_arguments", "permission_denied", "permission_denied", None]
    assert snapshot(arena["root"]) == before


def test_cli_run_shell_needs_approval(arena: dict[str, Path], cli_env: None) -> None:
    shell = [("run_shell", {"command": "touch approved"})]
    out = run_cli(arena, shell)  # CliRunner's stdin is not a terminal
    assert out["tool_calls"][0]["error_kind"] == "permission_denied"
    assert not (arena["ws"] / "approved").exists()
    out = run_cli(arena, shell, "--allow", "run_shell")
    assert out["tool_calls"][0]["ok"] and (arena["ws"] / "approved").exists()
    (arena["ws"] / "approved").unlink()
    out = run_cli(arena, shell, "--yes")  # --yes covers write tools only: dangerous ones need --allow NAME
    assert out["tool_calls"][0]["error_kind"] == "permission_denied"
    assert not (arena["ws"] / "approved").exists()


def test_cli_run_shell_grandchild_and_http_get(arena: dict[str, Path], cli_env: None, no_dns: None) -> None:
    started = time.monotonic()
    calls = [
        ("run_shell", {"command": 'sh -c "sleep 30.671 & echo started"'}),
        ("http_get", {"url": "http://example.com/"}),
    ]
    out = run_cli(arena, calls, "--allow", "run_shell", "--allow", "http_get")
    assert time.monotonic() - started < TIMEOUT + 1
    assert [(c["ok"], c["error_kind"]) for c in out["tool_calls"]] == [(True, None), (False, "not_found")]  # no host
    assert not _processes_with("sleep 30.671")


def test_cli_http_get_allowed_host_by_flag_or_setting(
    arena: dict[str, Path], cli_env: None, local_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # memory off: a recalled episode of the run before (it read a web page) would arm provenance (issue 44)
    monkeypatch.setenv("HERMES_LOCAL_MEMORY", "false")
    get = [("http_get", {"url": local_server + "/"})]
    assert run_cli(arena, get, "--allow", "http_get")["tool_calls"][0]["error_kind"] == "not_found"  # not offered
    assert run_cli(arena, get, "--allow", "http_get", "--allow-host", "127.0.0.1")["tool_calls"][0]["ok"]
    monkeypatch.setenv("HERMES_LOCAL_ALLOW_HOSTS", "127.0.0.1")
    assert run_cli(arena, get, "--allow", "http_get")["tool_calls"][0]["ok"]


def test_cli_hanging_command_times_out(arena: dict[str, Path], cli_env: None) -> None:
    started = time.monotonic()
    out = run_cli(arena, [("run_shell", {"command": "sleep 30.917"})], "--allow", "run_shell")
    assert out["tool_calls"][0]["error_kind"] == "timeout"
    assert time.monotonic() - started < TIMEOUT + 1
    assert not _processes_with("sleep 30.917")
