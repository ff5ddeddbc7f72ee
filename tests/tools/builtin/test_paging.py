"""Paging: read_file by lines and query_database by rows; every cut result says how to read on."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from hermes_local.tools import Approver, Executor, ToolContext, default_registry

NEXT = re.compile(r"offset=(\d+)")


def executor(workspace: Path, db: Path | None = None) -> Executor:
    return Executor(default_registry(), ToolContext(workspace=workspace, db_path=db), Approver(interactive=False))


def test_paging_reaches_the_last_line_of_a_20000_line_file(workspace: Path) -> None:
    lines = [f"line {i}: {'x' * (i % 37)}" for i in range(1, 20_001)]
    (workspace / "big.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ex = executor(workspace)
    seen: list[str] = []
    offset, pages = 1, 0
    while True:
        res = ex.execute("read_file", {"path": "big.txt", "offset": offset})
        assert res.ok, res.error
        pages += 1
        body, _, notice = res.data.rpartition("[...")
        seen += body.splitlines()
        m = NEXT.search(notice)
        if not m:
            assert "end of file" in notice or offset == 1
            break
        assert f"next offset={m.group(1)}" in res.summary
        offset = int(m.group(1))
    assert seen == lines and pages > 10


def test_read_file_limit_and_small_files(workspace: Path) -> None:
    (workspace / "s.txt").write_text("a\nb\nc", encoding="utf-8")
    ex = executor(workspace)
    whole = ex.execute("read_file", {"path": "s.txt"})
    assert whole.data == "a\nb\nc" and "lines 1-3 of 3" in whole.summary
    page = ex.execute("read_file", {"path": "s.txt", "offset": 2, "limit": 1})
    assert page.data.startswith("b\n") and "offset=3" in page.data
    last = ex.execute("read_file", {"path": "s.txt", "offset": 3})
    assert last.data.startswith("c") and "end of file" in last.data
    past = ex.execute("read_file", {"path": "s.txt", "offset": 9})
    assert past.error_kind == "invalid_arguments" and "3 lines" in (past.error or "")
    assert ex.execute("read_file", {"path": "s.txt", "offset": 0}).error_kind == "invalid_arguments"


def test_query_database_pages_with_offset(workspace: Path) -> None:
    db = workspace.parent / "rows.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (i INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(2500)])
    ex = executor(workspace, db)
    got: list[int] = []
    offset = 0
    while True:
        res = ex.execute("query_database", {"sql": "SELECT i FROM t ORDER BY i", "limit": 1000, "offset": offset})
        assert res.ok, res.error
        got += [row[0] for row in res.data["rows"]]
        note = res.data.get("note")
        if not note:
            break
        offset = int(NEXT.search(note).group(1))  # type: ignore[union-attr]
        assert offset == len(got)
    assert got == list(range(2500))
