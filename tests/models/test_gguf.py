"""GGUF header parsing on generated files (valid, truncated, corrupt) and on the embedded SmolLM2 GGUF.

`make_gguf` is a tiny GGUF v2/v3 writer shared with test_models.py and test_download.py.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from hermes_local.errors import UserError
from hermes_local.models.gguf import GGML_TYPES, check_gguf, gguf_info, read_header

# value type ids (GGUF spec)
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q",
        I64: "<q", F64: "<d"}  # fmt: skip
TOOL_TEMPLATE = "{% if tools %}<tools>{{ tools }}</tools>{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
PLAIN_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"


def _type_of(value: Any) -> int:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return U32 if 0 <= value < 2**32 else I64
    if isinstance(value, float):
        return F32
    if isinstance(value, str):
        return STR
    if isinstance(value, list):
        return ARR
    raise TypeError(value)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(vtype: int, value: Any) -> bytes:
    if vtype == STR:
        return _string(value)
    if vtype == ARR:
        item_type, items = value if isinstance(value, tuple) else (_type_of(value[0]) if value else U8, value)
        return struct.pack("<IQ", item_type, len(items)) + b"".join(_value(item_type, v) for v in items)
    return struct.pack(_FMT[vtype], value)


def make_gguf(
    metadata: dict[str, Any] | None = None,
    tensors: list[tuple[str, tuple[int, ...], int]] | None = None,
    *,
    version: int = 3,
    alignment: int = 32,
    chat_template: str | None = PLAIN_TEMPLATE,
) -> bytes:
    """A small but complete GGUF: llama-shaped metadata, a 100-token vocab and 2 layers of tensors."""
    meta: dict[str, Any] = {
        "general.architecture": "llama",
        "general.name": "Tiny Hermes Test",
        "general.file_type": 7,  # Q8_0
        "llama.block_count": 2,
        "llama.context_length": 512,
        "llama.embedding_length": 64,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.rope.freq_base": 10000.0,
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(100)],
        "tokenizer.ggml.scores": (F32, [0.0] * 100),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.add_bos_token": True,
        "general.nested": (ARR, [(I16, [-1, 2]), (STR, ["a", "b"])]),
        "general.big": (U64, [2**40]),
        "general.f64": (F64, [1.5]),
        "general.signed": (I8, [-3]),
    }
    if alignment != 32:
        meta["general.alignment"] = alignment
    if chat_template is not None:
        meta["tokenizer.chat_template"] = chat_template
    meta.update(metadata or {})
    if tensors is None:
        tensors = [("token_embd.weight", (64, 100), 0), ("output_norm.weight", (64,), 0)]
        for layer in range(2):
            tensors += [(f"blk.{layer}.attn_q.weight", (64, 64), 8), (f"blk.{layer}.attn_k.weight", (64, 32), 8)]
    out = struct.pack("<4sIQQ", b"GGUF", version, len(tensors), len(meta))
    for key, value in meta.items():
        vtype = ARR if isinstance(value, tuple) else _type_of(value)
        out += _string(key) + struct.pack("<I", vtype) + _value(vtype, value)
    offset, blobs = 0, []
    for name, shape, ggml_type in tensors:
        _, block, size = GGML_TYPES[ggml_type]
        n = 1
        for d in shape:
            n *= d
        nbytes = n // block * size
        out += _string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", ggml_type, offset)
        padded = -(-nbytes // alignment) * alignment
        blobs.append(bytes([len(blobs) + 1]) * nbytes + b"\0" * (padded - nbytes))
        offset += padded
    out += b"\0" * (-len(out) % alignment)
    return out + b"".join(blobs)


def write(tmp_path: Path, data: bytes, name: str = "tiny.Q8_0.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_valid_file_parses_fully(tmp_path: Path) -> None:
    data = make_gguf()
    header = read_header(write(tmp_path, data))
    assert header.version == 3 and header.alignment == 32 and len(header.tensors) == 6
    assert header.data_offset % 32 == 0 and header.data_end == len(data) == header.file_size
    assert header.metadata["tokenizer.ggml.tokens"].count == 100
    assert header.metadata["tokenizer.ggml.tokens"].values is None  # long arrays are skipped, not kept
    nested = header.metadata["general.nested"].values
    assert nested[0].values == [-1, 2] and nested[1].values == ["a", "b"]
    assert header.metadata["general.big"].values == [2**40] and header.metadata["general.signed"].values == [-3]
    assert header.metadata["llama.rope.freq_base"] == 10000.0 and header.metadata["tokenizer.ggml.add_bos_token"]


def test_version_2_and_custom_alignment(tmp_path: Path) -> None:
    data = make_gguf(version=2, alignment=64)
    header = read_header(write(tmp_path, data))
    assert header.version == 2 and header.alignment == 64 and header.data_offset % 64 == 0
    assert header.data_end == len(data)


def test_info_reports_shape_quant_and_template(tmp_path: Path) -> None:
    info = gguf_info(write(tmp_path, make_gguf(chat_template=TOOL_TEMPLATE)))
    assert info["architecture"] == "llama" and info["quant"] == "Q8_0" and info["context_length"] == 512
    assert info["parameters"] == 64 * 100 + 64 + 2 * (64 * 64 + 64 * 32)
    assert (info["n_layer"], info["n_embd"], info["n_head"], info["n_head_kv"], info["head_dim_k"]) == (2, 64, 4, 2, 16)
    assert info["template_supports_tools"] is True and info["notes"] == []


def test_hermes_file_without_tool_template_gets_a_note(tmp_path: Path) -> None:
    info = gguf_info(write(tmp_path, make_gguf(chat_template=PLAIN_TEMPLATE)))
    assert info["template_supports_tools"] is False
    assert len(info["notes"]) == 1 and "prompts/" in info["notes"][0] and "default chat template" in info["notes"][0]
    info = gguf_info(write(tmp_path, make_gguf(chat_template=None), "other.gguf"))
    assert info["chat_template"] is None and "no chat template" in info["notes"][0]


@pytest.mark.parametrize("cut", [10, 30, 200, -1, -5000])
def test_truncated_file_is_one_line_user_error(tmp_path: Path, cut: int) -> None:
    data = make_gguf()
    path = write(tmp_path, data[:cut])
    with pytest.raises(UserError) as info:
        check_gguf(path)
    message = str(info.value)
    assert "truncated" in message and "\n" not in message and info.value.exit_code == 2


def test_random_bytes_and_bad_headers(tmp_path: Path) -> None:
    cases = {
        "random.gguf": (bytes(range(256)) * 40, "not a GGUF"),
        "empty.gguf": (b"", "not a GGUF"),
        "v1.gguf": (struct.pack("<4sIQQ", b"GGUF", 1, 0, 0), "unsupported GGUF version 1"),
        "huge.gguf": (struct.pack("<4sIQQ", b"GGUF", 3, 2**40, 2**40) + b"\0" * 64, "corrupt header"),
        "badtype.gguf": (struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + _string("k") + struct.pack("<I", 99), "value type"),
        "bigstring.gguf": (struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", 2**50), "past the end"),
    }
    for name, (data, expected) in cases.items():
        with pytest.raises(UserError, match=expected):
            check_gguf(write(tmp_path, data, name))
    with pytest.raises(UserError, match="duplicate tensor"):
        check_gguf(write(tmp_path, make_gguf(tensors=[("a", (32,), 0), ("a", (32,), 0)]), "dup.gguf"))
    with pytest.raises(UserError, match="not a multiple of 32"):
        check_gguf(write(tmp_path, make_gguf(tensors=[("a", (33,), 8)]), "rows.gguf"))
    with pytest.raises(UserError, match="power of two"):
        check_gguf(write(tmp_path, make_gguf(metadata={"general.alignment": 48}), "align.gguf"))
    with pytest.raises(UserError, match="cannot read"):
        check_gguf(tmp_path / "missing.gguf")


@pytest.mark.real_model
def test_embedded_model_header_and_info(embedded_model_path: Path) -> None:
    header = read_header(embedded_model_path)
    assert header.data_end == header.file_size and len(header.tensors) > 100
    info = gguf_info(embedded_model_path)
    assert info["architecture"] == "llama" and info["quant"] == "Q4_1" and info["context_length"] == 8192
    assert 130e6 < info["parameters"] < 140e6  # SmolLM2-135M
    assert info["n_layer"] == 30 and info["n_head_kv"] == 3 and info["n_vocab"] == 49152
    assert info["chat_template"] and "<|im_start|>" in info["chat_template"]
    assert info["template_supports_tools"] is False and info["notes"] == []  # not a Hermes GGUF
