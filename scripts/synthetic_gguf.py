"""Write a synthetic llama-architecture Q4_0 GGUF: random weights, the embedded SmolLM2's vocabulary and template.

For GPU checks where no weights can be downloaded (scripts/gpu_check.sh) and for tests of the memory fit:
`--shape 7b` is Mistral-7B-shaped (32 layers, 4096 wide, 8 KV heads, 32k trained context, ≈ 4 GB), `--shape
tiny` a few MB that llama.cpp loads in a second. Tool calls stay valid on random weights only under a grammar
(`--tool-choice required`). `--sparse` writes the header and leaves the tensor data as a hole (a sparse file:
the header is exact, nothing is read from the data), for tests that only read the header.

  python scripts/synthetic_gguf.py OUT.gguf --shape 7b
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

SHAPES: dict[str, dict[str, int]] = {
    "7b": dict(n_layer=32, n_embd=4096, n_ff=14336, n_head=32, n_head_kv=8, n_ctx=32768),
    "tiny": dict(n_layer=2, n_embd=128, n_ff=256, n_head=4, n_head_kv=2, n_ctx=2048),
}
Q4_0_BLOCK, Q4_0_BYTES = 32, 18


def _vocabulary() -> tuple[dict[str, Any], Path]:
    """The embedded model's tokenizer.* keys (values and types) and its path."""
    import gguf

    from hermes_local.models.registry import resolve

    path = resolve(None)[0]
    reader = gguf.GGUFReader(path)
    keys = {}
    for name, field in reader.fields.items():
        if name.startswith("tokenizer."):
            sub = field.types[1] if len(field.types) > 1 else None
            keys[name] = (field.contents(), field.types[0], sub)
    return keys, path


def _q4_0(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Random Q4_0 blocks with a small fixed scale (finite activations through every layer)."""
    blocks = rows * cols // Q4_0_BLOCK
    data = np.empty((blocks, Q4_0_BYTES), dtype=np.uint8)
    data[:, :2] = np.frombuffer(np.float16(0.004).tobytes(), dtype=np.uint8)
    data[:, 2:] = rng.integers(0, 256, size=(blocks, 16), dtype=np.uint8)
    return data.reshape(rows, cols // Q4_0_BLOCK * Q4_0_BYTES)


def tensors(shape: dict[str, int], n_vocab: int) -> list[tuple[str, tuple[int, int] | tuple[int], bool]]:
    """(name, (rows, cols) or (cols,), quantized) in file order."""
    e, ff, kv = shape["n_embd"], shape["n_ff"], shape["n_embd"] // shape["n_head"] * shape["n_head_kv"]
    out: list[tuple[str, Any, bool]] = [("token_embd.weight", (n_vocab, e), True)]
    for i in range(shape["n_layer"]):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (e,), False), (b + "attn_q.weight", (e, e), True)]
        out += [(b + "attn_k.weight", (kv, e), True), (b + "attn_v.weight", (kv, e), True)]
        out += [(b + "attn_output.weight", (e, e), True), (b + "ffn_norm.weight", (e,), False)]
        out += [(b + "ffn_gate.weight", (ff, e), True), (b + "ffn_up.weight", (ff, e), True)]
        out += [(b + "ffn_down.weight", (e, ff), True)]
    return out + [("output_norm.weight", (e,), False), ("output.weight", (n_vocab, e), True)]


def write(out: Path, shape_name: str = "tiny", *, sparse: bool = False, seed: int = 0) -> Path:
    """Write the GGUF to `out` and return it."""
    import gguf

    shape = SHAPES[shape_name]
    vocab, _ = _vocabulary()
    n_vocab = len(vocab["tokenizer.ggml.tokens"][0])
    writer = gguf.GGUFWriter(out, "llama")
    writer.add_name(f"synthetic-{shape_name}")
    writer.add_block_count(shape["n_layer"])
    writer.add_context_length(shape["n_ctx"])
    writer.add_embedding_length(shape["n_embd"])
    writer.add_feed_forward_length(shape["n_ff"])
    writer.add_head_count(shape["n_head"])
    writer.add_head_count_kv(shape["n_head_kv"])
    writer.add_rope_dimension_count(shape["n_embd"] // shape["n_head"])
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    for name, (value, vtype, sub) in vocab.items():
        writer.add_key_value(name, value, vtype, sub_type=sub)
    plan = tensors(shape, n_vocab)
    for name, dims, quantized in plan:
        if quantized:
            rows, cols = dims
            nbytes = rows * cols // Q4_0_BLOCK * Q4_0_BYTES
            byte_shape = (rows, cols // Q4_0_BLOCK * Q4_0_BYTES)
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, gguf.GGMLQuantizationType.Q4_0)
        else:
            writer.add_tensor_info(name, dims, np.dtype(np.float32), dims[0] * 4)
    writer.write_header_to_file(out)
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    if sparse:
        writer.close()
        _leave_hole(out, plan, writer)
        return out
    rng = np.random.default_rng(seed)
    for _, dims, quantized in plan:
        data = _q4_0(rng, *dims) if quantized else np.ones(dims, dtype=np.float32)
        writer.write_tensor_data(data)
    writer.close()
    return out


def _leave_hole(out: Path, plan: list[Any], writer: Any) -> None:
    """Extend the file to its full size without writing the data (aligned like GGUFWriter aligns it)."""
    align = writer.data_alignment
    size = out.stat().st_size
    size += -size % align
    for _, dims, quantized in plan:
        nbytes = dims[0] * dims[1] // Q4_0_BLOCK * Q4_0_BYTES if quantized else dims[0] * 4
        size += nbytes + (-nbytes % align)
    with out.open("r+b") as fh:
        fh.truncate(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--sparse", action="store_true", help="header only; the data is a hole")
    args = parser.parse_args()
    path = write(args.out, args.shape, sparse=args.sparse)
    print(f"{path} ({path.stat().st_size / 2**30:.2f} GiB, {args.shape})")


if __name__ == "__main__":
    main()
