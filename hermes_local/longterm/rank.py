"""How recall ranks: query words for BM25, exact cosine over float32 vectors, reciprocal-rank fusion, the floor.

`query_terms(text)` drops stop words ("the", "user", "please", ...) so a goal's filler words match nothing;
the FTS5 index stems what is left (porter), so "tables" finds "table". `fts_match(terms)` is the MATCH
expression (any term). `pack`/`unpack` turn a vector into a float32 blob and back (SQLite keeps blobs beside
the FTS index: no extension needed); vectors are normalised when packed, so cosine is a dot product.
`nearest(query, rows)` is exact search in plain Python (numpy when it is importable: it ships with
llama-cpp-python). `fuse(lists)` is reciprocal-rank fusion. `Candidate` carries both signals so the caller's
relevance floor can drop what neither signal supports. Holds no SQL beyond the MATCH text and no model.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
RRF_K = 60  # the usual constant of reciprocal-rank fusion

# English function words, the words every goal and fact share ("user", "please"...) and generic task verbs
# ("write", "explain"...): matching on them injected every fact into every prompt.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing done down during each few for from further had has have having he her
    here hers him his how i if in into is it its itself just let me more most my myself no nor not now of off on
    once only or other our ours out over own same she should so some such than that the their theirs them then
    there these they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself also get got make made want wants need needs use used using
    user users please tell show give find know like thing things something anything way ok okay hi hello thanks
    thank one two new old last next first today yesterday tomorrow run runs again via per write read save explain
    generate compose define convert create describe help say ask look see put""".split()
)


def query_terms(text: str) -> list[str]:
    """The words of `text` worth matching: lower-cased, at least two letters, no stop words, each once."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOP_WORDS and not word.isdigit():
            seen.setdefault(word, None)
    return list(seen)


def fts_match(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression for any of `terms` (each quoted: no FTS syntax can come from the goal)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def pack(vector: Sequence[float]) -> bytes:
    """The vector normalised to length 1, as float32 bytes (a zero vector stays zero)."""
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return array("f", (v / norm for v in vector)).tobytes()


def unpack(blob: bytes) -> array:
    out = array("f")
    out.frombytes(blob)
    return out


def nearest(query: bytes, rows: Sequence[tuple[int, bytes]], limit: int) -> list[tuple[int, float]]:
    """(id, cosine) of the `limit` rows closest to `query` (all packed by `pack`), best first; exact search."""
    if not rows:
        return []
    try:
        import numpy as np
    except ImportError:  # plain Python: fine for thousands of items (see scripts/memory_recall.py --speed)
        q = unpack(query)
        scored = [(i, sum(a * b for a, b in zip(q, unpack(blob), strict=False))) for i, blob in rows]
    else:
        dim = len(query) // 4
        kept = [(i, blob) for i, blob in rows if len(blob) == len(query)]
        if not kept:
            return []
        matrix = np.frombuffer(b"".join(blob for _, blob in kept), dtype=np.float32).reshape(len(kept), dim)
        sims = matrix @ np.frombuffer(query, dtype=np.float32)
        top = np.argsort(-sims)[:limit]
        return [(kept[int(j)][0], float(sims[int(j)])) for j in top]
    scored.sort(key=lambda pair: -pair[1])
    return scored[:limit]


@dataclass
class Candidate:
    """One item's standing in a query: its BM25 rank and term coverage, its cosine and rank, the fused score."""

    id: int
    fts_rank: int | None = None  # 1 = best BM25
    coverage: float = 0.0  # share of the query's terms the item contains (after stemming)
    cosine: float | None = None
    vec_rank: int | None = None
    score: float = 0.0


def fuse(fts: Sequence[int], vec: Sequence[tuple[int, float]], k: int = RRF_K) -> dict[int, Candidate]:
    """Reciprocal-rank fusion of the BM25 order (`fts`: ids, best first) and the vector order (`vec`)."""
    out: dict[int, Candidate] = {}
    for rank, item in enumerate(fts, 1):
        cand = out.setdefault(item, Candidate(item))
        cand.fts_rank = rank
        cand.score += 1.0 / (k + rank)
    for rank, (item, cosine) in enumerate(vec, 1):
        cand = out.setdefault(item, Candidate(item))
        cand.cosine, cand.vec_rank = cosine, rank
        cand.score += 1.0 / (k + rank)
    return out


def stems(words: Iterable[str]) -> set[str]:
    """A crude suffix strip for the coverage count (the index itself uses FTS5's porter stemmer)."""
    out = set()
    for w in words:
        for suffix in ("ies", "es", "s", "ing", "ed"):
            if len(w) > len(suffix) + 2 and w.endswith(suffix):
                w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
                break
        out.add(w)
    return out


def coverage(terms: Sequence[str], text: str) -> float:
    """The share of `terms` (stemmed) that occur in `text` (stemmed), counted only when at least two of them
    do (or the goal has one term): one shared word of a longer goal is a coincidence more often than not."""
    wanted = stems(terms)
    if not wanted:
        return 0.0
    matched = len(wanted & stems(_WORD.findall(text.lower())))
    return matched / len(wanted) if matched >= min(2, len(wanted)) else 0.0
