"""File tools confined to the workspace: `read_file`, `list_dir`, `write_file`.

Paths go through `tools/paths.py`, so nothing outside the workspace is read, listed or written.
`read_file` returns a page of lines (`offset`, `limit`; at most about `ctx.output_cap` characters)
of a UTF-8 text file, says how to read on when the page is cut, never holds more than a page in
memory, and refuses binary files and non-regular files (FIFOs, devices); `write_file` replaces a file atomically (a
temporary file in the same directory, then `os.replace`). Approval, timeouts and result capping are
the executor's job (`tools/execution.py`), not this module's.
"""

from __future__ import annotations

import codecs
import contextlib
import io
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
def read_file(path: str, ctx: ToolContext, offset: int = 1, limit: int | None = None) -> ToolResult:
    """Read a workspace text file by lines (a cut page says how to read on).

    Args:
        path: Path relative to the workspace, e.g. "notes.txt".
        offset: First line to read (1 = the start).
        limit: Most lines to return (default: as many as fit).
    """
    if offset < 1 or (limit is not None and limit < 1):
        raise ToolFailure("invalid_arguments", "offset and limit count lines from 1; give offset >= 1 and limit >= 1.")
    target = resolve_in_workspace(ctx, path, must_exist=True)
    name = relative_name(ctx, target)
    info = target.stat()
    if stat.S_ISDIR(info.st_mode):
        raise ToolFailure("invalid_arguments", f"{name!r} is a directory; call list_dir with this path instead.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailure("invalid_arguments", f"{name!r} is not a regular file; read_file only reads text files.")
    budget = max(200, ctx.output_cap - 300)  # characters, leaving room for the notice
    fd = _open_nofollow(target, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a swapped-in FIFO cannot block us
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolFailure("invalid_arguments", f"{name!r} is not a regular file; read_file only reads text files.")
    with os.fdopen(fd, "rb") as fh:
        size = max(info.st_size, os.fstat(fh.fileno()).st_size)
        if b"\x00" in fh.read(_BINARY_PROBE):
            raise ToolFailure(
                "invalid_arguments", f"{name!r} is a binary file ({size} bytes); read_file only reads text files."
            )
        fh.seek(0)
        page = _read_page(fh, name, offset, limit, budget)
    return _page_result(name, size, offset, *page)


def _read_page(
    fh: io.BufferedReader, name: str, offset: int, limit: int | None, budget: int
) -> tuple[str, int, int, bool]:
    """(text of lines offset.., lines shown, total lines, whether the last shown line was cut)."""
    line_no = 0
    while line_no < offset - 1:  # skip whole lines without holding them
        chunk = fh.readline(1 << 16)
        if not chunk:
            break
        if chunk.endswith(b"\n") or not fh.peek(1):  # a last line without a newline counts too
            line_no += 1
    shown: list[str] = []
    used, cut = 0, False
    while limit is None or len(shown) < limit:
        raw = fh.readline(budget * 4 + 1)
        if not raw:
            break
        try:
            partial = len(raw) > budget * 4 and not raw.endswith(b"\n")  # a line longer than a page
            text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=not partial)
        except UnicodeDecodeError as exc:
            raise ToolFailure(
                "invalid_arguments", f"{name!r} is not UTF-8 text (bad byte in line {line_no + len(shown) + 1})."
            ) from exc
        if used + len(text) > budget:
            if shown:
                fh.seek(-len(raw), os.SEEK_CUR)  # the line belongs to the next page
                break
            text, cut = text[:budget] + "\n", True  # one line longer than a page: show its start
            while raw and not raw.endswith(b"\n"):
                raw = fh.readline(1 << 16)
        shown.append(text)
        used += len(text)
        if cut:
            break
    rest, tail = 0, b""
    for chunk in iter(lambda: fh.read(1 << 20), b""):  # count the remaining lines, a chunk at a time
        rest, tail = rest + chunk.count(b"\n"), chunk
    if tail and not tail.endswith(b"\n"):
        rest += 1
    return "".join(shown), len(shown), line_no + len(shown) + rest, cut


def _page_result(name: str, size: int, offset: int, text: str, count: int, total: int, cut: bool) -> ToolResult:
    last = offset + count - 1
    if count == 0:
        if offset == 1:
            return ToolResult.success("", f"read_file {name}: empty file")
        raise ToolFailure("invalid_arguments", f"{name!r} has {total} lines; offset {offset} is past the end.")
    notes = []
    if cut:
        notes.append(f"line {last} is longer than one page and was cut")
    if last < total:
        notes.append(f"showing lines {offset}-{last} of {total}; call read_file with offset={last + 1} to read on")
    if notes:
        text = text + f"[... {'; '.join(notes)} ...]"
    elif offset > 1:
        text = text + f"[... lines {offset}-{last} of {total}: end of file ...]"
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    summary = f"read_file {name}: lines {offset}-{last} of {total} ({size} bytes)"
    if last < total:
        summary += f", next offset={last + 1}"
    return ToolResult.success(text, summary + (f"; {first_line[:60]}" if first_line else ""))


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
