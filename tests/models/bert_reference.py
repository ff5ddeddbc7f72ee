"""A plain-numpy reference for the converted embedding model: BERT's tokenizer and forward pass, mean-pooled.

Written from the BERT paper's definitions (post-layer-norm encoder, exact GELU, WordPiece greedy longest match
after lower-casing and splitting on whitespace and punctuation), independent of llama.cpp and of
hermes_local/models/convert.py, so that a conversion error (a swapped tensor, a wrong vocabulary) shows as a
vector that differs. ASCII text only; no Chinese-character or accent handling.
"""

from __future__ import annotations

import json
import math
import string
import zipfile
from pathlib import Path

import numpy as np
from safetensors.numpy import load

Weights = dict[str, np.ndarray]


def load_checkpoint(archive: Path) -> tuple[Weights, dict[str, int]]:
    """The weights (float32) and the WordPiece vocabulary of the zipped sentence-transformers checkpoint."""
    with zipfile.ZipFile(archive) as z:
        names = {Path(n).name: n for n in z.namelist()}
        weights = {k: v.astype(np.float32) for k, v in load(z.read(names["model.safetensors"])).items()}
        vocab = json.loads(z.read(names["tokenizer.json"]))["model"]["vocab"]
    return weights, {str(k): int(v) for k, v in vocab.items()}


def wordpiece(text: str, vocab: dict[str, int]) -> list[int]:
    """[CLS] pieces [SEP] for ASCII `text`."""
    words: list[str] = []
    for chunk in text.lower().split():
        word = ""
        for ch in chunk:
            if ch in string.punctuation:
                words += [word, ch] if word else [ch]
                word = ""
            else:
                word += ch
        if word:
            words.append(word)
    ids = [vocab["[CLS]"]]
    for word in words:
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start and (("##" if start else "") + word[start:end]) not in vocab:
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            pieces.append(vocab[("##" if start else "") + word[start:end]])
            start = end
        ids += pieces
    return [*ids, vocab["[SEP]"]]


def _norm(x: np.ndarray, w: Weights, name: str, eps: float = 1e-12) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w[f"{name}.weight"] + w[f"{name}.bias"]


def _dense(x: np.ndarray, w: Weights, name: str) -> np.ndarray:
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def bert_embedding(w: Weights, ids: list[int], heads: int = 12) -> list[float]:
    """The mean-pooled, L2-normalised last hidden state of `ids` (token type 0 throughout)."""
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
    x = _norm(x + w["embeddings.token_type_embeddings.weight"][0], w, "embeddings.LayerNorm")
    layers = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("encoder.layer."))
    erf = np.vectorize(math.erf)
    for i in range(layers):
        p = f"encoder.layer.{i}"
        q, k, v = (_dense(x, w, f"{p}.attention.self.{m}").reshape(n, heads, -1) for m in ("query", "key", "value"))
        scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attended = np.einsum("hqk,khd->qhd", probs, v).reshape(n, -1)
        x = _norm(x + _dense(attended, w, f"{p}.attention.output.dense"), w, f"{p}.attention.output.LayerNorm")
        h = _dense(x, w, f"{p}.intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
        x = _norm(x + _dense(h, w, f"{p}.output.dense"), w, f"{p}.output.LayerNorm")
    pooled = x.mean(0)
    return [float(f) for f in pooled / np.linalg.norm(pooled)]
