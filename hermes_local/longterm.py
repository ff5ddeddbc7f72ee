"""Long-term memory: facts and preferences kept across runs in SQLite FTS5.

`LongTermMemory` stores facts in `$HERMES_LOCAL_HOME/memory.db`; the `remember` tool writes one;
at the start of a run the agent searches it with the goal and injects the top matches once, as a
frozen block (never re-retrieved per step, so the prompt prefix stays stable). Does not decide
what is worth remembering: the model does, through the tool.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from hermes_local.config import home_dir
from hermes_local.tools.registry import Tool, ToolContext, tool

_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)


@dataclass
class Fact:
    """One remembered fact with its id."""

    id: int
    text: str
    created: float


class LongTermMemory:
    """Facts kept across sessions in SQLite FTS5 under HERMES_LOCAL_HOME."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or home_dir() / "memory.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS facts USING fts5(text, created UNINDEXED)")
        self._db.commit()

    def add(self, text: str) -> int:
        text = " ".join(text.split())
        if not text:
            raise ValueError("an empty fact cannot be remembered")
        existing = self._db.execute("SELECT rowid FROM facts WHERE text = ?", (text,)).fetchone()
        if existing:
            return int(existing[0])
        cur = self._db.execute("INSERT INTO facts (text, created) VALUES (?, ?)", (text, time.time()))
        self._db.commit()
        return int(cur.lastrowid or 0)

    def search(self, query: str, limit: int = 3) -> list[Fact]:
        words = sorted({w.lower() for w in _WORD.findall(query)})
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = self._db.execute(
            "SELECT rowid, text, created FROM facts WHERE facts MATCH ? ORDER BY bm25(facts) LIMIT ?",
            (match, limit),
        ).fetchall()
        return [Fact(int(r[0]), r[1], float(r[2])) for r in rows]

    def all(self) -> list[Fact]:
        rows = self._db.execute("SELECT rowid, text, created FROM facts ORDER BY rowid").fetchall()
        return [Fact(int(r[0]), r[1], float(r[2])) for r in rows]

    def forget(self, fact_id: int) -> bool:
        cur = self._db.execute("DELETE FROM facts WHERE rowid = ?", (fact_id,))
        self._db.commit()
        return cur.rowcount > 0

    def close(self) -> None:
        self._db.close()


@tool(permission="write")
def remember(fact: str, ctx: ToolContext) -> dict:
    """Remember a fact or preference about the user for future sessions.

    Args:
        fact: One short sentence worth remembering, e.g. "Reports go in reports/ as Markdown".
    """
    store = ctx.extras.get("longterm") or LongTermMemory()
    return {"remembered": fact, "id": store.add(fact)}


LONGTERM_TOOLS: list[Tool] = [remember]
