"""The built-in tools and the executor, called directly (no agent loop): behaviour, limits, envelopes."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from hermes_local.tools import Approver, Executor, ToolContext, ToolRegistry, ToolResult, default_registry, tool
from hermes_local.tools.builtin import BUILTIN_TOOLS
from hermes_local.tools.effects.confined import locate
from hermes_local.tools.execution import cap_result
from hermes_local.tools.limits import HeadTailBuffer, clip_text
from hermes_local.tools.registry import ToolFailure
from tests.conftest import loopback_http_server


def make_executor(
    workspace: Path, *, registry: ToolRegistry | None = None, approve: bool = True, **context: object
) -> Executor:
    ctx = ToolContext(workspace=workspace.resolve(), **{"timeout": 2.0, **context})  # type: ignore[arg-type]
    dangerous = ["run_shell", "http_get"]  # --yes alone does not approve dangerous tools
    # trust_content: these tests are about the tools; tests/security/test_provenance.py is about approval after
    # untrusted content (where a second run_shell is asked again)
    approver = (
        Approver(approve_all=True, allow=dangerous, trust_content=True) if approve else Approver(interactive=False)
    )
    return Executor(registry or default_registry(), ctx, approver)


def test_builtin_tools_and_permissions() -> None:
    assert {t.name: t.permission for t in BUILTIN_TOOLS} == {
        "get_current_time": "read",
        "read_file": "read",
        "list_dir": "read",
        "write_file": "write",
        "append_to_memo": "write",
        "query_database": "read",
        "run_shell": "dangerous",
        "http_get": "dangerous",
        "ask_user": "read",
    }
    props = {t.name: list(t.parameters_schema()["properties"]) for t in BUILTIN_TOOLS}
    assert props["read_file"] == ["path", "offset", "limit"] and props["list_dir"] == ["path"]
    assert props["write_file"] == ["path", "content"] and props["query_database"] == ["sql", "limit", "offset"]
    assert props["run_shell"] == ["command"] and props["http_get"] == ["url"]
    assert all(len(t.description) < 80 for t in BUILTIN_TOOLS)  # the prompt budget of small models


# -- paths ----------------------------------------------------------------------------------------


def _name(ctx: ToolContext, raw: str) -> str:
    with locate(ctx, raw) as loc:
        return loc.name


def test_paths_inside_are_accepted(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace)
    root = workspace.resolve()
    (workspace / "a").mkdir()
    assert _name(ctx, "a/../b.txt") == "b.txt"
    assert _name(ctx, str(root / "c.txt")) == "c.txt"
    assert _name(ctx, "") == "."
    (workspace / "real.txt").write_text("x")
    (workspace / "alias").symlink_to("real.txt")
    assert _name(ctx, "alias") == "real.txt"


@pytest.mark.parametrize(("path", "kind"), [("../x", "permission_denied"), ("a\x00b", "invalid_arguments")])
def test_paths_refused(workspace: Path, path: str, kind: str) -> None:
    with pytest.raises(ToolFailure) as info:
        _name(ToolContext(workspace=workspace), path)
    assert info.value.kind == kind


def test_symlink_loop_is_a_clear_error(workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")
    result = make_executor(workspace).execute("read_file", {"path": "loop"})
    assert not result.ok and result.error_kind in ("invalid_arguments", "permission_denied", "not_found")


# -- read_file / list_dir / write_file ------------------------------------------------------------


def test_read_file_text_missing_directory(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("héllo\nworld\n", encoding="utf-8")
    ex = make_executor(workspace)
    ok = ex.execute("read_file", {"path": "notes.txt"})
    assert ok.ok and ok.data == "héllo\nworld\n"
    missing = ex.execute("read_file", {"path": "nope.txt"})
    assert missing.error_kind == "not_found" and "list_dir" in missing.error
    folder = ex.execute("read_file", {"path": "."})
    assert folder.error_kind == "invalid_arguments" and "list_dir" in folder.error


def test_read_file_refuses_binary_and_non_utf8(workspace: Path) -> None:
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (workspace / "latin1.txt").write_bytes("café".encode("latin-1"))
    ex = make_executor(workspace)
    binary = ex.execute("read_file", {"path": "img.png"})
    assert binary.error_kind == "invalid_arguments" and "binary" in binary.error
    latin = ex.execute("read_file", {"path": "latin1.txt"})
    assert latin.error_kind == "invalid_arguments" and "UTF-8" in latin.error


def test_read_file_refuses_a_fifo_without_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    started = time.monotonic()
    result = make_executor(workspace).execute("read_file", {"path": "pipe"})
    assert result.error_kind == "invalid_arguments" and time.monotonic() - started < 1


def test_read_file_is_size_capped(workspace: Path) -> None:
    big = workspace / "big.log"
    big.write_text("line of text ✓\n" * 200_000, encoding="utf-8")  # ~3 MB
    result = make_executor(workspace, output_cap=2000).execute("read_file", {"path": "big.log"})
    assert result.ok and len(result.data) < 2000
    assert "offset=" in result.data and "next offset=" in result.summary


def test_list_dir(workspace: Path) -> None:
    (workspace / "b.txt").write_text("12345")
    (workspace / "a").mkdir()
    (workspace / "link").symlink_to("b.txt")
    ex = make_executor(workspace)
    result = ex.execute("list_dir", {})
    assert result.ok
    assert result.data["entries"] == [
        {"name": "a", "type": "dir", "size": None},
        {"name": "b.txt", "type": "file", "size": 5},
        {"name": "link", "type": "symlink", "size": None},
    ]
    assert ex.execute("list_dir", {"path": "b.txt"}).error_kind == "invalid_arguments"
    assert ex.execute("list_dir", {"path": "missing"}).error_kind == "not_found"


def test_list_dir_caps_entries(workspace: Path) -> None:
    for i in range(250):
        (workspace / f"f{i:03}").touch()
    result = make_executor(workspace, output_cap=20000).execute("list_dir", {"path": "."})
    assert len(result.data["entries"]) == 200 and "250" in result.data["note"]
    narrow = make_executor(workspace, output_cap=1000).execute("list_dir", {"path": "."})
    assert isinstance(narrow.data, dict) and 10 < len(narrow.data["entries"]) < 50 and "250" in narrow.data["note"]


def test_write_file_creates_parents_atomically(workspace: Path) -> None:
    ex = make_executor(workspace)
    result = ex.execute("write_file", {"path": "out/deep/report.md", "content": "v1"})
    assert result.ok and result.data == {"path": "out/deep/report.md", "bytes": 2, "created": True}
    target = workspace / "out" / "deep" / "report.md"
    target.chmod(0o640)
    again = ex.execute("write_file", {"path": "out/deep/report.md", "content": "v2"})
    assert again.ok and not again.data["created"] and target.read_text() == "v2"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]  # no temp files left


def test_write_file_is_repeatable_so_a_later_rewrite_is_not_skipped(workspace: Path) -> None:
    ex = make_executor(workspace)
    for content in ("A", "B", "A"):
        assert ex.execute("write_file", {"path": "f.txt", "content": content}).ok
    assert (workspace / "f.txt").read_text() == "A"


def test_write_file_through_an_inside_symlink_writes_the_inside_target(workspace: Path) -> None:
    (workspace / "real.txt").write_text("old")
    (workspace / "alias").symlink_to("real.txt")
    assert make_executor(workspace).execute("write_file", {"path": "alias", "content": "new"}).ok
    assert (workspace / "real.txt").read_text() == "new" and (workspace / "alias").is_symlink()


def test_write_file_refuses_directories_and_file_parents(workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "f").write_text("x")
    ex = make_executor(workspace)
    assert ex.execute("write_file", {"path": "d", "content": "x"}).error_kind == "invalid_arguments"
    assert ex.execute("write_file", {"path": "f/inner.txt", "content": "x"}).error_kind == "invalid_arguments"


# -- query_database -------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, photo BLOB)")
    conn.executemany("INSERT INTO items (name, photo) VALUES (?, ?)", [(f"item{i}", b"\x00\x01") for i in range(50)])
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    return path


def test_query_database_reads(workspace: Path, db: Path) -> None:
    ex = make_executor(workspace, db_path=db)
    result = ex.execute("query_database", {"sql": "SELECT id, name, photo FROM items ORDER BY id LIMIT 2"})
    assert result.ok
    assert result.data["columns"] == ["id", "name", "photo"]
    assert result.data["rows"] == [[1, "item0", "<blob 2 bytes>"], [2, "item1", "<blob 2 bytes>"]]
    assert ex.execute("query_database", {"sql": "PRAGMA user_version"}).data["rows"] == [[3]]
    assert ex.execute("query_database", {"sql": "PRAGMA table_info(items)"}).data["row_count"] == 3
    assert ex.execute("query_database", {"sql": "SELECT 1;"}).ok  # a trailing semicolon is one statement


def test_query_database_row_limit(workspace: Path, db: Path) -> None:
    ex = make_executor(workspace, db_path=db)
    result = ex.execute("query_database", {"sql": "SELECT id FROM items", "limit": 10})
    assert result.data["row_count"] == 10 and "offset=" in result.data["note"]
    assert "COUNT/GROUP BY" in result.data["note"] and "truncated" in result.summary
    exact = ex.execute("query_database", {"sql": "SELECT id FROM items", "limit": 50})
    assert exact.data["row_count"] == 50 and "note" not in exact.data
    assert ex.execute("query_database", {"sql": "SELECT 1", "limit": 5000}).error_kind == "invalid_arguments"
    assert ex.execute("query_database", {"sql": "SELECT 1", "limit": 0}).error_kind == "invalid_arguments"


def test_query_database_keeps_results_structured_under_the_cap(workspace: Path, db: Path) -> None:
    ex = make_executor(workspace, db_path=db, output_cap=1000)
    result = ex.execute("query_database", {"sql": "SELECT id, name FROM items", "limit": 50})
    assert isinstance(result.data, dict) and 5 < result.data["row_count"] < 50
    assert "offset=" in result.data["note"] and len(result.to_json()) < 1200


def test_query_database_errors(workspace: Path, db: Path, tmp_path: Path) -> None:
    none = make_executor(workspace).execute("query_database", {"sql": "SELECT 1"})
    assert none.error_kind == "not_found" and "--db" in none.error
    missing = make_executor(workspace, db_path=tmp_path / "nope.db").execute("query_database", {"sql": "SELECT 1"})
    assert missing.error_kind == "not_found"
    assert not (tmp_path / "nope.db").exists()
    syntax = make_executor(workspace, db_path=db).execute("query_database", {"sql": "SELEC * FROM items"})
    assert syntax.error_kind == "invalid_arguments" and "syntax error" in syntax.error


def test_query_database_time_limit_uses_the_context_timeout(workspace: Path, db: Path) -> None:
    ex = make_executor(workspace, db_path=db, timeout=0.5)
    started = time.monotonic()
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
    result = ex.execute("query_database", {"sql": sql})
    assert result.error_kind == "timeout" and "LIMIT" in result.error
    assert time.monotonic() - started < 1.0


# -- run_shell ------------------------------------------------------------------------------------


def test_run_shell_result(workspace: Path) -> None:
    ex = make_executor(workspace)
    result = ex.execute("run_shell", {"command": "pwd; echo oops >&2; cat; exit 3"})
    assert not result.ok and result.error_kind == "tool_error"  # issue 42: a non-zero exit is a failure
    assert result.summary.startswith("run_shell failed: exit 3") and "oops" in (result.error or "")
    assert result.data == {"exit_code": 3, "stdout": f"{workspace.resolve()}\n", "stderr": "oops\n"}
    assert ex.execute("run_shell", {"command": "true"}).ok
    assert ex.execute("run_shell", {"command": "  "}).error_kind == "invalid_arguments"


def test_run_shell_is_repeatable(workspace: Path) -> None:
    ex = make_executor(workspace)
    for _ in range(2):
        assert ex.execute("run_shell", {"command": "echo x >> count.txt"}).ok
    assert (workspace / "count.txt").read_text() == "x\nx\n"


def test_run_shell_waits_for_a_command_that_closed_its_output(workspace: Path) -> None:
    result = make_executor(workspace).execute("run_shell", {"command": "exec >/dev/null 2>&1; sleep 0.3; touch done"})
    assert result.ok and result.data["exit_code"] == 0 and (workspace / "done").exists()


def test_run_shell_timeout_reports_partial_output(workspace: Path) -> None:
    started = time.monotonic()
    result = make_executor(workspace, timeout=1.0).execute("run_shell", {"command": "echo partial; sleep 20"})
    assert result.error_kind == "timeout" and "partial" in result.error and "killed" in result.error
    assert time.monotonic() - started < 1.5


def test_head_tail_buffer_holds_only_head_and_tail() -> None:
    buf = HeadTailBuffer(head=10, tail=5)
    for _ in range(1000):
        buf.write(b"0123456789")
    buf.write(b"END!!")
    assert len(buf.head) == 10 and buf.tail_len < 30 and buf.total == 10_005 and buf.truncated
    text = buf.text()
    assert text.startswith("0123456789") and text.endswith("END!!") and "9990 bytes truncated" in text
    small = HeadTailBuffer(head=10, tail=5)
    small.write(b"abc")
    small.write(b"defghijkl")
    assert small.text() == "abcdefghijkl" and not small.truncated


def test_clip_text() -> None:
    assert clip_text("short", 100) == ("short", False)
    cut, was_cut = clip_text("a" * 500 + "END", 90)
    assert was_cut and cut.startswith("a" * 60) and cut.endswith("END") and "truncated" in cut


# -- http_get -------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/missing":
            self.send_error(404, "Not Found")
            return
        if self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", "/")
            self.end_headers()
            return
        body = b"x" * 50_000 if self.path == "/big" else b"hello"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    with loopback_http_server(_Handler) as url:
        yield url, int(url.rsplit(":", 1)[1])


def test_http_get_allowed(workspace: Path, server: tuple[str, int]) -> None:
    base, port = server
    ex = make_executor(workspace, allow_hosts=["127.0.0.1"], output_cap=2000)
    ok = ex.execute("http_get", {"url": base + "/"})
    assert ok.ok and ok.data["status"] == 200 and ok.data["body"] == "hello"
    assert ex.execute("http_get", {"url": base + "/hop"}).data["body"] == "hello"  # same-host redirect
    big = ex.execute("http_get", {"url": base + "/big"})
    assert big.ok and big.data["truncated"] and len(big.data["body"]) < 2000
    missing = ex.execute("http_get", {"url": base + "/missing"})
    assert missing.error_kind == "tool_error" and "404" in missing.error
    by_port = make_executor(workspace, allow_hosts=[f"127.0.0.1:{port}"]).execute("http_get", {"url": base + "/"})
    assert by_port.ok
    other_port = make_executor(workspace, allow_hosts=["127.0.0.1:1"]).execute("http_get", {"url": base + "/"})
    assert other_port.error_kind == "permission_denied"


def test_http_get_ignores_proxy_settings(
    workspace: Path, server: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", "http://10.255.255.1:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://10.255.255.1:3128")
    result = make_executor(workspace, allow_hosts=["127.0.0.1"]).execute("http_get", {"url": server[0] + "/"})
    assert result.ok


# -- the executor ---------------------------------------------------------------------------------


def test_unknown_tool_and_bad_arguments(workspace: Path) -> None:
    ex = make_executor(workspace)
    unknown = ex.execute("delete_everything", {})
    assert unknown.error_kind == "not_found" and "read_file" in unknown.error
    bad = ex.execute("read_file", {"file": "x"})
    assert bad.error_kind == "invalid_arguments" and "path" in bad.error


def test_timeouts_default_and_per_tool(workspace: Path) -> None:
    gate = threading.Event()

    @tool
    def slow_default() -> str:
        """Waits."""
        gate.wait(10)
        return "late"

    @tool(timeout=0.2)
    def slow_override(ctx: ToolContext) -> float:
        """Reports the time limit it was given."""
        if ctx.timeout != 0.2:
            return ctx.timeout
        gate.wait(10)
        return 0.0

    ex = make_executor(workspace, registry=ToolRegistry([slow_default, slow_override]), timeout=0.3)
    try:
        started = time.monotonic()
        assert ex.execute("slow_default", {}).error_kind == "timeout"
        middle = time.monotonic()
        result = ex.execute("slow_override", {})
        assert result.error_kind == "timeout" and "0.2 s" in result.error
        assert middle - started < 1.0 and time.monotonic() - middle < 0.8
    finally:
        gate.set()


def test_a_raising_tool_becomes_a_short_tool_error(workspace: Path) -> None:
    @tool
    def noisy() -> str:
        """Fails with a huge message."""
        raise ValueError("bad " * 10_000)

    result = make_executor(workspace, registry=ToolRegistry([noisy])).execute("noisy", {})
    assert result.error_kind == "tool_error" and result.error.startswith("noisy failed: ValueError: bad")
    assert len(result.error) < 2000 and "truncated" in result.error


def test_huge_results_are_capped_with_a_notice(workspace: Path) -> None:
    @tool
    def flood() -> str:
        """Returns 10 MB."""
        return "z" * 10_000_000 + "END"

    result = make_executor(workspace, registry=ToolRegistry([flood]), output_cap=4000).execute("flood", {})
    assert result.ok and len(result.data) < 4100 and result.data.endswith("END")
    assert "characters truncated" in result.data and "output truncated: 10000003 characters" in result.summary
    assert len(result.to_json()) < 5000


def test_cap_result_leaves_small_and_failed_results_alone() -> None:
    small = ToolResult.success({"a": 1}, "s")
    assert cap_result(small, 100) is small
    failed = ToolResult.failure("tool_error", "x" * 500)
    assert cap_result(failed, 100) is failed
    structured = cap_result(ToolResult.success({"rows": list(range(5000))}, "rows"), 500)
    assert isinstance(structured.data, str) and "truncated" in structured.data and "truncated" in structured.summary


def test_identical_write_calls_run_once_unless_repeatable(workspace: Path) -> None:
    runs: list[str] = []

    @tool(permission="write", repeatable=True)
    def ping(note: str) -> str:
        """Repeatable write."""
        runs.append(note)
        return "pinged"

    registry = default_registry()
    registry.register(ping)
    ex = make_executor(workspace, registry=registry)
    first = ex.execute("append_to_memo", {"content": "same line"})
    second = ex.execute("append_to_memo", {"content": "same line"})
    assert first.ok and second.ok and second.summary.startswith("(already done earlier in this run; not repeated)")
    assert (workspace / "memo.md").read_text() == "- same line\n"
    assert ex.execute("append_to_memo", {"content": "other line"}).ok
    assert (workspace / "memo.md").read_text() == "- same line\n- other line\n"
    ex.execute("ping", {"note": "a"})
    ex.execute("ping", {"note": "a"})
    assert runs == ["a", "a"]


def test_a_failed_write_may_be_retried(workspace: Path) -> None:
    attempts: list[int] = []

    @tool(permission="write")
    def flaky(ctx: ToolContext) -> str:
        """Fails the first time."""
        attempts.append(1)
        if len(attempts) == 1:
            raise ToolFailure("tool_error", "disk busy; retry")
        return "ok"

    ex = make_executor(workspace, registry=ToolRegistry([flaky]))
    assert ex.execute("flaky", {}).error_kind == "tool_error"
    assert ex.execute("flaky", {}).ok and len(attempts) == 2
    assert ex.execute("flaky", {}).summary.startswith("(already done")


def test_envelopes_are_json(workspace: Path) -> None:
    ex = make_executor(workspace)
    for result in (ex.execute("get_current_time", {}), ex.execute("read_file", {"path": "../x"})):
        envelope = json.loads(result.to_json())
        assert set(envelope) in ({"ok", "data", "summary"}, {"ok", "error", "error_kind", "summary"})


# -- a misspelled argument name (issue 27) ------------------------------------------------------------
@tool
def book_room(start_date: str, room: str = "A") -> str:
    """Book a room from a date.

    Args:
        start_date: First day, YYYY-MM-DD.
        room: Room name.
    """
    return f"{room} booked from {start_date}"


def test_a_misspelled_argument_name_with_one_close_match_is_corrected_and_said(workspace: Path) -> None:
    notices: list[str] = []
    registry = ToolRegistry([book_room])
    ex = make_executor(workspace, registry=registry, notice=notices.append)
    result = ex.execute("book_room", {"startDate": "2026-12-02"})
    assert result.ok and result.data == "A booked from 2026-12-02"
    assert "argument 'startDate' was read as 'start_date'" in result.summary  # the model reads the summary
    assert notices == [
        "book_room: argument 'startDate' was read as 'start_date' (a misspelled argument name, corrected)"
    ]
    assert make_executor(workspace).execute("read_file", {"pth": "missing.txt"}).error_kind == "not_found"
    # two candidates, or none close: still a failed call that names the expected properties
    wide = make_executor(workspace, registry=registry).execute("book_room", {"sd": "2026-12-02"})
    assert wide.error_kind == "invalid_arguments" and "start_date" in (wide.error or "")
