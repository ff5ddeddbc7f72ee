"""`query_database` against hostile queries and odd database files: memory bombs, locks, journals, WAL.

Real SQLite files, real second processes holding locks or crashing mid-write. Memory is measured in
a child process (peak RSS is printed as a figure, and bounded far below what the bombs ask for).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_local.outcome import ToolResult
from hermes_local.tools import Approver, Executor, ToolContext, default_registry


def query(db: Path, sql: str, **args: object) -> ToolResult:
    ctx = ToolContext(workspace=db.parent, db_path=db, timeout=20.0)
    return Executor(default_registry(), ctx, Approver(approve_all=True)).execute("query_database", {"sql": sql, **args})


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    conn.executemany("INSERT INTO t (name) VALUES (?)", [(f"row{i}",) for i in range(1500)])
    conn.commit()
    conn.close()
    return path


# The child's own peak: its mm's high-water mark. Not ru_maxrss, which a child started from pytest (vfork, then
# exec) inherits from the parent's peak: inside the full suite, with a model loaded, that read ~1 GB for a
# child that never held 300 MB.
_PEAK_MB = textwrap.dedent(
    """
    def peak_mb():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) // 1024
    """
)


_BOMBS = _PEAK_MB + textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from hermes_local.tools import Approver, Executor, ToolContext, default_registry
    db = Path(sys.argv[1])
    ex = Executor(default_registry(), ToolContext(workspace=db.parent, db_path=db, timeout=60.0), Approver())
    out = []
    for sql in json.loads(sys.stdin.read()):
        r = ex.execute("query_database", {"sql": sql, "limit": 1000})
        out.append([r.ok, r.error_kind, r.error or (r.data.get("note") if isinstance(r.data, dict) else "")])
    print(json.dumps({"results": out, "peak_mb": peak_mb()}))
    """
)

_ROWS = "(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300) SELECT x FROM c)"


def test_memory_bombs_are_clean_errors_and_memory_stays_bounded(db: Path) -> None:
    bombs = [
        "SELECT zeroblob(999999999) FROM t",  # 1 GB per value
        "SELECT randomblob(500000000)",
        "SELECT replace(hex(zeroblob(10000000)), '00', 'abcdefgh')",  # a 80 MB string built in SQL
        f"SELECT zeroblob(15000000) FROM {_ROWS}",  # 4.5 GB over 300 rows of legal size
        "SELECT " + ", ".join(["zeroblob(15000000)"] * 40),  # one row of 600 MB
        f"SELECT group_concat(hex(zeroblob(1000000))) FROM {_ROWS}",
        f"SELECT b FROM (SELECT randomblob(1000000) AS b, x FROM {_ROWS}) ORDER BY random()",  # a sort, not a disk
        "SELECT 1" + " " * 2_000_000,  # 2 MB of SQL
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", _BOMBS, str(db)], input=json.dumps(bombs), capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    results = report["results"]
    print(f"query_database memory bombs: peak RSS {report['peak_mb']} MB")
    for sql, outcome in zip(bombs, results, strict=True):
        print(f"  {sql[:60]!r}: {outcome}")
    for sql, (ok, kind, message) in zip(bombs, results, strict=True):
        assert "Fix the SQL" not in message, (sql, message)
        assert not ok or "stopped after fetching 64 MB" in message, (sql, message)
        assert ok or kind == "invalid_arguments", (sql, kind, message)
    assert "16 MB" in results[0][2] and results[3][0] and "too much memory" in results[6][2]
    assert report["peak_mb"] < 1500  # a fresh interpreter with the package imported is ~100 MB; 9.5 GB before


def test_locked_database_says_locked(db: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        result = query(db, "SELECT count(*) FROM t")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert result.error_kind == "tool_error" and "locked by another program" in result.error
    assert "Fix the SQL" not in result.error


def test_not_a_database_and_corrupt_files(tmp_path: Path) -> None:
    garbage = tmp_path / "notes.db"
    garbage.write_text("just some text, not SQLite\n" * 100)
    result = query(garbage, "SELECT 1 FROM t")
    assert result.error_kind == "tool_error" and "not a SQLite database" in result.error


def test_hot_journal_is_named_and_left_alone(db: Path) -> None:
    crash = textwrap.dedent(
        """
        import os, sqlite3, sys
        c = sqlite3.connect(sys.argv[1], isolation_level=None)
        c.execute("PRAGMA cache_size=1")
        c.execute("BEGIN")
        c.execute("UPDATE t SET name = name || 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'")
        os._exit(0)  # crash mid-transaction: the journal is hot
        """
    )
    subprocess.run([sys.executable, "-c", crash, str(db)], check=True)
    journal = Path(f"{db}-journal")
    assert journal.exists()
    before = hashlib.sha256(db.read_bytes()).hexdigest(), hashlib.sha256(journal.read_bytes()).hexdigest()
    result = query(db, "SELECT count(*) FROM t")
    assert result.error_kind == "tool_error" and "hot journal" in result.error
    after = hashlib.sha256(db.read_bytes()).hexdigest(), hashlib.sha256(journal.read_bytes()).hexdigest()
    assert before == after


def test_bad_utf8_in_a_cell_is_shown_not_fatal(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO t (name) VALUES (CAST(x'636166e9ff' AS TEXT))")
    conn.commit()
    conn.close()
    result = query(db, "SELECT name FROM t WHERE id = 1501")
    assert result.ok and result.data["rows"] == [["caf\\xe9\\xff"]]


def test_reading_a_wal_database_creates_no_files(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wal.db"]
    result = query(path, "SELECT x FROM t")
    assert result.ok and result.data["rows"] == [[1]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wal.db"]
    # With a live writer (its -wal file exists) the committed data it has not checkpointed is read.
    writer = sqlite3.connect(path)
    writer.execute("INSERT INTO t VALUES (2)")
    writer.commit()
    try:
        result = query(path, "SELECT count(*) FROM t")
        assert result.ok and result.data["rows"] == [[2]]
    finally:
        writer.close()


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA hard_heap_limit=0",  # would lift the memory cap for the whole process
        "PRAGMA journal_mode=DELETE",
        "PRAGMA writable_schema=1",
        "PRAGMA temp_store_directory='/tmp'",
        "SELECT * FROM pragma_journal_mode('delete')",
        "ATTACH DATABASE ':memory:' AS m",
        "SELECT load_extension('libc.so.6')",
        "SELECT fts3_tokenizer('simple')",
    ],
)
def test_pragmas_and_extensions_cannot_change_anything(db: Path, sql: str) -> None:
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    result = query(db, sql)
    assert not result.ok and result.error_kind in ("permission_denied", "invalid_arguments"), result
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in db.parent.iterdir()) == ["data.db"]


_WIDE = _PEAK_MB + textwrap.dedent(
    """
    import json, sys, threading
    from pathlib import Path
    from hermes_local.tools import Approver, Executor, ToolContext, default_registry
    db = Path(sys.argv[1])
    ex = Executor(default_registry(), ToolContext(workspace=db.parent, db_path=db, timeout=120.0), Approver())
    out = []
    def one():
        r = ex.execute("query_database", {"sql": "SELECT * FROM wide", "limit": 10})
        out.append([r.ok, r.error_kind, len(r.to_json())])
    one()  # alone first: it must succeed
    threads = [threading.Thread(target=one) for _ in range(4)]  # MAX_PARALLEL_CALLS reads of one turn
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"results": out, "peak_mb": peak_mb()}))
    """
)


def test_a_row_of_15_big_invalid_utf8_values_stays_under_800_mb_also_read_concurrently(tmp_path: Path) -> None:
    """Issue 26 item 8 (resources): 15 x 16 MB of bad UTF-8 in one row peaked at 2.4 GB (64 MB of escapes each)."""
    path = tmp_path / "wide.db"
    make = textwrap.dedent(  # in a child: this process's SQLite heap may already be capped by other tests
        """
        import sqlite3, sys
        conn = sqlite3.connect(sys.argv[1])
        conn.execute("CREATE TABLE wide (" + ", ".join(f"c{i} TEXT" for i in range(15)) + ")")
        value = b"\\xff" * (16 * 1024 * 1024 - 64)
        conn.execute("INSERT INTO wide VALUES (" + ", ".join(["CAST(? AS TEXT)"] * 15) + ")", [value] * 15)
        conn.commit()
        """
    )
    subprocess.run([sys.executable, "-c", make, str(path)], check=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-c", _WIDE, str(path)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    print(f"15 x 16 MB bad UTF-8, 4 concurrent reads: peak RSS {report['peak_mb']} MB, results {report['results']}")
    assert len(report["results"]) == 5 and report["results"][0][0], report
    assert all(ok or kind == "invalid_arguments" for ok, kind, _ in report["results"]), report  # never a timeout
    assert report["peak_mb"] < 800
