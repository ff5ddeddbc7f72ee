"""File tools confined to the workspace: `read_file`, `list_dir`, `write_file`.

Paths go through `tools/paths.py`, so nothing outside the workspace is read, listed or written.
`read_file` returns at most about `ctx.output_cap` characters of a UTF-8 text file and refuses
binary files and non-regular files (FIFOs, devices); `write_file` replaces a file atomically (a
temporary file in the same directory, then `os.replace`). Approval, timeouts and result capping are
the executor's job (`tools/execution.py`), not this module's.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import stat
import tempfile

from hermes_local.tools.paths import relative_name, resolve_in_workspace
from hermes_local.tools.registry import ToolContext, ToolFailure, ToolResult, tool

MAX_LIST_ENTRIES = 200
MAX_WRITE_BYTES = 5_000_000
_BINARY_PROBE = 8192


def _open_nofollow(path: os.PathLike, flags: int) -> int:
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        missing = f"{os.path.basename(path)!r} does not exist; call list_dir to see what exists."
        raise ToolFailure("not_found", missing) from exc
    except OSError as exc:  # ELOOP: the file became a symlink after the check
        raise ToolFailure("permission_denied", f"cannot open {os.path.basename(path)!r}: {exc.strerror}.") from exc


@tool
def read_file(path: str, ctx: ToolContext) -> ToolResult:
    """Read a text file in the workspace (long files are cut).

    Args:
        path: Path relative to the workspace, e.g. "notes.txt".
    """
    target = resolve_in_workspace(ctx, path, must_exist=True)
    name = relative_name(ctx, target)
    info = target.stat()
    if stat.S_ISDIR(info.st_mode):
        raise ToolFailure("invalid_arguments", f"{name!r} is a directory; call list_dir with this path instead.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailure("invalid_arguments", f"{name!r} is not a regular file; read_file only reads text files.")
    limit = max(200, ctx.output_cap - 200)  # characters, leaving room for the notice
    fd = _open_nofollow(target, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a swapped-in FIFO cannot block us
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolFailure("invalid_arguments", f"{name!r} is not a regular file; read_file only reads text files.")
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(limit * 4 + 1)  # enough bytes for `limit` characters; the file is never read whole
    complete = len(raw) <= limit * 4
    size = max(info.st_size, len(raw))
    if b"\x00" in raw[:_BINARY_PROBE]:
        raise ToolFailure(
            "invalid_arguments", f"{name!r} is a binary file ({size} bytes); read_file only reads text files."
        )
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=complete)
    except UnicodeDecodeError as exc:
        raise ToolFailure(
            "invalid_arguments", f"{name!r} is not UTF-8 text (bad byte at {exc.start}); read_file only reads text."
        ) from exc
    truncated = not complete or len(text) > limit
    if truncated:
        text = text[:limit] + f"\n[... file truncated: showing the first {limit} characters of {size} bytes ...]"
    summary = f"read_file {name}: {size} bytes" + (" (truncated)" if truncated else "")
    return ToolResult.success(text, summary)


@tool
def list_dir(ctx: ToolContext, path: str = ".") -> ToolResult:
    """List a workspace folder: name, type and size of each entry.

    Args:
        path: Folder relative to the workspace.
    """
    target = resolve_in_workspace(ctx, path, must_exist=True)
    name = relative_name(ctx, target)
    if not target.is_dir():
        raise ToolFailure("invalid_arguments", f"{name!r} is not a directory; call read_file to read a file.")
    entries = []
    with os.scandir(target) as it:
        items = sorted(it, key=lambda e: e.name)
    budget = max(500, ctx.output_cap - 300)  # keep the JSON under the output cap so it stays structured
    for entry in items[:MAX_LIST_ENTRIES]:
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            kind = "symlink"
        elif stat.S_ISDIR(info.st_mode):
            kind = "dir"
        elif stat.S_ISREG(info.st_mode):
            kind = "file"
        else:
            kind = "other"
        item = {"name": entry.name, "type": kind, "size": info.st_size if kind == "file" else None}
        budget -= len(json.dumps(item, ensure_ascii=False)) + 2
        if budget < 0:
            break
        entries.append(item)
    data: dict = {"path": name, "entries": entries}
    if len(entries) < len(items):
        data["note"] = f"showing the first {len(entries)} of {len(items)} entries; list a subfolder instead"
    return ToolResult.success(data, f"list_dir {name}: {len(items)} entries")


@tool(permission="write", repeatable=True)
def write_file(path: str, content: str, ctx: ToolContext) -> ToolResult:
    """Create or replace a text file in the workspace.

    Args:
        path: Path relative to the workspace.
        content: The full new text of the file.
    """
    # repeatable: writing the same content again is harmless, and it is needed when another write
    # changed the file in between, so identical calls are not de-duplicated.
    target = resolve_in_workspace(ctx, path)
    name = relative_name(ctx, target)
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolFailure("invalid_arguments", f"content is {len(data)} bytes; write at most {MAX_WRITE_BYTES}.")
    if target.is_dir() or name == ".":
        raise ToolFailure("invalid_arguments", f"{name!r} is a directory; give a file path inside it.")
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise ToolFailure("invalid_arguments", f"{relative_name(ctx, parent)!r} is a file, not a folder.")
    parent.mkdir(parents=True, exist_ok=True)
    if parent.resolve() != parent:  # a folder on the way became a symlink after the check
        raise ToolFailure("permission_denied", f"path {path!r} leads outside the workspace.")
    existed = os.path.lexists(target)
    mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else None
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    verb = "replaced" if existed else "created"
    return ToolResult.success(
        {"path": name, "bytes": len(data), "created": not existed}, f"write_file {verb} {name} ({len(data)} bytes)"
    )
