"""The memory store: facts and episodes in one SQLite file, an FTS5 index and float32 vectors beside it.

`LongTermMemory` keeps `$HERMES_LOCAL_HOME/memory.db`: `items` (a fact from `remember`, or an episode written
at the end of a run: goal, answer, findings, files written, tools used, session id), `items_fts` (FTS5 with the
porter stemmer) and `vectors` (one normalised float32 blob per item and embedding model). `recall(goal)` is
hybrid: BM25 over the goal's words without stop words, fused with vector similarity (reciprocal-rank fusion)
when an `Embedder` is given, then a relevance floor, then at most `limit` items within a character budget.
Failed episodes are kept (marked) or not written at all, and never recalled; untrusted items are recalled
only as labelled data. A store is opened for a `Scope` (items.py): every item it writes carries the scope's owner
and workspace, and it lists, shows, forgets, marks and recalls only its owner's items (recall keeps to the
workspace, see `Scope`). A store written by an older version (one `facts` FTS table; items without an owner) is
moved over on open: its items become the local user's, of no known workspace.
A `memory.db` that cannot be used is a `UserError` naming the file. Does not load a model (the wiring hands
an `Embedder` in) and does not decide what a run was worth: `add_episode` takes the record the agent built.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_local.config import home_dir
from hermes_local.errors import UserError
from hermes_local.longterm.items import MAX_FACT_CHARS, Embedder, Hit, Item, Scope
from hermes_local.longterm.rank import coverage, fts_match, fuse, nearest, pack, query_terms

RECALL_CHARS = 1500
_MAX_ROWID = 2**63 - 1
CANDIDATES = 50  # items each signal ranks before fusion
# The relevance floor. Words: at least half of the goal's words, and two of them (or its only one): one shared
# word of a longer goal is a coincidence more often than not. Meaning: a similarity at least `Embedder.floor`
# standard deviations above the mean one (z, over a store of at least MIN_VECTORS items). Both: one shared word
# and a z of `Embedder.shared_word_floor`. Measured on tests/data/memory_recall.json (scripts/memory_recall.py).
COVERAGE_FLOOR = 0.5
MIN_VECTORS = 20
FLOOR_ITEMS = 300  # the size of the store the models' z floors were measured on (tests/data/memory_recall.json)
MODES = ("hybrid", "fts", "vector")
# What a scope may recall (items aliased `i`; parameters: owner, workspace, wide): the owner's items that did not
# fail, of this workspace, or facts the user stated, or (memory_scope = "user") any of the owner's workspaces.
_RECALLABLE = (
    "i.status = 'ok' AND i.owner = ? AND (i.workspace = ? OR (i.kind = 'fact' AND i.trust = 'trusted') OR ? = 1)"
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, text TEXT NOT NULL, created REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'ok', trust TEXT NOT NULL DEFAULT 'trusted', session_id TEXT,
    data TEXT NOT NULL DEFAULT '{}', owner TEXT NOT NULL DEFAULT 'local', workspace TEXT NOT NULL DEFAULT '');
CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(text, tokenize = 'porter unicode61');
CREATE TABLE IF NOT EXISTS vectors (id INTEGER NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (id, model));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class LongTermMemory:
    """Facts and episodes kept across sessions under HERMES_LOCAL_HOME, recalled by words and by meaning."""

    def __init__(self, path: Path | None = None, embedder: Embedder | None = None, scope: Scope | None = None) -> None:
        self.path = path or home_dir() / "memory.db"
        self.embedder = embedder
        self.scope = scope or Scope()
        self._compared = 0  # the vectors the last recall compared the goal with
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=2.0)
        except (OSError, sqlite3.Error) as exc:
            raise _unusable(self.path, exc) from exc
        try:
            self._db.executescript(_SCHEMA)
            self._migrate()
            self._db.execute("SELECT id, kind, text FROM items LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            self._db.close()
            raise _unusable(self.path, exc) from exc

    def _migrate(self) -> None:
        """Give the items of a store from before owners the local user and no workspace; move the facts of an older
        store (one `facts` FTS5 table) into `items`, keeping their ids."""
        columns = {str(r[1]) for r in self._db.execute("PRAGMA table_info(items)").fetchall()}
        for name, default in (("owner", "'local'"), ("workspace", "''")):
            if name not in columns:
                self._db.execute(f"ALTER TABLE items ADD COLUMN {name} TEXT NOT NULL DEFAULT {default}")
        old = self._db.execute("SELECT name FROM sqlite_master WHERE name = 'facts'").fetchone()
        if old:
            mine = self.scope
            self.scope = Scope()  # an old store's facts are the local user's, of no known workspace
            for rowid, text, created in self._db.execute("SELECT rowid, text, created FROM facts").fetchall():
                self._insert("fact", str(text), created=float(created or 0), item_id=int(rowid), commit=False)
            self.scope = mine
            self._db.execute("DROP TABLE facts")
        self._db.commit()

    # -- writing ---------------------------------------------------------------------------
    def _insert(
        self,
        kind: str,
        text: str,
        *,
        created: float | None = None,
        status: str = "ok",
        trust: str = "trusted",
        session_id: str | None = None,
        data: dict[str, Any] | None = None,
        item_id: int | None = None,
        commit: bool = True,
    ) -> int:
        cur = self._db.execute(
            "INSERT INTO items (id, kind, text, created, status, trust, session_id, data, owner, workspace) "
            "VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                item_id,
                kind,
                text,
                time.time() if created is None else created,
                status,
                trust,
                session_id,
                json.dumps(data or {}, ensure_ascii=False),
                self.scope.owner,
                self.scope.workspace,
            ),
        )
        new = int(cur.lastrowid or 0)
        self._db.execute("INSERT INTO items_fts (rowid, text) VALUES (?, ?)", (new, text))
        if commit:
            self._db.commit()
        return new

    def add(self, text: str, *, trust: str = "trusted") -> int:
        """Remember one fact for the scope's owner (the same sentence twice is kept once; stated again by the user,
        it becomes trusted); returns its id. "trusted" is for what the user states (`memory add`, a library caller,
        a `remember` the person approved in a run that read nothing untrusted); the `remember` tool passes
        "untrusted" for anything else."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("an empty fact cannot be remembered")
        if len(text) > MAX_FACT_CHARS:
            raise ValueError(f"a fact may be at most {MAX_FACT_CHARS} characters (this one has {len(text)})")
        existing = self._db.execute(  # the owner's same sentence, where this store would recall it
            "SELECT id FROM items WHERE kind = 'fact' AND text = ? AND owner = ? "
            "AND (workspace = ? OR trust = 'trusted')",
            (text, self.scope.owner, self.scope.workspace),
        ).fetchone()
        if existing:
            if trust == "trusted":
                self._db.execute("UPDATE items SET trust = 'trusted' WHERE id = ?", (int(existing[0]),))
                self._db.commit()
            return int(existing[0])
        return self._insert("fact", text, trust=trust)  # embedded at the next recall (no model load on write)

    def add_episode(
        self,
        record: dict[str, Any],
        *,
        session_id: str | None,
        keep_failed: bool,
        on_error: Callable[[str], None] | None = None,
    ) -> int | None:
        """Store the episode of a finished run (`record`: goal, answer, stopped, outcome, evidence, findings,
        files_written, tools, denied, untrusted). A run that did not answer, had a write denied, or whose outcome
        is not done / answered (unverified, failed, denied: no evidence backs it) is failed: kept marked "failed"
        with `keep_failed`, else not stored (None). A store that cannot be written now (locked by another
        process, disk full) keeps no episode and says so to `on_error`: the run's own result stands."""
        outcome = record.get("outcome") or ""
        failed = record.get("stopped") != "answer" or not record.get("answer") or bool(record.get("denied"))
        failed = failed or (bool(outcome) and outcome not in ("done", "answered"))  # no evidence: never recalled
        if failed and not keep_failed:
            return None
        keys = ("goal", "answer", "stopped", "outcome", "evidence", "findings", "files_written", "tools")
        data = {k: record.get(k) for k in keys}
        # what happened, not the model's say-so: the outcome and its evidence; the answer only when it has evidence
        said = f"outcome: {outcome} ({record.get('evidence') or ''})" if outcome else ""
        parts = [str(data["goal"] or ""), said, "" if failed else str(data["answer"] or "")]
        parts += [str(f) for f in data["findings"] or []]
        text = "\n".join(p for p in parts if p)[:4000]
        trust = "untrusted" if record.get("untrusted") else "trusted"
        status = "failed" if failed else "ok"
        try:
            return self._insert("episode", text, status=status, trust=trust, session_id=session_id, data=data)
        except sqlite3.Error as exc:
            self._db.rollback()
            if on_error is not None:
                on_error(f"this run's episode was not kept in long-term memory ({exc}): {self.path}")
            return None

    def mark_failed(self, item_id: int) -> bool:
        """The user says this episode went wrong: it stays listed, and is never recalled."""
        cur = self._db.execute(
            "UPDATE items SET status = 'failed' WHERE id = ? AND kind = 'episode' AND owner = ?",
            (item_id, self.scope.owner),
        )
        self._db.commit()
        return cur.rowcount > 0

    def rated(self, session_id: str, verdict: str) -> int:
        """A run the user rated (`sessions rate ID bad`, the service's rating): a bad one's episode is marked
        failed (listed, never recalled); a good rating changes nothing. The number of episodes marked."""
        if verdict != "bad":
            return 0
        cur = self._db.execute(
            "UPDATE items SET status = 'failed' WHERE session_id = ? AND kind = 'episode' AND owner = ?",
            (session_id, self.scope.owner),
        )
        self._db.commit()
        return cur.rowcount

    def forget(self, item_id: int) -> bool:
        if self.get(item_id) is None:  # not a rowid, or not this owner's
            return False
        cur = self._db.execute("DELETE FROM items WHERE id = ? AND owner = ?", (item_id, self.scope.owner))
        self._db.execute("DELETE FROM items_fts WHERE rowid = ?", (item_id,))
        self._db.execute("DELETE FROM vectors WHERE id = ?", (item_id,))
        self._db.commit()
        return cur.rowcount > 0

    @property
    def enabled(self) -> bool:
        """False after `memory off`: runs neither recall nor write episodes (facts stay until forgotten)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'enabled'").fetchone()
        return row is None or row[0] != "0"

    def set_enabled(self, on: bool) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('enabled', ?)", ("1" if on else "0",))
        self._db.commit()

    # -- reading ---------------------------------------------------------------------------
    def items(self, kind: str | None = None) -> list[Item]:
        """The scope owner's items (of every workspace), oldest first."""
        where, args = " WHERE owner = ?", [self.scope.owner]
        if kind:
            where, args = where + " AND kind = ?", [*args, kind]
        rows = self._db.execute(f"SELECT * FROM items{where} ORDER BY id", args).fetchall()
        return [_item(r) for r in rows]

    def all(self) -> list[Item]:
        """The facts, oldest first."""
        return self.items("fact")

    def get(self, item_id: int) -> Item | None:
        if not 0 < item_id <= _MAX_ROWID:
            return None
        row = self._db.execute("SELECT * FROM items WHERE id = ? AND owner = ?", (item_id, self.scope.owner)).fetchone()
        return _item(row) if row else None

    def search(self, query: str, limit: int = 3) -> list[Item]:
        """The items `recall(query)` would inject, best first."""
        return [h.item for h in self.hits(query, limit=limit)]

    def recall(self, goal: str, limit: int = 3, budget: int = RECALL_CHARS) -> list[str]:
        """The lines to inject for `goal` (once, at the start of a run): the best hits within `budget` chars."""
        return [h.line for h in self.hits(goal, limit=limit, budget=budget)]

    def hits(self, goal: str, *, limit: int = 3, budget: int = RECALL_CHARS, mode: str = "hybrid") -> list[Hit]:
        """What a run with this goal recalls: one ranked list after the relevance floor, within `budget`.

        `mode` "fts" and "vector" use one signal only (for measuring each; runs always use "hybrid")."""
        terms = query_terms(goal)
        fts: list[int] = []
        if terms and mode != "vector":
            rows = self._db.execute(
                "SELECT f.rowid FROM items_fts f JOIN items i ON i.id = f.rowid WHERE items_fts MATCH ? "
                f"AND {_RECALLABLE} ORDER BY bm25(items_fts) LIMIT ?",
                (fts_match(terms), *self._recallable, CANDIDATES),
            ).fetchall()
            fts = [int(r[0]) for r in rows]
        vec: list[tuple[int, float, float]] = []
        if self.embedder is not None and mode != "fts" and goal.strip():
            vec = self._nearest(goal)
        fused = fuse(fts, vec)
        if not fused:
            return []
        found = {i.id: i for i in self._fetch(list(fused))}
        judge = self.embedder if len(vec) >= MIN_VECTORS else None  # meaning counts over a large enough store
        scale = floor_scale(self._compared)
        z_floor = judge.floor * scale if judge is not None else float("inf")
        shared_floor = judge.shared_word_floor * scale if judge is not None else float("inf")
        out: list[Hit] = []
        for cand in sorted(fused.values(), key=lambda c: -c.score):
            item = found.get(cand.id)
            if item is None:
                continue
            share, matched = coverage(terms, item.text) if cand.fts_rank else (0.0, 0)
            cand.coverage = share
            z = cand.z if cand.z is not None and len(vec) >= MIN_VECTORS else float("-inf")
            words = share >= COVERAGE_FLOOR and matched >= min(2, len(terms))
            if not (words or z >= z_floor or (matched and z >= shared_floor)):
                continue  # the relevance floor: neither enough of the goal's words nor close enough in meaning
            line = item.recall_line(self.scope.workspace)
            if len(line) > budget:
                break
            budget -= len(line)
            out.append(Hit(item, cand.score, cand.fts_rank, cand.coverage, cand.cosine, cand.z, line))
            if len(out) >= limit:
                break
        return out

    def _fetch(self, ids: list[int]) -> list[Item]:
        marks = ",".join("?" * len(ids))
        return [_item(r) for r in self._db.execute(f"SELECT * FROM items WHERE id IN ({marks})", ids).fetchall()]

    def _nearest(self, goal: str) -> list[tuple[int, float, float]]:
        assert self.embedder is not None
        if not self._db.execute(f"SELECT 1 FROM items i WHERE {_RECALLABLE} LIMIT 1", self._recallable).fetchone():
            return []  # nothing to find: the embedding model is not even loaded
        self._embed_missing()
        query = pack(self.embedder.embed([goal], query=True)[0])
        rows = self._db.execute(
            f"SELECT v.id, v.vec FROM vectors v JOIN items i ON i.id = v.id WHERE v.model = ? AND {_RECALLABLE}",
            (self.embedder.name, *self._recallable),
        ).fetchall()
        self._compared = len(rows)
        return nearest(query, [(int(i), bytes(b)) for i, b in rows], CANDIDATES)

    def _embed_missing(self, batch: int = 32) -> int:
        """Embed the recallable items without a vector from this embedder yet (new ones, or after a model change)."""
        if self.embedder is None:
            return 0
        name = self.embedder.name
        sql = f"SELECT id, text FROM items i WHERE {_RECALLABLE} AND id NOT IN (SELECT id FROM vectors WHERE model = ?)"
        rows = self._db.execute(sql, (*self._recallable, name)).fetchall()
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            vectors = self.embedder.embed([str(t)[:2000] for _, t in chunk])
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (id, model, vec) VALUES (?, ?, ?)",
                [(int(i), name, pack(v)) for (i, _), v in zip(chunk, vectors, strict=True)],
            )
        self._db.commit()
        return len(rows)

    @property
    def _recallable(self) -> tuple[str, str, int]:
        """The parameters of `_RECALLABLE` for this store's scope."""
        return self.scope.owner, self.scope.workspace, int(self.scope.wide)

    def close(self) -> None:
        self._db.close()


def floor_scale(items: int) -> float:
    """How much of a z floor measured over FLOOR_ITEMS items holds over `items`: the best z of an unrelated goal
    grows like sqrt(2 ln n) (the largest of n draws), so a smaller store's floor is lower by that ratio (a store of
    20 cannot even reach z 4.6). Never above 1: larger stores keep the measured floor."""
    if items < 2:
        return 1.0
    return min(1.0, math.sqrt(2 * math.log(items)) / math.sqrt(2 * math.log(FLOOR_ITEMS)))


def _item(row: tuple[Any, ...]) -> Item:
    item_id, kind, text, created, status, trust, session_id, data, owner, workspace = row
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        parsed = {}
    item = Item(int(item_id), str(kind), str(text), float(created), str(status), str(trust), session_id, parsed)
    item.owner, item.workspace = str(owner), str(workspace)
    return item


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
