"""`query_database`: read-only SQL over the SQLite file the user passed with `--db`.

Read-only is enforced by SQLite itself, never by looking at the SQL text: the file is opened with
`mode=ro`, `PRAGMA query_only=1` is set, ATTACH is limited to zero databases, and an authorizer
allows only reads (SELECT, reading columns, functions, recursive CTEs and a short list of
introspection pragmas); every write, schema change, ATTACH/DETACH, transaction, VACUUM and pragma
change is refused while the statement is compiled. One statement per call, at most
`MAX_ROWS` rows, and a time limit enforced with a progress handler.

Memory stays bounded: no single value may exceed `MAX_VALUE_BYTES` (SQLite's length limit, so
`zeroblob(999999999)` is an error, not 1 GB), SQLite's own heap is capped process-wide at
`SQLITE_HEAP_LIMIT` (a row of many big values fails cleanly), rows are fetched one at a time and
at most `MAX_FETCH_BYTES` are fetched per call; sorts and temporary tables are kept in memory
(under the same cap) so a query cannot fill the disk with temporary files. Text that is not valid
UTF-8 is shown with `\\x` escapes instead of failing the query, and only the start of a long text value is
decoded (the Python copies stay small however many big values a row or concurrent reads hold). SQLite
errors are reported as what they are (locked, not a database, corrupt, interrupted write with a hot journal) rather than
as a mistake in the SQL.

A database in WAL mode is opened `immutable=1` when it has no `-wal` file (nothing unmerged, no
writer), because `mode=ro` would leave new `-wal`/`-shm` files next to the user's file; when a
`-wal` file exists it is opened `mode=ro` (that file is already there; SQLite may add the `-shm` index
if a crashed writer left none). Its traits (the `db` toolset; it needs a database; the goal words that call for
it) are on its `@tool`. Does not open any file other than `ctx.db_path` and does not decide who may call it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from hermes_local.outcome import ErrorKind, ToolResult
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool
from hermes_local.tools.traits import Cue, Toolset, Traits

MAX_ROWS = 1000
QUERY_SECONDS = 10.0
MAX_VALUE_BYTES = 16 * 1024 * 1024
MAX_FETCH_BYTES = 64 * 1024 * 1024
MAX_SQL_BYTES = 1_000_000
SQLITE_HEAP_LIMIT = 256 * 1024 * 1024  # process-wide; SQLite only lets it be lowered
_MAX_CELL = 500
DECODE_BYTES = 4 * _MAX_CELL  # of a text value, decoded for the result: enough for the characters shown

# Pragmas that only read, allowed without an argument / with a table or index name.
_READ_PRAGMAS = {
    "table_list",
    "database_list",
    "user_version",
    "schema_version",
    "application_id",
    "page_count",
    "page_size",
    "encoding",
    "foreign_keys",
    "freelist_count",
    "compile_options",
    "collation_list",
    "function_list",
    "pragma_list",
    "integrity_check",
    "quick_check",
    "foreign_key_check",
}
DB = Toolset("db", "read-only SQL on the user's SQLite database")
# The goal words that call for it: a database with its words (a source first), or rows of business data (weaker:
# after a named file, folder or URL).
DB_STRONG = re.compile(r"\b(database|sql|sqlite|db|query|queries|tables?|schema)\b|数据库|查询")
DB_WEAK = re.compile(
    r"\b(rows?|customers?|orders?|sales|revenue|records?|invoices?|products?|top \d+)\b|订单|客户|销售|表格"
)
_NAME_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}

READ_ONLY_HINT = (
    "query_database is read-only: INSERT/UPDATE/DELETE, CREATE/DROP/ALTER, ATTACH, VACUUM, transactions "
    "and PRAGMA changes are refused. Send a single SELECT (tables: SELECT name, sql FROM sqlite_master; "
    "columns: PRAGMA table_info(name))."
)


def _authorizer(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        pragma = (arg1 or "").lower()
        if (pragma in _READ_PRAGMAS and arg2 is None) or pragma in _NAME_PRAGMAS:
            return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _is_wal(db_path: Path) -> bool:
    try:
        with open(db_path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


class _Clipped(str):
    """The start of a long text value, decoded; `total_bytes` is the value's whole size."""

    total_bytes: int = 0


def _decode_text(raw: bytes) -> str:
    """Text as shown: bad UTF-8 as `\\x` escapes; only the first `DECODE_BYTES` of a long value are decoded
    (a 16 MB value of bad bytes became 64 MB of escapes, and 15 of them in one row peaked at 2.4 GB)."""
    if len(raw) <= DECODE_BYTES:
        return raw.decode("utf-8", "backslashreplace")
    clipped = _Clipped(raw[:DECODE_BYTES].decode("utf-8", "backslashreplace"))
    clipped.total_bytes = len(raw)
    return clipped


def open_read_only(db_path: Path) -> sqlite3.Connection:
    """A connection on which SQLite refuses every change (see the module docstring)."""
    resolved = db_path.resolve()
    immutable = _is_wal(resolved) and not Path(f"{resolved}-wal").exists()
    uri = resolved.as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=1.0, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA hard_heap_limit={SQLITE_HEAP_LIMIT}")  # lowers only; 0 (no limit) by default
        conn.execute("PRAGMA temp_store=MEMORY")  # sorts and temp tables count against the heap cap, not the disk
        conn.execute("PRAGMA query_only=1")
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_BYTES)
        conn.text_factory = _decode_text
        conn.set_authorizer(_authorizer)
    except BaseException:
        conn.close()
        raise
    return conn


def _size(value: Any) -> int:
    if isinstance(value, _Clipped):
        return value.total_bytes
    if isinstance(value, (bytes, str)):
        return len(value)
    return 8


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<blob {len(value)} bytes>"
    if isinstance(value, _Clipped):
        return value[:_MAX_CELL] + f"…[{value.total_bytes:,} bytes in all]"
    if isinstance(value, str) and len(value) > _MAX_CELL:
        return value[:_MAX_CELL] + f"…[{len(value) - _MAX_CELL} more characters]"
    return value


# SQLite's own error names, for failures that are not a mistake in the SQL: (kind, what to say).
_LOCKED = "the database is locked by another program that is writing to it; try again later or tell the user"
_NOT_THE_SQL = {
    "SQLITE_BUSY": _LOCKED,
    "SQLITE_LOCKED": _LOCKED,
    "SQLITE_NOTADB": "the file is not a SQLite database (or it is encrypted); tell the user",
    "SQLITE_CORRUPT": "the database file is corrupt (malformed); tell the user, it needs repair",
    "SQLITE_READONLY_ROLLBACK": (
        "the database has a hot journal (an interrupted write left a -journal file); it must be recovered by "
        "opening it once read-write, which this read-only tool does not do: tell the user"
    ),
    "SQLITE_READONLY_RECOVERY": "the database's WAL needs recovery by a writer first; tell the user",
    "SQLITE_READONLY_CANTINIT": "the database's WAL index cannot be read without write access; tell the user",
    "SQLITE_CANTOPEN": "the database file cannot be opened (permissions, or a missing folder); tell the user",
    "SQLITE_IOERR": "reading the database file failed (I/O error); tell the user",
    "SQLITE_NOMEM": "the query needs too much memory; select fewer or smaller columns, or aggregate",
    "SQLITE_TOOBIG": (
        f"a value in the result would be over {MAX_VALUE_BYTES // (1024 * 1024)} MB; "
        "select length(col) or substr(col, 1, N)"
    ),
}


def _explain(exc: sqlite3.Error, seconds: float) -> ToolFailure:
    message = str(exc)
    lowered = message.lower()
    name = getattr(exc, "sqlite_errorname", "") or ""
    if "interrupted" in lowered:
        return ToolFailure(
            "timeout",
            f"the query ran longer than {seconds:g} s and was stopped; filter with WHERE, aggregate, or add LIMIT.",
        )
    if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in lowered:
        one = "send exactly one SQL statement per call (no ';' between statements). "
        return ToolFailure("invalid_arguments", one + READ_ONLY_HINT)
    if "query string is too large" in lowered:
        return ToolFailure("invalid_arguments", f"the SQL is over {MAX_SQL_BYTES:,} bytes; send a shorter query.")
    for prefix in (name, "_".join(name.split("_")[:2])):  # SQLITE_IOERR_READ -> SQLITE_IOERR
        if prefix in _NOT_THE_SQL:
            kind: ErrorKind = "invalid_arguments" if prefix in ("SQLITE_TOOBIG", "SQLITE_NOMEM") else "tool_error"
            return ToolFailure(kind, f"SQLite: {message}: {_NOT_THE_SQL[prefix]}.")
    if isinstance(exc, sqlite3.DataError) or "too big" in lowered:
        return ToolFailure("invalid_arguments", f"SQLite: {message}: {_NOT_THE_SQL['SQLITE_TOOBIG']}.")
    refused = ("not authorized", "authorization denied", "readonly", "read-only", "query_only", "too many attached")
    if any(word in lowered for word in refused):
        return ToolFailure("permission_denied", READ_ONLY_HINT)
    return ToolFailure(
        "invalid_arguments",
        f"SQLite error: {message}. Fix the SQL; list tables with SELECT name, sql FROM sqlite_master.",
    )


@tool(
    traits=Traits(
        toolset=DB,
        needs="database",
        cues=(Cue(10, DB_STRONG.search), Cue(70, DB_WEAK.search)),
        call_hint="call query_database with one SELECT statement",
    )
)
def query_database(sql: str, ctx: ToolContext, limit: int = 100, offset: int = 0) -> ToolResult:
    """Run one read-only SQLite query on the user's database (pages with offset).

    Args:
        sql: One SELECT statement.
        limit: Most rows to return (1-1000).
        offset: Rows of the result to skip first (to read the next page).
    """
    if ctx.db_path is None:
        raise ToolFailure(
            "not_found", "no database is connected; the user must start hermes-local with --db PATH to use it."
        )
    db_path = Path(ctx.db_path)
    if not db_path.is_file():
        raise ToolFailure("not_found", f"the database file {db_path.name} does not exist; tell the user.")
    if not 1 <= limit <= MAX_ROWS:
        raise ToolFailure("invalid_arguments", f"limit must be between 1 and {MAX_ROWS}.")
    if offset < 0:
        raise ToolFailure("invalid_arguments", "offset counts rows to skip; give 0 or more.")
    seconds = max(0.1, min(QUERY_SECONDS, ctx.timeout * 0.8))
    deadline = time.monotonic() + seconds
    try:
        conn = open_read_only(db_path)
    except sqlite3.Error as exc:
        raise ToolFailure("tool_error", f"cannot open the database read-only: {_explain(exc, seconds)}") from exc
    shown: list[list[Any]] = []
    more = stopped_at_bytes = False
    budget = max(500, ctx.output_cap - 400)  # keep the JSON under the output cap so it stays structured
    fetched = 0
    try:
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        try:
            cursor = conn.execute(sql)
            columns = [d[0] for d in cursor.description or []]
            skipped = 0
            while skipped < offset and cursor.fetchone() is not None:  # SQL text is never rewritten
                skipped += 1  # skipped rows are dropped one at a time, never held
            while True:  # one row at a time: only the shown (cut) cells are kept
                row = cursor.fetchone()
                if row is None:
                    break
                if len(shown) >= limit or budget < 0:
                    more = True
                    break
                fetched += sum(_size(v) for v in row)
                if fetched > MAX_FETCH_BYTES:
                    more = stopped_at_bytes = True
                    break
                cells = [_cell(v) for v in row]
                budget -= len(json.dumps(cells, ensure_ascii=False, default=str)) + 2
                if budget < 0:
                    more = True
                    break
                shown.append(cells)
        except (sqlite3.Error, MemoryError) as exc:
            if isinstance(exc, MemoryError):
                raise ToolFailure(
                    "invalid_arguments", f"SQLite: out of memory: {_NOT_THE_SQL['SQLITE_NOMEM']}."
                ) from exc
            raise _explain(exc, seconds) from exc
    finally:
        conn.close()
    data: dict[str, Any] = {"columns": columns, "rows": shown, "row_count": len(shown)}
    first, last = offset + 1, offset + len(shown)
    if offset:
        data["offset"] = offset
    if stopped_at_bytes:
        data["note"] = (
            f"stopped after fetching {MAX_FETCH_BYTES // (1024 * 1024)} MB: only rows {first}-{last} are shown; "
            f"call query_database with the same sql and offset={last} to read on, or select smaller columns "
            "(length(col), substr(col, 1, N)) or aggregate."
        )
    elif more:
        data["note"] = (
            f"more rows exist: showing rows {first}-{last}; call query_database with the same sql and "
            f"offset={last} to read on (or aggregate with COUNT/GROUP BY, or filter with WHERE)."
        )
    summary = f"query_database: {len(shown)} row(s)" + (f" from row {first}" if offset else "")
    if more:
        summary += f", more exist (truncated; next offset={last})"
    if shown:
        summary += f"; first: {json.dumps(shown[0], ensure_ascii=False, default=str)[:80]}"
    return ToolResult.success(data, summary)


TOOLS: list[Tool] = [query_database]  # the family's tools, in the registry's order
