"""File tools confined to the workspace: `read_file`, `list_dir`, `write_file`.

Every access goes through `tools/effects/confined.py` (walked and opened relative to directory fds, no
symlink or `..` leads out, no re-walk after the check), so nothing outside the workspace is read,
listed or written. `read_file` returns a page of lines (`offset`, `limit`; at most about
`ctx.output_cap` characters) of a UTF-8 text file, says how to read on when the page is cut, never
holds more than a page in memory, and refuses binary files and non-regular files (FIFOs, devices);
`write_file` replaces a file atomically (a temporary file in the same directory, then a rename by
dir fd) and refuses non-regular and hard-linked files; `current_bytes` reads a file whole for the code that
shows what a write would change. Their traits (the `files` toolset, the goal words that call for each: a file named
to read from, a folder to list, a file to write; what a write does to its file) are declared here, on each `@tool`.
Approval, timeouts and result capping are the executor's job (`tools/execution.py`), not this module's.
"""

from __future__ import annotations

import codecs
import io
import itertools
import json
import os
import re
import stat
from typing import Any

from hermes_local.outcome import ToolResult
from hermes_local.tools.effects.confined import Location, display, locate, open_leaf, write_atomically
from hermes_local.tools.effects.dryrun import check_target
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool
from hermes_local.tools.traits import FILE_IN_GOAL, Cue, FileEffect, Toolset, Traits

MAX_LIST_ENTRIES = 200
MAX_SCAN = 20_000  # entries read from one folder at most
MAX_WRITE_BYTES = 5_000_000
_BINARY_PROBE = 8192
FILES = Toolset("files", "read, list and write files in the workspace")

# The goal words that call for these tools (lowercased goal, English and Chinese): a file named to read from
# (unless the goal brings its text along), a folder to list, a file to write into.
FILE_NAME = re.compile(FILE_IN_GOAL)
WRITE_VERB = re.compile(r"\b(write|save|create|put|store|export|append|record|copy|make)\b|写入|写进|保存|创建")
# A file name right after "into/to/as/called/named" (or a write verb) is where the result goes, not a source.
TARGET = re.compile(
    rf"(?:\b(?:into|to|as|called|named|onto|write|save|create)\s+|写入|写进|保存到|存到|保存)\s*"
    rf"(?:a\s+|the\s+|my\s+|file\s+)*({FILE_IN_GOAL})"
)
LIST = re.compile(
    r"\b(list|show|what'?s in|what is in|contents of|which|what)\b.*\b(files|folders?|director(?:y|ies)|workspace)\b|"
    r"\b(folders?|director(?:y|ies)|ls)\b|目录|文件夹|工作区"
)
READ = re.compile(r"\b(read|contents?|summari[sz]e|summary of|open|look at|check)\b|文件|读取|内容|笔记")
# A goal that brings its own text ("Summarise this: ...", text piped in on further lines) reads no file for it.
INLINE_TEXT = re.compile(r"\b(this|these|the following|below|text|it)\s*:\s*\S|\n\s*\S|(这段|以下)[^:：]*[:：]")


def source_files(goal: str) -> list[str]:
    """File names the goal reads from: every named file that is not where a result is written."""
    targets = {m.group(1) for m in TARGET.finditer(goal)} if WRITE_VERB.search(goal) else set()
    return [name for name in FILE_NAME.findall(goal) if name not in targets]


def _reads_a_file(goal: str) -> bool:
    return bool(source_files(goal)) or (bool(READ.search(goal)) and not INLINE_TEXT.search(goal))


INTO_FILE = re.compile(rf"\binto\s+(?:a\s+|the\s+|my\s+|file\s+)*{FILE_IN_GOAL}")  # "summarise x into y.md"


def _writes_a_file(goal: str) -> bool:
    named = bool(FILE_NAME.search(goal) or re.search(r"\bfile\b", goal))
    return (bool(WRITE_VERB.search(goal)) and named) or bool(INTO_FILE.search(goal))


def _written(arguments: dict[str, Any]) -> FileEffect:
    """`write_file`'s effect: the file at `path` replaced by `content`."""
    return FileEffect(str(arguments.get("path", "")), str(arguments.get("content", "")))


def _content_bytes(content: str) -> bytes:
    """`write_file`'s content as it would be written; refused when not valid text or too long."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure(
            "invalid_arguments", f"content has an invalid character at {exc.start} (a lone surrogate); send valid text."
        ) from exc
    if len(data) > MAX_WRITE_BYTES:
        raise ToolFailure("invalid_arguments", f"content is {len(data)} bytes; write at most {MAX_WRITE_BYTES}.")
    return data


def _dry_write(arguments: dict[str, Any], ctx: ToolContext) -> None:
    """What `write_file` would refuse, checked without writing (a plan-only run's proposal check)."""
    _content_bytes(str(arguments.get("content", "")))
    check_target(ctx, str(arguments.get("path", "")))


def _must_exist(loc: Location) -> os.stat_result:
    info = loc.lstat()
    if info is None:
        raise ToolFailure(
            "not_found", f"{loc.name!r} does not exist in the workspace; call list_dir to see what exists."
        )
    return info


@tool(
    traits=Traits(
        toolset=FILES,
        cues=(Cue(60, _reads_a_file),),
        call_hint="call read_file with the file's path",
        reads_path="path",
    )
)
def read_file(path: str, ctx: ToolContext, offset: int = 1, limit: int | None = None) -> ToolResult:
    """Read a workspace text file by lines (a cut page says how to read on).

    Args:
        path: Path relative to the workspace, e.g. "notes.txt".
        offset: First line to read (1 = the start).
        limit: Most lines to return (default: as many as fit).
    """
    if offset < 1 or (limit is not None and limit < 1):
        raise ToolFailure("invalid_arguments", "offset and limit count lines from 1; give offset >= 1 and limit >= 1.")
    budget = max(200, ctx.output_cap - 300)  # characters, leaving room for the notice
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
        size = info.st_size
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


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


@tool(traits=Traits(toolset=FILES, cues=(Cue(50, LIST.search),), lists_path="path"))
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


@tool(
    permission="write",
    repeatable=True,
    provenance="trusted",
    writes_path="path",
    traits=Traits(
        toolset=FILES,
        cues=(Cue(100, _writes_a_file),),
        call_hint="call write_file with the path and the full content",
        file_effect=_written,
        dry_run=_dry_write,
        checkpoints_itself=True,  # through effects/confined.py's write path
    ),
)
def write_file(path: str, content: str, ctx: ToolContext) -> ToolResult:
    """Create or replace a text file in the workspace.

    Args:
        path: Path relative to the workspace.
        content: The full new text of the file.
    """
    # repeatable: writing the same content again is harmless, and it is needed when another write
    # changed the file in between, so identical calls are not de-duplicated.
    data = _content_bytes(content)
    with locate(ctx, path, create_parents=True) as loc:
        name = loc.name
        existed = write_atomically(loc, data)
    verb = "replaced" if existed else "created"
    return ToolResult.success(
        {"path": name, "bytes": len(data), "created": not existed}, f"write_file {verb} {name} ({len(data)} bytes)"
    )


TOOLS: list[Tool] = [read_file, list_dir, write_file]  # the family's tools, in the registry's order


def current_bytes(ctx: ToolContext, path: str, limit: int = MAX_WRITE_BYTES) -> bytes | None:
    """A workspace file's content (its first `limit` + 1 bytes), None when it does not exist: read through the
    same confinement as the tools (for a plan-only run's diff and an exported session's changed files)."""
    with locate(ctx, path) as loc:
        info = loc.lstat()
        if info is None:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure("invalid_arguments", f"{loc.name!r} is not a regular file.")
        fd = open_leaf(loc, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit + 1)
