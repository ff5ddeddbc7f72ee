"""Long-term memory: facts and preferences kept across runs in SQLite FTS5.

`LongTermMemory` stores facts in `$HERMES_LOCAL_HOME/memory.db`; the `remember` tool writes one;
at the start of a run the agent searches it with the goal and injects the top matches once, as a
frozen block (never re-retrieved per step, so the prompt prefix stays stable). A fact is at most
`MAX_FACT_CHARS` characters (longer ones are refused, so the model can shorten them) and the recalled
block at most `RECALL_CHARS` (about a few hundred tokens), so no stored fact can crowd out the
prompt. A `memory.db` that cannot be used (home not writable, not a database, locked, corrupt) is a
`UserError` naming the file. Does not decide what is worth remembering: the model does, through the tool.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from hermes_local.config import home_dir
from hermes_local.errors import UserError
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool

_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
MAX_FACT_CHARS = 500
RECALL_CHARS = 1500
_MAX_ROWID = 2**63 - 1


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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=2.0)
        except (OSError, sqlite3.Error) as exc:
            raise _unusable(self.path, exc) from exc
        try:
            self._db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS facts USING fts5(text, created UNINDEXED)")
            self._db.commit()
            self._db.execute("SELECT rowid, text, created FROM facts LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            self._db.close()
            raise _unusable(self.path, exc) from exc

    def add(self, text: str) -> int:
        text = " ".join(text.split())
        if not text:
            raise ValueError("an empty fact cannot be remembered")
        if len(text) > MAX_FACT_CHARS:
            raise ValueError(f"a fact may be at most {MAX_FACT_CHARS} characters (this one has {len(text)})")
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

    def recall(self, goal: str, limit: int = 3, budget: int = RECALL_CHARS) -> list[str]:
        """The facts to inject for `goal`: best matches first, each cut to the fact cap, within `budget` chars."""
        out: list[str] = []
        for fact in self.search(goal, limit=limit):
            text = fact.text if len(fact.text) <= MAX_FACT_CHARS else fact.text[:MAX_FACT_CHARS] + "…"
            if len(text) > budget:
                break
            budget -= len(text)
            out.append(text)
        return out

    def all(self) -> list[Fact]:
        rows = self._db.execute("SELECT rowid, text, created FROM facts ORDER BY rowid").fetchall()
        return [Fact(int(r[0]), r[1], float(r[2])) for r in rows]

    def forget(self, fact_id: int) -> bool:
        if not 0 < fact_id <= _MAX_ROWID:  # SQLite's rowids are 64-bit; a bigger number names no fact
            return False
        cur = self._db.execute("DELETE FROM facts WHERE rowid = ?", (fact_id,))
        self._db.commit()
        return cur.rowcount > 0

    def close(self) -> None:
        self._db.close()


# Trusted result (it echoes the fact); a fresh approval after untrusted content, so a file or page cannot
# plant an instruction that every later run recalls.
@tool(permission="write", provenance="trusted", fresh_after_untrusted=True)
def remember(fact: str, ctx: ToolContext) -> dict:
    """Remember a fact or preference about the user for future sessions.

    Args:
        fact: One short sentence worth remembering, e.g. "Reports go in reports/ as Markdown".
    """
    store = ctx.longterm or LongTermMemory()
    try:
        return {"remembered": fact, "id": store.add(fact)}
    except ValueError as exc:
        raise ToolFailure("invalid_arguments", f"{exc}; remember one short sentence instead.") from exc
    except sqlite3.Error as exc:
        raise ToolFailure("tool_error", f"the memory store failed: {exc}; tell the user.") from exc


LONGTERM_TOOLS: list[Tool] = [remember]


def _unusable(path: Path, exc: Exception) -> UserError:
    """One line naming the file and what is wrong with it."""
    text = str(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)
    lowered = text.lower()
    if "locked" in lowered:
        why = "it is locked by another program; close it or try again"
    elif "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        why = f"it is not a valid SQLite database ({text}); move it away to start an empty memory"
    else:
        why = f"{text}; check that HERMES_LOCAL_HOME ({path.parent}) is a writable folder"
    return UserError(f"long-term memory {path} cannot be used: {why}")
