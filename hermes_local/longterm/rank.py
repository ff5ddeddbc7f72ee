"""How recall ranks: query words for BM25, exact cosine over float32 vectors, reciprocal-rank fusion, the floor.

`query_terms(text)` drops stop words ("the", "user", "please", ...) so a goal's filler words match nothing;
the FTS5 index stems what is left (porter), so "tables" finds "table". `fts_match(terms)` is the MATCH
expression (any term). `pack`/`unpack` turn a vector into a float32 blob and back (SQLite keeps blobs beside
the FTS index: no extension needed); vectors are normalised when packed, so cosine is a dot product.
`nearest(query, rows)` is exact search, centred on the rows' mean, with each hit's z-score, in plain Python
(numpy when it is importable: it ships with llama-cpp-python). `fuse(lists)` is reciprocal-rank fusion;
`Candidate` carries both signals so the caller's relevance floor can drop what neither signal supports.
Holds no SQL beyond the MATCH text and no model.
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


def nearest(query: bytes, rows: Sequence[tuple[int, bytes]], limit: int) -> list[tuple[int, float, float]]:
    """(id, cosine, z) of the `limit` rows closest to `query` (all packed by `pack`), best first; exact search.

    The cosine is taken after centring every vector on the rows' mean: a model's vectors share one direction
    (a chat model's mean-pooled states above all: raw cosines of unrelated texts sit near 0.8), and what is
    left tells texts apart. z is how many standard deviations the similarity stands above the mean one.
    """
    rows = [(i, blob) for i, blob in rows if len(blob) == len(query)]
    if not rows:
        return []
    try:
        import numpy as np
    except ImportError:  # plain Python: fine for thousands of items (see scripts/memory_recall.py --speed)
        return _nearest_plain(query, rows, limit)
    matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(len(rows), -1)
    mean = matrix.mean(axis=0)
    centred = matrix - mean
    centred /= np.linalg.norm(centred, axis=1, keepdims=True) + 1e-9
    q = np.frombuffer(query, dtype=np.float32) - mean
    sims = centred @ (q / (np.linalg.norm(q) + 1e-9))
    spread = float(sims.std()) or 1.0
    top = np.argsort(-sims)[:limit]
    return [(rows[int(j)][0], float(sims[int(j)]), float((sims[int(j)] - sims.mean()) / spread)) for j in top]


def _nearest_plain(query: bytes, rows: Sequence[tuple[int, bytes]], limit: int) -> list[tuple[int, float, float]]:
    vectors = [unpack(blob) for _, blob in rows]
    dim = len(vectors[0])
    mean = [sum(v[k] for v in vectors) / len(vectors) for k in range(dim)]

    def centred(v: Sequence[float]) -> list[float]:
        out = [a - b for a, b in zip(v, mean, strict=True)]
        norm = math.sqrt(sum(a * a for a in out)) or 1.0
        return [a / norm for a in out]

    q = centred(unpack(query))
    sims = [sum(a * b for a, b in zip(q, centred(v), strict=True)) for v in vectors]
    average = sum(sims) / len(sims)
    spread = math.sqrt(sum((x - average) ** 2 for x in sims) / len(sims)) or 1.0
    order = sorted(range(len(sims)), key=lambda j: -sims[j])[:limit]
    return [(rows[j][0], sims[j], (sims[j] - average) / spread) for j in order]


@dataclass
class Candidate:
    """One item's standing in a query: its BM25 rank and term coverage, its cosine and rank, the fused score."""

    id: int
    fts_rank: int | None = None  # 1 = best BM25
    coverage: float = 0.0  # share of the query's terms the item contains (after stemming)
    cosine: float | None = None  # after centring (see `nearest`)
    z: float | None = None  # standard deviations above the mean similarity to the goal
    vec_rank: int | None = None
    score: float = 0.0


def fuse(fts: Sequence[int], vec: Sequence[tuple[int, float, float]], k: int = RRF_K) -> dict[int, Candidate]:
    """Reciprocal-rank fusion of the BM25 order (`fts`: ids, best first) and the vector order (`vec`)."""
    out: dict[int, Candidate] = {}
    for rank, item in enumerate(fts, 1):
        cand = out.setdefault(item, Candidate(item))
        cand.fts_rank = rank
        cand.score += 1.0 / (k + rank)
    for rank, (item, cosine, z) in enumerate(vec, 1):
        cand = out.setdefault(item, Candidate(item))
        cand.cosine, cand.z, cand.vec_rank = cosine, z, rank
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


def coverage(terms: Sequence[str], text: str) -> tuple[float, int]:
    """(the share of `terms` that occur in `text`, how many do), both stemmed."""
    wanted = stems(terms)
    if not wanted:
        return 0.0, 0
    matched = len(wanted & stems(_WORD.findall(text.lower())))
    return matched / len(wanted), matched
