"""The persistent prompt cache: KV state of prompt prefixes saved under `$HERMES_LOCAL_HOME/cache/kv/`.

A file holds one prefix: a header line (format version, the identity it was made under, the prefix
tokens, a SHA-256 of the payload) and the payload, the opaque sequence state llama.cpp returned.
The identity is the model file (resolved path, size, mtime), the settings that change the KV
(n_ctx, n_batch, flash-attn, KV types) and the llama.cpp version; a file made under another
identity, with a bad checksum or an unreadable header is ignored with a one-line debug note.
Writes are atomic (temporary file, then rename); the folder is capped in bytes and the least
recently used files are evicted first (a load refreshes a file's mtime).

`restore_or_save_prefix(llm, prompt)` is called by `LlamaCppLLM._prefill`: it sets or gets the
sequence state through the llama_cpp module the LLM holds (this module never imports llama_cpp).
`hermes-local cache clear` (cli/cache.py) empties the folder.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_local.config import home_dir

FORMAT = 1
MAGIC = b"HERMES-KV\n"
DEFAULT_CAP_BYTES = 2 * 1024**3
log = logging.getLogger("hermes_local.engines.inprocess.kvcache")


def cache_dir() -> Path:
    return home_dir() / "cache" / "kv"


def model_identity(path: Path, **settings: Any) -> dict[str, Any]:
    """What must match for a saved KV state to be valid: the model file and the KV-shaping settings."""
    st = path.resolve().stat()
    return {"model": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, **settings}


@dataclass
class Entry:
    """One cache file's header."""

    path: Path
    tokens: list[int]
    sha256: str
    offset: int  # where the payload starts


class PromptCache:
    """Saved prefix states for one model identity."""

    def __init__(self, identity: dict[str, Any], directory: Path | None = None, cap_bytes: int = DEFAULT_CAP_BYTES):
        self.identity = identity
        self.directory = directory or cache_dir()
        self.cap_bytes = cap_bytes
        self._identity_json = json.dumps(identity, sort_keys=True)

    def _name(self, tokens: Sequence[int]) -> str:
        h = hashlib.sha256(self._identity_json.encode())
        h.update(json.dumps(list(tokens)).encode())
        return h.hexdigest()[:40] + ".kv"

    def _header(self, path: Path) -> Entry | None:
        try:
            with path.open("rb") as fh:
                if fh.read(len(MAGIC)) != MAGIC:
                    raise ValueError("not a hermes-local KV file")
                head = json.loads(fh.readline(16 * 1024 * 1024))
                offset = fh.tell()
            if head.get("format") != FORMAT:
                raise ValueError(f"format {head.get('format')} (expected {FORMAT})")
            if head.get("identity") != self.identity:
                return None  # another model or other KV settings: not ours, not an error
            return Entry(path, [int(t) for t in head["tokens"]], str(head["sha256"]), offset)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("prompt cache: ignoring %s (%s)", path.name, exc)
            return None

    def lookup(self, prompt: Sequence[int]) -> Entry | None:
        """The saved prefix of `prompt` with the most tokens (shorter than the prompt), if any."""
        best: Entry | None = None
        if not self.directory.is_dir():
            return None
        for path in self.directory.glob("*.kv"):
            entry = self._header(path)
            if entry is None or not (0 < len(entry.tokens) < len(prompt)):
                continue
            if (best is None or len(entry.tokens) > len(best.tokens)) and list(prompt[: len(entry.tokens)]) == (
                entry.tokens
            ):
                best = entry
        return best

    def has(self, tokens: Sequence[int]) -> bool:
        return (self.directory / self._name(tokens)).is_file()

    def load(self, entry: Entry) -> bytes | None:
        """The payload, or None (with a debug note) when the file is damaged."""
        try:
            with entry.path.open("rb") as fh:
                fh.seek(entry.offset)
                payload = fh.read()
        except OSError as exc:
            log.debug("prompt cache: cannot read %s (%s)", entry.path.name, exc)
            return None
        if hashlib.sha256(payload).hexdigest() != entry.sha256:
            log.debug("prompt cache: ignoring %s (checksum mismatch: damaged file)", entry.path.name)
            return None
        try:
            os.utime(entry.path)  # most recently used
        except OSError:
            pass
        return payload

    def store(self, tokens: Sequence[int], payload: bytes) -> Path | None:
        """Write one prefix state atomically, then evict least recently used files past the cap."""
        if len(payload) + 1024 > self.cap_bytes:
            log.debug("prompt cache: state of %d bytes exceeds the cap; not saved", len(payload))
            return None
        head = {
            "format": FORMAT,
            "identity": self.identity,
            "tokens": list(tokens),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        target = self.directory / self._name(tokens)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(MAGIC + json.dumps(head).encode() + b"\n")
                    fh.write(payload)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            log.debug("prompt cache: cannot write %s (%s)", target, exc)
            return None
        self.evict(keep=target)
        return target

    def evict(self, keep: Path | None = None) -> int:
        """Delete least recently used files until the folder fits the cap; returns files deleted."""
        files = []
        for path in self.directory.glob("*.kv"):
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((st.st_mtime_ns, st.st_size, path))
        total = sum(size for _, size, _ in files)
        deleted = 0
        for _, size, path in sorted(files):
            if total <= self.cap_bytes:
                break
            if path == keep:
                continue
            path.unlink(missing_ok=True)
            total -= size
            deleted += 1
        return deleted


def fixed_prefix(llm: Any, prompt: list[int]) -> int:
    """Length of the prompt's first message (through its end-of-turn token): the system prompt and
    tool schemas, byte-stable across runs. 0 when the prompt has no such token."""
    end = llm.special_token_id("<|im_end|>")
    if end is None or end not in prompt:
        return 0
    return prompt.index(end) + 1


def restore_or_save_prefix(llm: Any, prompt: list[int]) -> int:
    """Persistent prompt cache: load a saved prefix state into the KV, or save the fixed prefix.
    Returns the prompt tokens evaluated here (saving evaluates the prefix first)."""
    cache, llama, lib = llm.prompt_cache, llm._llama, llm._llama_cpp
    if cache is None:
        return 0
    fixed = fixed_prefix(llm, prompt)
    if fixed == 0 or fixed >= len(prompt):
        return 0
    if llama.n_tokens >= fixed and llama._input_ids[:fixed].tolist() == prompt[:fixed]:
        return 0  # already in this process's KV
    entry = cache.lookup(prompt)
    if entry is not None:
        payload = cache.load(entry)
        if payload is not None:
            llama.reset()
            lib.llama_memory_clear(lib.llama_get_memory(llama.ctx), True)
            buf = (ctypes.c_uint8 * len(payload)).from_buffer_copy(payload)
            if lib.llama_state_seq_set_data(llama.ctx, buf, len(payload), 0) == len(payload):
                n = len(entry.tokens)
                llama.input_ids[:n] = entry.tokens
                llama.n_tokens = n
                return 0
            log.debug("prompt cache: llama.cpp rejected %s; ignoring it", entry.path.name)
            lib.llama_memory_clear(lib.llama_get_memory(llama.ctx), True)
        llama.reset()
    if cache.has(prompt[:fixed]):
        return 0
    llama.reset()
    lib.llama_memory_clear(lib.llama_get_memory(llama.ctx), True)
    llama.eval(prompt[:fixed])
    size = lib.llama_state_seq_get_size(llama.ctx, 0)
    buf = (ctypes.c_uint8 * size)()
    written = lib.llama_state_seq_get_data(llama.ctx, buf, size, 0)
    cache.store(prompt[:fixed], ctypes.string_at(buf, written))
    return fixed


def clear(directory: Path | None = None) -> tuple[int, int]:
    """Delete every cache file (and leftover temporary files); returns (files, bytes) removed."""
    directory = directory or cache_dir()
    files = n_bytes = 0
    if directory.is_dir():
        for path in [*directory.glob("*.kv"), *directory.glob(".tmp-*.part")]:
            try:
                n_bytes += path.stat().st_size
                path.unlink()
                files += 1
            except OSError:
                continue
    return files, n_bytes
