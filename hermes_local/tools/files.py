"""File tools confined to the workspace: `read_file`, `list_dir`, `write_file`.

Every access goes through `tools/confined.py` (walked and opened relative to directory fds, no
symlink or `..` leads out, no re-walk after the check), so nothing outside the workspace is read,
listed or written. `read_file` returns at most about `ctx.output_cap` characters of a UTF-8 text
file and refuses binary files and non-regular files (FIFOs, devices); `write_file` replaces a file
atomically (a temporary file in the same directory, then a rename by dir fd) and refuses
non-regular and hard-linked files. Approval, timeouts and result capping are the executor's job
(`tools/execution.py`), not this module's.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import stat

from hermes_local.tools.confined import Location, display, locate, open_leaf, write_atomically
from hermes_local.tools.registry import ToolContext, ToolFailure, ToolResult, tool

MAX_LIST_ENTRIES = 200
MAX_SCAN = 20_000  # entries read from one folder at most
MAX_WRITE_BYTES = 5_000_000
_BINARY_PROBE = 8192


def _must_exist(loc: Location) -> os.stat_result:
    info = loc.lstat()
    if info is None:
        raise ToolFailure(
            "not_found", f"{loc.name!r} does not exist in the workspace; call list_dir to see what exists."
        )
    return info


@tool
def read_file(path: str, ctx: ToolContext) -> ToolResult:
    """Read a text file in the workspace (long files are cut).

    Args:
        path: Path relative to the workspace, e.g. "notes.txt".
    """
    limit = max(200, ctx.output_cap - 200)  # characters, leaving room for the notice
    with locate(ctx, path) as loc:
        name = loc.name
        info = _must_exist(loc)
        if stat.S_ISDIR(info.st_mode):
            raise ToolFailure("invalid_arguments", f"{name!r} is a directory; call list_dir with this path instead.")
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure("invalid_arguments", f"{name!r} is not a regular file; read_file only reads text files.")
        fd = open_leaf(loc, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a swapped-in FIFO cannot block us
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure("invalid_arguments", f"{name!r} is not a regular file; read_file only reads text files.")
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


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


@tool
def list_dir(ctx: ToolContext, path: str = ".") -> ToolResult:
    """List a workspace folder: name, type and size of each entry.

    Args:
        path: Folder relative to the workspace.
    """
    with locate(ctx, path) as loc:
        name = loc.name
        if not stat.S_ISDIR(_must_exist(loc).st_mode):
            raise ToolFailure("invalid_arguments", f"{name!r} is not a directory; call read_file to read a file.")
        fd = open_leaf(loc, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        with os.scandir(fd) as it:  # a folder of millions of entries is read only up to MAX_SCAN
            items = sorted(itertools.islice(it, MAX_SCAN + 1), key=lambda e: os.fsencode(e.name))
        huge = len(items) > MAX_SCAN
        items = items[:MAX_SCAN]
        budget = max(500, ctx.output_cap - 300)  # keep the JSON under the output cap so it stays structured
        entries = []
        for entry in items[:MAX_LIST_ENTRIES]:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # removed while listing
                continue
            kind = _kind(info.st_mode)
            item = {"name": display(entry.name), "type": kind, "size": info.st_size if kind == "file" else None}
            if item["name"] != entry.name:
                item["note"] = "name is not valid UTF-8; shown with \\x escapes, it cannot be opened by this name"
            budget -= len(json.dumps(item, ensure_ascii=False)) + 2
            if budget < 0:
                break
            entries.append(item)
    finally:
        os.close(fd)
    data: dict = {"path": name, "entries": entries}
    if huge:
        data["note"] = f"the folder has more than {MAX_SCAN} entries; showing {len(entries)} of them (not in order)"
    elif len(entries) < len(items):
        data["note"] = f"showing the first {len(entries)} of {len(items)} entries; list a subfolder instead"
    count = f"more than {MAX_SCAN}" if huge else str(len(items))
    return ToolResult.success(data, f"list_dir {name}: {count} entries")


@tool(permission="write", repeatable=True)
def write_file(path: str, content: str, ctx: ToolContext) -> ToolResult:
    """Create or replace a text file in the workspace.

    Args:
        path: Path relative to the workspace.
        content: The full new text of the file.
    """
    # repeatable: writing the same content again is harmless, and it is needed when another write
    # changed the file in between, so identical calls are not de-duplicated.
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure(
            "invalid_arguments", f"content has an invalid character at {exc.start} (a lone surrogate); send valid text."
        ) from exc
    if len(data) > MAX_WRITE_BYTES:
        raise ToolFailure("invalid_arguments", f"content is {len(data)} bytes; write at most {MAX_WRITE_BYTES}.")
    with locate(ctx, path, create_parents=True) as loc:
        name = loc.name
        existed = write_atomically(loc, data)
    verb = "replaced" if existed else "created"
    return ToolResult.success(
        {"path": name, "bytes": len(data), "created": not existed}, f"write_file {verb} {name} ({len(data)} bytes)"
    )
