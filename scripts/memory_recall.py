"""Recall quality of long-term memory on the labelled set (issue 33): FTS-only, vector-only and hybrid.

Loads tests/data/memory_recall.json (hand-written targets with a reworded query each, templated distractors,
unrelated queries that must recall nothing) into a fresh store under a temporary home, embedded with the
model a run would use (`--embedding-model NAME|PATH`; default: the first installed `kind = "embedding"`
model, else the embedded chat model), and reports for each mode:
  recall@3   the share of reworded queries whose target is among the (at most 3) recalled items,
  false      the share of unrelated queries that recalled anything (false injection),
for "before" (the store this replaced), "fts" (words, with the floor), "vector-ranking" (the 3 nearest by
meaning, no floor), "vector" (meaning, with its floor) and "hybrid" (what runs use),
plus the added latency per run start: embedding the goal alone, and the whole recall (`hits`), median ms.
`--cosines` prints the top cosine of related and unrelated queries (to set a model's similarity_floor).
`--speed` times exact vector search over 10k and 100k random vectors (plain Python vs numpy); no model.
`--set FILE` scores another labelled set of the same format: tests/data/memory_heldout.json is issue 44's
held-out set (12 facts, 8 episodes, 8 reworded and 4 unrelated queries, never used to set a floor); the
summary line then reads e.g. "hybrid: 7/8 reworded in the top 3, 0/4 unrelated recalled anything".
Figures, not assertions:
  PYTHONPATH=$PWD python scripts/memory_recall.py [--embedding-model nomic-embed-text] [--json out.json]
  PYTHONPATH=$PWD python scripts/memory_recall.py --set tests/data/memory_heldout.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "memory_recall.json"


def load_set(store: Any, path: Path = DATA) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Write the set's items into `store`; (set id -> store id, the queries)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    ids: dict[str, int] = {}
    for item in data["items"]:
        if item["kind"] == "fact":
            ids[item["id"]] = store.add(item["text"])
        else:
            record = {"goal": item["goal"], "answer": item["answer"], "stopped": "answer", "findings": []}
            ids[item["id"]] = store.add_episode(record, session_id=f"set-{item['id']}", keep_failed=False)
    return ids, data["queries"]


def score(store: Any, ids: dict[str, int], queries: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """recall@3 over the reworded queries, false injections over the unrelated ones, and the misses."""
    found = related = injected = unrelated = 0
    misses: list[str] = []
    for q in queries:
        if mode == "vector-ranking":  # the three nearest by meaning, no floor: what the vectors know alone
            got = [hit[0] for hit in store._nearest(q["query"])[:3]]
        else:
            got = [h.item.id for h in store.hits(q["query"], mode=mode)]
        if q["expect"] is None:
            unrelated += 1
            injected += bool(got)
            if got:
                misses.append(f"injected into {q['query']!r}")
        else:
            related += 1
            hit = ids[q["expect"]] in got
            found += hit
            if not hit:
                misses.append(f"missed {q['expect']} for {q['query']!r}")
    return {
        "mode": mode,
        "recall_at_3": round(found / max(related, 1), 3),
        "found": f"{found}/{related}",
        "false_injection": round(injected / max(unrelated, 1), 3),
        "injected": f"{injected}/{unrelated}",
        "misses": misses,
    }


def before(path: Path = DATA) -> dict[str, Any]:
    """The recall of the store this replaced (FTS5 without stemming, any word of 3+ letters, no floor, top 3)."""
    import re
    import sqlite3

    data = json.loads(path.read_text(encoding="utf-8"))
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE facts USING fts5(text)")
    rowids = {}
    for item in data["items"]:
        text = item.get("text") or f"{item['goal']}\n{item['answer']}"
        rowids[item["id"]] = db.execute("INSERT INTO facts (text) VALUES (?)", (text,)).lastrowid
    found = related = injected = unrelated = 0
    for q in data["queries"]:
        words = sorted({w.lower() for w in re.findall(r"[^\W_]{3,}", q["query"])})
        match = " OR ".join(f'"{w}"' for w in words)
        sql = "SELECT rowid FROM facts WHERE facts MATCH ? ORDER BY bm25(facts) LIMIT 3"
        got = [r[0] for r in db.execute(sql, (match,)).fetchall()] if words else []
        if q["expect"] is None:
            unrelated, injected = unrelated + 1, injected + bool(got)
        else:
            related, found = related + 1, found + (rowids[q["expect"]] in got)
    return {
        "mode": "before (issue 33)",
        "recall_at_3": round(found / related, 3),
        "found": f"{found}/{related}",
        "false_injection": round(injected / unrelated, 3),
        "injected": f"{injected}/{unrelated}",
        "misses": [],
    }


def latency(store: Any, queries: list[dict[str, Any]]) -> dict[str, float]:
    """Median ms of embedding one goal, and of the whole recall of a run start."""
    embed, whole = [], []
    for q in queries:
        if store.embedder is not None:
            t = time.perf_counter()
            store.embedder.embed([q["query"]], query=True)
            embed.append(time.perf_counter() - t)
        t = time.perf_counter()
        store.hits(q["query"])
        whole.append(time.perf_counter() - t)
    return {
        "embed_goal_ms": round(1000 * statistics.median(embed), 1) if embed else 0.0,
        "recall_ms": round(1000 * statistics.median(whole), 1),
    }


def cosines(store: Any, ids: dict[str, int], queries: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The cosine and z of each related query to its target, and the best of each unrelated query (the floor
    is a z: an unrelated query's best z must stay below it, a related one's target above it)."""
    out: dict[str, list[float]] = {"target_cosine": [], "target_z": [], "unrelated_top_cosine": [],
                                   "unrelated_top_z": []}  # fmt: skip
    for q in queries:
        ranked = store._nearest(q["query"])
        if q["expect"] is None:
            out["unrelated_top_cosine"].append(round(ranked[0][1], 3) if ranked else 0.0)
            out["unrelated_top_z"].append(round(ranked[0][2], 2) if ranked else 0.0)
        else:
            want = ids[q["expect"]]
            found = next(((c, z) for i, c, z in ranked if i == want), (0.0, 0.0))
            out["target_cosine"].append(round(found[0], 3))
            out["target_z"].append(round(found[1], 2))
    return out


def speed(dim: int = 768, sizes: tuple[int, ...] = (10_000, 100_000)) -> list[dict[str, Any]]:
    """Exact search over random unit vectors: numpy vs plain Python, at 10k and 100k items (no model)."""
    import numpy as np

    from hermes_local.longterm import rank

    rows_out = []
    rng = np.random.default_rng(1)
    for n in sizes:
        matrix = rng.standard_normal((n, dim)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        rows = [(i, matrix[i].tobytes()) for i in range(n)]
        query = rank.pack(rng.standard_normal(dim).tolist())
        t = time.perf_counter()
        rank.nearest(query, rows, 50)
        with_numpy = time.perf_counter() - t
        t = time.perf_counter()
        rank._nearest_plain(query, rows, 50)
        plain = time.perf_counter() - t
        times = {"numpy_ms": round(1000 * with_numpy, 1), "python_ms": round(1000 * plain)}
        rows_out.append({"items": n, "dim": dim, **times})
        print(rows_out[-1], flush=True)
    return rows_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedding-model", default=None, help='registry name or .gguf ("none": words only)')
    parser.add_argument("--json", default=None, help="write the figures to this file (- for stdout)")
    parser.add_argument("--cosines", action="store_true", help="print cosine distributions (to set a floor)")
    parser.add_argument("--speed", action="store_true", help="time exact vector search at 10k and 100k items")
    parser.add_argument("--floor", type=float, default=None, help="try this similarity_floor (z) instead")
    parser.add_argument("--home", default=None, help="keep the store (and its vectors) in this folder for reruns")
    parser.add_argument("--set", default=str(DATA), help="the labelled set (default tests/data/memory_recall.json)")
    args = parser.parse_args(argv)
    if args.speed:
        speed()
        return 0
    from hermes_local.config import load_settings
    from hermes_local.runtime import memory_store

    settings = load_settings({"embedding_model": args.embedding_model})
    labelled = Path(args.set)
    with tempfile.TemporaryDirectory() as home:  # the set's store; the embedding model is found in your home
        db = Path(args.home or home) / "memory.db"
        fresh = not db.exists()
        store = memory_store(settings, db)
        t = time.perf_counter()
        if fresh:
            ids, queries = load_set(store, labelled)
        else:  # a kept store holds the set already, in order, with its vectors
            data = json.loads(labelled.read_text(encoding="utf-8"))
            ids = {want["id"]: have.id for want, have in zip(data["items"], store.items(), strict=True)}
            queries = data["queries"]
        if store.embedder is not None:
            store._embed_missing()
            store.embedder.floor = args.floor if args.floor is not None else store.embedder.floor
        name = store.embedder.name if store.embedder else "none (words only)"
        floor = f" (similarity_floor {store.embedder.floor} z)" if store.embedder else ""
        took = time.perf_counter() - t
        print(f"embedding model: {name}{floor}; {len(ids)} items stored and embedded in {took:.1f} s")
        report: dict[str, Any] = {"embedding_model": name, "items": len(ids), "queries": len(queries), "modes": []}
        modes = ["before", "fts", "vector-ranking", "vector", "hybrid"] if store.embedder else ["before", "fts"]
        for mode in modes:
            row = before(labelled) if mode == "before" else score(store, ids, queries, mode)
            report["modes"].append(row)
            print(
                f"{mode:14} recall@3 {row['recall_at_3']:.3f} ({row['found']})  "
                f"false injection {row['false_injection']:.3f} ({row['injected']})"
            )
            for miss in row["misses"]:
                print(f"          {miss}")
        final = report["modes"][-1]
        related = final["found"].split("/")[1]
        print(
            f"{final['mode']}: {final['found']} reworded in the top 3, {final['injected']} unrelated recalled "
            f"anything (set {labelled.name}; {related} reworded queries)"
        )
        report["latency"] = latency(store, queries)
        print(
            f"run start: embedding the goal {report['latency']['embed_goal_ms']} ms, "
            f"whole recall {report['latency']['recall_ms']} ms (median)"
        )
        if args.cosines and store.embedder is not None:
            report["cosines"] = cosines(store, ids, queries)
            for key, values in report["cosines"].items():
                values = sorted(values)
                print(f"{key}: min {values[0]} median {statistics.median(values)} max {values[-1]}")
        store.close()
    if args.json:
        text = json.dumps(report, indent=2)
        Path(args.json).write_text(text) if args.json != "-" else print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
