"""A BERT sentence-embedding checkpoint (Hugging Face safetensors) converted to a GGUF llama.cpp loads.

`convert_bert(source, target)` reads a sentence-transformers folder or .zip (`config.json`,
`model.safetensors`, `tokenizer.json`, optionally `modules.json` + the pooling config) and writes an F16 GGUF
(1-D tensors and the token-type table stay F32) the way llama.cpp's own `convert_hf_to_gguf.py` writes its
`BertModel`: the BERT hyperparameters, non-causal attention, the pooling type, and the WordPiece vocabulary
as a "phantom space" vocabulary (`##x` -> `x`, other pieces get a leading `▁`, special tokens kept) for
llama.cpp's WPM tokenizer. Tensor names come from the `gguf` package's own name map (the library llama.cpp
ships), so a mapping this code does not know is refused, never guessed. The file is written beside `target`
and renamed into place, so a failed conversion leaves nothing half-written.

Only BERT-architecture checkpoints (all-MiniLM, bge-small, e5-small, gte-small and the like); no
quantisation below F16, no torch, no transformers. Does not pick or download models (registry.py and
download.py do) and does not run them (engines/inprocess/embedding.py does).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hermes_local.errors import UserError

CONVERT_HINT = 'pip install "hermes-local[embeddings]" (or: pip install gguf safetensors)'
REQUIRED = ("config.json", "model.safetensors", "tokenizer.json")
_DROPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


@contextmanager
def written_into_place(target: Path) -> Iterator[Path]:
    """A `.partial` path beside `target` to write; renamed to `target` when the block ends, removed if it fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        yield partial
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


@contextmanager
def checkpoint_folder(source: Path) -> Iterator[Path]:
    """The checkpoint's folder: `source` itself, or a .zip unpacked into a temporary folder for the conversion."""
    if source.is_dir():
        yield source
        return
    if not zipfile.is_zipfile(source):
        raise UserError(f"{source} is neither a checkpoint folder nor a .zip of one (it needs {', '.join(REQUIRED)})")
    with tempfile.TemporaryDirectory(prefix="hermes-convert-") as tmp, zipfile.ZipFile(source) as archive:
        for member in archive.namelist():  # extract only what the conversion reads, never outside tmp
            name = Path(member)
            if name.is_absolute() or ".." in name.parts:
                raise UserError(f"{source} holds an unsafe path {member!r}; it is not a model checkpoint")
        archive.extractall(tmp)
        folder = Path(tmp)
        inner = [p.parent for p in folder.rglob("config.json") if (p.parent / "model.safetensors").is_file()]
        yield inner[0] if inner else folder


def _read_json(folder: Path, name: str) -> Any:
    try:
        return json.loads((folder / name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{folder} has no {name}: not a Hugging Face BERT checkpoint") from None
    except ValueError as exc:
        raise UserError(f"{folder / name} is not valid JSON ({exc})") from None


def _pooling(folder: Path, gguf: Any) -> Any:
    """The sentence-transformers pooling mode (modules.json -> its Pooling config), MEAN when none is declared."""
    modules = _read_json(folder, "modules.json") if (folder / "modules.json").is_file() else []
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            config = _read_json(folder / module["path"], "config.json")
            if config.get("pooling_mode_cls_token"):
                return gguf.PoolingType.CLS
            if config.get("pooling_mode_mean_tokens"):
                return gguf.PoolingType.MEAN
            raise UserError(f"{folder}: only mean or CLS pooling converts (its pooling is {config})")
    return gguf.PoolingType.MEAN


def _vocabulary(folder: Path, n_vocab: int, gguf: Any) -> tuple[list[str], list[int]]:
    """WordPiece pieces as llama.cpp's WPM tokenizer expects them, and their token types."""
    tokenizer = _read_json(folder, "tokenizer.json")
    model = tokenizer.get("model") or {}
    if model.get("type") != "WordPiece":
        raise UserError(f"{folder}: the tokenizer is {model.get('type')!r}, not BERT's WordPiece; it cannot convert")
    by_id = {int(i): str(piece) for piece, i in model["vocab"].items()}
    special = {int(t["id"]) for t in tokenizer.get("added_tokens", []) if t.get("special")}
    tokens, types = [], []
    for i in range(n_vocab):
        piece = by_id.get(i)
        if piece is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in special:
            tokens.append(piece)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(piece[2:] if piece.startswith("##") else "\u2581" + piece)
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def convert_bert(source: Path, target: Path, *, log: Callable[[str], None] = lambda _: None) -> Path:
    """Write `target` (GGUF, F16) from the BERT checkpoint at `source` (folder or .zip); returns `target`."""
    try:
        import gguf
        import numpy as np
        from safetensors.numpy import load_file
    except ImportError:
        raise UserError(f"converting a checkpoint needs the gguf and safetensors packages: {CONVERT_HINT}") from None
    with checkpoint_folder(source) as folder:
        config = _read_json(folder, "config.json")
        if config.get("model_type") != "bert":
            raise UserError(f"{source} is a {config.get('model_type')!r} model; only BERT checkpoints convert")
        n_layers, n_vocab = int(config["num_hidden_layers"]), int(config["vocab_size"])
        tokens, types = _vocabulary(folder, n_vocab, gguf)
        names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
        tensors = load_file(str(folder / "model.safetensors"))
        logging.getLogger("gguf").setLevel(logging.ERROR)  # its notes on special tokens llama.cpp sets itself
        with written_into_place(target) as partial:
            writer = gguf.GGUFWriter(partial, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
            writer.add_name(str(config.get("_name_or_path") or source.stem))
            writer.add_block_count(n_layers)
            writer.add_context_length(int(config["max_position_embeddings"]))
            writer.add_embedding_length(int(config["hidden_size"]))
            writer.add_feed_forward_length(int(config["intermediate_size"]))
            writer.add_head_count(int(config["num_attention_heads"]))
            writer.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
            writer.add_causal_attention(False)
            writer.add_pooling_type(_pooling(folder, gguf))
            writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
            writer.add_token_type_count(int(config.get("type_vocab_size", 1)))
            writer.add_tokenizer_model("bert")
            writer.add_tokenizer_pre("default")
            writer.add_token_list(tokens)
            writer.add_token_types(types)
            gguf.SpecialVocab(folder, n_vocab=n_vocab).add_to_gguf(writer)
            for name, data in tensors.items():
                name = name.removeprefix("bert.")
                if name in _DROPPED or name.startswith("cls."):
                    continue
                mapped = names.get_name(name, try_suffixes=(".weight", ".bias"))
                if mapped is None:
                    raise UserError(f"{source}: tensor {name!r} has no GGUF name; this BERT variant cannot convert")
                keep_f32 = data.ndim <= 1 or mapped.startswith("token_types")
                writer.add_tensor(mapped, data.astype(np.float32 if keep_f32 else np.float16))
            log(f"writing {target.name} ({len(tokens)} tokens, {n_layers} layers)")
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
            writer.close()
    return target
