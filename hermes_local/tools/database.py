"""`query_database`: read-only SQL over the SQLite file the user passed with `--db`.

Read-only is enforced by SQLite itself, never by looking at the SQL text: the file is opened with
`mode=ro`, `PRAGMA query_only=1` is set, ATTACH is limited to zero databases, and an authorizer
allows only reads (SELECT, reading columns, functions, recursive CTEs and a short list of
introspection pragmas); every write, schema change, ATTACH/DETACH, transaction, VACUUM and pragma
change is refused while the statement is compiled. One statement per call, at most
`MAX_ROWS` rows, and a time limit enforced with a progress handler. Does not open any file other
than `ctx.db_path` and does not decide who may call it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from hermes_local.tools.registry import ToolContext, ToolFailure, ToolResult, tool

MAX_ROWS = 1000
QUERY_SECONDS = 10.0
_MAX_CELL = 500

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


def open_read_only(db_path: Path) -> sqlite3.Connection:
    """A connection on which SQLite refuses every change (see the module docstring)."""
    uri = db_path.resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=1.0, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only=1")
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.set_authorizer(_authorizer)
    except BaseException:
        conn.close()
        raise
    return conn


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<blob {len(value)} bytes>"
    if isinstance(value, str) and len(value) > _MAX_CELL:
        return value[:_MAX_CELL] + f"…[{len(value) - _MAX_CELL} more characters]"
    return value


def _explain(exc: sqlite3.Error, seconds: float) -> ToolFailure:
    message = str(exc)
    lowered = message.lower()
    if "interrupted" in lowered:
        return ToolFailure(
            "timeout",
            f"the query ran longer than {seconds:g} s and was stopped; filter with WHERE, aggregate, or add LIMIT.",
        )
    if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in lowered:
        one = "send exactly one SQL statement per call (no ';' between statements). "
        return ToolFailure("invalid_arguments", one + READ_ONLY_HINT)
    refused = ("not authorized", "authorization denied", "readonly", "read-only", "query_only", "too many attached")
    if any(word in lowered for word in refused):
        return ToolFailure("permission_denied", READ_ONLY_HINT)
    return ToolFailure(
        "invalid_arguments",
        f"SQLite error: {message}. Fix the SQL; list tables with SELECT name, sql FROM sqlite_master.",
    )


@tool
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
        raise ToolFailure("tool_error", f"cannot open the database read-only: {exc}.") from exc
    try:
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        try:
            cursor = conn.execute(sql)
            skipped = 0
            while skipped < offset:  # skip in batches; SQL text is never rewritten
                batch = len(cursor.fetchmany(min(offset - skipped, 1000)))
                if not batch:
                    break
                skipped += batch
            rows = cursor.fetchmany(limit + 1)
        except sqlite3.Error as exc:
            raise _explain(exc, seconds) from exc
        columns = [d[0] for d in cursor.description or []]
    finally:
        conn.close()
    more = len(rows) > limit
    shown: list[list[Any]] = []
    budget = max(500, ctx.output_cap - 400)  # keep the JSON under the output cap so it stays structured
    for row in rows[:limit]:
        cells = [_cell(v) for v in row]
        budget -= len(json.dumps(cells, ensure_ascii=False, default=str)) + 2
        if budget < 0:
            more = True
            break
        shown.append(cells)
    data: dict[str, Any] = {"columns": columns, "rows": shown, "row_count": len(shown)}
    first, last = offset + 1, offset + len(shown)
    if offset:
        data["offset"] = offset
    if more:
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
