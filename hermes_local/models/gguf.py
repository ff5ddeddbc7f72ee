"""GGUF files read in pure Python: full header parse, truncation check, model facts.

`read_header` walks the whole GGUF header (magic, version 2/3, every metadata key/value including
nested arrays, every tensor info, `general.alignment`, the data offset) and proves the file holds all
tensor data, so a damaged download becomes a one-line `GGUFError` instead of an abort inside llama.cpp.
`gguf_info` summarises a header for `models info` and `doctor` (the memory estimate built on
`model_shape` lives in `footprint.py`).

Does not load weights, run inference or import llama_cpp. Tensor types this table does not know (newer
ggml) are accepted without a size check rather than rejected.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from hermes_local.errors import GGUFError

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
MAX_ARRAY_DEPTH = 8
KEEP_ARRAY_VALUES = 64  # arrays longer than this are parsed (to find the offsets) but not kept

# GGUF metadata value types: id -> (struct format, size). 8 = string, 9 = array.
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
    6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8),
}  # fmt: skip
_STRING, _ARRAY = 8, 9

# ggml tensor types: id -> (name, elements per block, bytes per block); checked against libggml 0.25.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18), 42: ("Q2_0", 64, 18),
}  # fmt: skip
_REMOVED_TYPES = {4, 5, 31, 32, 33, 36, 37, 38}

# llama.cpp `general.file_type` (LLAMA_FTYPE_MOSTLY_*) -> the quant name people use in file names.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}  # fmt: skip

_TOOL_MARKERS = re.compile(r"\btools\b|tool_call|tool_use|<tools>")


@dataclass
class GGUFArray:
    """A metadata array: its element type, length, and the values when short enough to keep."""

    item_type: int
    count: int
    values: list[Any] | None = None


@dataclass
class TensorInfo:
    """One tensor of a GGUF: name, shape, type and data size."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the data section
    n_elements: int
    n_bytes: int | None  # None for a tensor type this module does not know


@dataclass
class GGUFHeader:
    """A parsed GGUF header: metadata, tensors and where the data starts."""

    path: Path
    version: int
    file_size: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    alignment: int
    data_offset: int  # absolute offset of the tensor data section
    data_end: int  # absolute offset just past the last tensor's data
    unknown_types: set[int] = field(default_factory=set)

    @property
    def architecture(self) -> str | None:
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else None

    def arch_value(self, key: str) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}")


class _Reader:
    """Sequential little-endian reads over a file, in large chunks; every short read is a truncation."""

    CHUNK = 1 << 20

    def __init__(self, fh: BinaryIO, size: int, describe: str) -> None:
        self.fh, self.size, self.describe = fh, size, describe
        self.buf = b""
        self.pos = 0  # position inside buf
        self.base = 0  # absolute file offset of buf[0]

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def fail(self, reason: str) -> GGUFError:
        return GGUFError(f"{self.describe} {reason}; re-download it or pass another .gguf file")

    def _fill(self, n: int) -> None:
        if len(self.buf) - self.pos >= n:
            return
        if self.offset + n > self.size:
            raise self.fail(f"is truncated (header needs byte {self.offset + n:,}, file has {self.size:,})")
        rest = self.buf[self.pos :]
        more = self.fh.read(max(n - len(rest), self.CHUNK))
        self.base, self.buf, self.pos = self.offset, rest + more, 0
        if len(self.buf) < n:
            raise self.fail("is truncated (the file ended while reading its header)")

    def take(self, n: int) -> bytes:
        self._fill(n)
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if self.offset + n > self.size:
            raise self.fail(f"is truncated (header needs byte {self.offset + n:,}, file has {self.size:,})")
        if len(self.buf) - self.pos >= n:
            self.pos += n
        else:
            target = self.offset + n
            self.fh.seek(target)
            self.base, self.buf, self.pos = target, b"", 0

    def unpack(self, fmt: str, size: int) -> Any:
        self._fill(size)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def u32(self) -> int:
        return self.unpack("<I", 4)

    def u64(self) -> int:
        return self.unpack("<Q", 8)

    def string_length(self, what: str) -> int:
        n = self.u64()
        if n > self.size - self.offset:
            raise self.fail(f"is truncated or corrupt ({what} claims {n:,} bytes past the end of the file)")
        return n

    def string(self, what: str) -> str:
        return self.take(self.string_length(what)).decode("utf-8", errors="replace")


def _read_value(r: _Reader, vtype: int, key: str, depth: int = 0) -> Any:
    if vtype in _SCALARS:
        fmt, size = _SCALARS[vtype]
        return r.unpack(fmt, size)
    if vtype == _STRING:
        return r.string(f"metadata value {key!r}")
    if vtype != _ARRAY:
        raise r.fail(f"has a corrupt header (metadata {key!r} has unknown value type {vtype})")
    if depth >= MAX_ARRAY_DEPTH:
        raise r.fail(f"has a corrupt header (metadata {key!r} nests arrays too deeply)")
    item_type, count = r.u32(), r.u64()
    smallest = _SCALARS[item_type][1] if item_type in _SCALARS else 8 if item_type == _STRING else 12
    if item_type not in _SCALARS and item_type not in (_STRING, _ARRAY):
        raise r.fail(f"has a corrupt header (array {key!r} has unknown element type {item_type})")
    if count * smallest > r.size - r.offset:
        raise r.fail(f"is truncated or corrupt (array {key!r} claims {count:,} elements past the end of the file)")
    keep = count <= KEEP_ARRAY_VALUES
    if item_type in _SCALARS and not keep:
        r.skip(count * smallest)
        return GGUFArray(item_type, count)
    values = []
    for _ in range(count):
        if item_type == _STRING and not keep:
            r.skip(r.string_length(f"an element of {key!r}"))
        else:
            values.append(_read_value(r, item_type, key, depth + 1))
    return GGUFArray(item_type, count, values if keep else None)


def read_header(path: str | Path) -> GGUFHeader:
    """Parse the whole GGUF header of `path` and check that the tensor data fits in the file."""
    path = Path(path)
    describe = f"model file {path}"
    try:
        size = path.stat().st_size
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise GGUFError(f"cannot read {describe}: {exc.strerror or exc}") from exc
    with fh:
        r = _Reader(fh, size, describe)
        if size < 4 or fh.read(4) != GGUF_MAGIC:
            raise GGUFError(f"{path} is not a GGUF model file (bad magic); download a .gguf model")
        r.base = 4
        version = r.u32()
        if version not in (2, 3):
            raise r.fail(f"has unsupported GGUF version {version} (hermes-local reads versions 2 and 3)")
        n_tensors, n_kv = r.u64(), r.u64()
        if n_kv * 13 > size or n_tensors * 32 > size:
            raise r.fail(f"has a corrupt header ({n_tensors:,} tensors / {n_kv:,} metadata keys cannot fit)")
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = r.string("a metadata key")
            vtype = r.u32()
            if key in metadata:
                raise r.fail(f"has a corrupt header (duplicate metadata key {key!r})")
            metadata[key] = _read_value(r, vtype, key)
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise r.fail(f"has a corrupt header (general.alignment {alignment!r} is not a power of two)")
        tensors: list = []
        names: set[str] = set()
        unknown: set[int] = set()
        for _ in range(n_tensors):
            tensors.append(_read_tensor_info(r, names, unknown, alignment))
        header_end = r.offset
        data_offset = -(-header_end // alignment) * alignment
    data_end = header_end
    for t in tensors:  # a tensor of unknown type counts with size 0: at least its start must exist
        data_end = max(data_end, data_offset + t.offset + (t.n_bytes or 0))
    if data_end > size:
        missing = data_end - size
        raise GGUFError(
            f"{describe} is truncated: its tensors need {data_end:,} bytes but the file has {size:,} "
            f"({missing:,} missing); the download was interrupted, re-download it"
        )
    return GGUFHeader(path, version, size, metadata, tensors, alignment, data_offset, data_end, unknown)


def _read_tensor_info(r: _Reader, names: set[str], unknown: set[int], alignment: int) -> TensorInfo:
    name = r.string("a tensor name")
    if name in names:
        raise r.fail(f"has a corrupt header (duplicate tensor {name!r})")
    names.add(name)
    n_dims = r.u32()
    if n_dims > MAX_DIMS:
        raise r.fail(f"has a corrupt header (tensor {name!r} has {n_dims} dimensions)")
    shape = tuple(r.u64() for _ in range(n_dims))
    if any(d >= 1 << 62 for d in shape):
        raise r.fail(f"has a corrupt header (tensor {name!r} has an impossible shape {shape})")
    ggml_type, offset = r.u32(), r.u64()
    n_elements = 1
    for d in shape:
        n_elements *= d
    if ggml_type in _REMOVED_TYPES:
        raise r.fail(f"uses tensor type {ggml_type} that llama.cpp removed (tensor {name!r}); get a newer .gguf")
    n_bytes = None
    if ggml_type in GGML_TYPES:
        _, block, type_size = GGML_TYPES[ggml_type]
        if shape and shape[0] % block:
            raise r.fail(f"has a corrupt header (tensor {name!r} row of {shape[0]} is not a multiple of {block})")
        n_bytes = n_elements // block * type_size
    else:
        unknown.add(ggml_type)
    if offset % alignment:
        raise r.fail(f"has a corrupt header (tensor {name!r} offset {offset} is not {alignment}-byte aligned)")
    return TensorInfo(name, shape, ggml_type, offset, n_elements, n_bytes)


def check_gguf(path: str | Path) -> None:
    """Refuse anything llama.cpp should not be handed: not GGUF, wrong version, corrupt or truncated."""
    read_header(path)


def _as_int(value: Any) -> int | None:
    if isinstance(value, GGUFArray):  # per-layer values (e.g. head_count_kv): use the largest
        nums = [v for v in (value.values or []) if isinstance(v, int)]
        return max(nums) if nums else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _quant_name(header: GGUFHeader) -> str:
    file_type = _as_int(header.metadata.get("general.file_type"))
    if file_type is not None and file_type in FILE_TYPES:
        return FILE_TYPES[file_type]
    by_type: dict[int, int] = {}
    for t in header.tensors:
        by_type[t.ggml_type] = by_type.get(t.ggml_type, 0) + (t.n_bytes or 0)
    if not by_type:
        return "unknown"
    top = max(by_type, key=lambda k: by_type[k])
    return GGML_TYPES.get(top, (f"type{top}", 0, 0))[0] + " (guessed from tensors)"


def human_count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def human_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def model_shape(header: GGUFHeader) -> dict[str, int | None]:
    """Layer count, widths and attention heads from the architecture's metadata."""
    n_embd = _as_int(header.arch_value("embedding_length"))
    n_head = _as_int(header.arch_value("attention.head_count"))
    n_head_kv = _as_int(header.arch_value("attention.head_count_kv")) or n_head
    head_dim = n_embd // n_head if n_embd and n_head else None
    key_length = _as_int(header.arch_value("attention.key_length")) or head_dim
    value_length = _as_int(header.arch_value("attention.value_length")) or head_dim
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    return {
        "n_layer": _as_int(header.arch_value("block_count")),
        "n_embd": n_embd,
        "n_head": n_head,
        "n_head_kv": n_head_kv,
        "head_dim_k": key_length,
        "head_dim_v": value_length,
        "n_vocab": tokens.count if isinstance(tokens, GGUFArray) else None,
    }


def gguf_info(path: str | Path | GGUFHeader) -> dict[str, Any]:
    """What `models info` shows: architecture, size, quant, trained context, chat template and tool support."""
    header = path if isinstance(path, GGUFHeader) else read_header(path)
    template = header.metadata.get("tokenizer.chat_template")
    template = template if isinstance(template, str) else None
    supports_tools = bool(template and _TOOL_MARKERS.search(template))
    name = header.metadata.get("general.name")
    notes = []
    looks_hermes = "hermes" in f"{name or ''} {header.path.name}".lower()
    if looks_hermes and not supports_tools:
        notes.append(
            "this Hermes GGUF carries "
            + ("no chat template" if template is None else "only a default chat template without tool use")
            + "; that is fine: hermes-local renders its own ChatML/tool prompts from prompts/ and ignores it"
        )
    if header.unknown_types:
        notes.append(f"tensor types {sorted(header.unknown_types)} are newer than hermes-local; sizes not checked")
    return {
        "path": str(header.path),
        "name": name if isinstance(name, str) else None,
        "architecture": header.architecture,
        "parameters": sum(t.n_elements for t in header.tensors),
        "quant": _quant_name(header),
        "context_length": _as_int(header.arch_value("context_length")),
        "file_size": header.file_size,
        "tensor_bytes": sum(t.n_bytes or 0 for t in header.tensors),
        "n_tensors": len(header.tensors),
        "gguf_version": header.version,
        **model_shape(header),
        "chat_template": template,
        "template_supports_tools": supports_tools,
        "notes": notes,
    }
