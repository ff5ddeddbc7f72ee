"""Workspace confinement by construction: every built-in file access is made relative to directory fds.

A path from the model is never handed to the kernel as a whole. `locate` opens the workspace root
once and walks the path one component at a time with `os.open(name, O_DIRECTORY | O_NOFOLLOW,
dir_fd=parent)`; a symlink on the way is read with `readlink(dir_fd=)` and followed by hand only when
its target stays inside the workspace (`..` can never climb above the root, absolute targets must
name the workspace). The result is an open fd of the final parent directory plus a leaf name, and
every operation (`open_for_read`, `open_dir`, `write_atomically`, `append_line`, mkdir, replace,
unlink) is done with `dir_fd=` on that fd and `O_NOFOLLOW` on the leaf. A concurrent process that
swaps a folder for a symlink therefore cannot redirect a read or write outside: there is no re-walk
of the path after the check.

The root is the run's pinned workspace fd when there is one (`ToolContext.pin`), so a workspace
swapped after the run was accepted is never followed. The agent's own state and code
(`sandbox/protect.py`: `$HERMES_LOCAL_HOME`, the interpreter, its venv and site-packages, the package)
are refused wherever they sit in the workspace, by name and by (device, inode) of each step.

Writes refuse non-regular files (FIFOs, devices, sockets, directories) and regular files with more
than one hard link (the other name may be outside the workspace). Reads refuse non-regular files
without blocking (`O_NONBLOCK`). Does not confine `run_shell` (a shell can go anywhere; see the
sandbox settings) and cannot stop a process that moves a directory we already hold open out of the
workspace (that needs write access to both places and is outside this threat model).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hermes_local.sandbox.protect import Protected, covering, protected
from hermes_local.tools.effects import checkpoints
from hermes_local.tools.registry import ToolContext, ToolFailure

MAX_SYMLINKS = 40
MAX_DEPTH = 64  # folders deep below the workspace; one fd is held per level while a path is walked
MAX_COMPONENTS = 1024  # names looked at for one path, symlink targets included
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC


def workspace_root(ctx: ToolContext) -> Path:
    """The workspace as a real path: the pinned one's, else resolved here (symlinks followed once)."""
    if ctx.pin is not None:
        return ctx.pin.path
    return Path(ctx.workspace).resolve(strict=False)


class Shield:
    """The agent's own state and code as seen from one workspace: by real path and by (device, inode)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"
        self.items = protected()
        self.ids: dict[tuple[int, int], Protected] = {}
        for item in self.items:
            with contextlib.suppress(OSError):
                info = os.stat(item.path)
                self.ids[(info.st_dev, info.st_ino)] = item

    def hit(self, names: list[str], info: os.stat_result | None) -> Protected | None:
        """The protected path that `root/names` is (or is inside), judged by name and by the file's identity."""
        if info is not None and (info.st_dev, info.st_ino) in self.ids:
            return self.ids[(info.st_dev, info.st_ino)]
        return covering(os.path.join(self.root, *names), self.items) if names else None


def _refused(name: str, item: Protected) -> ToolFailure:
    return ToolFailure(
        "permission_denied",
        f"{display(name)!r} is {item.what}; no tool may read or change it (hermes-local keeps its own state "
        "and code out of every tool's reach). Work with other files of the workspace.",
    )


def display(name: str) -> str:
    """A file name as text that can be logged and shown: undecodable bytes become `\\xNN` escapes."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace") if _is_fs_name(name) else _scrub(name)


def _is_fs_name(name: str) -> bool:
    try:
        os.fsencode(name)
        return True
    except UnicodeEncodeError:
        return False


def _scrub(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _outside(raw: str) -> ToolFailure:
    return ToolFailure(
        "permission_denied",
        f"path {display(raw)!r} is outside the workspace; only paths inside the workspace are allowed. "
        "Use a relative path such as 'notes.txt' or 'data/report.csv' (list_dir shows what exists).",
    )


def _through_link(raw: str) -> ToolFailure:
    return ToolFailure(
        "permission_denied",
        f"path {display(raw)!r} goes through a symlink that leads outside the workspace; it is refused. "
        "Use files that are really inside the workspace (list_dir shows what exists).",
    )


@dataclass
class Location:
    """An open fd of the directory holding the leaf, the leaf name ("" for the root) and the shown name."""

    dir_fd: int
    leaf: str
    parts: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The workspace-relative name shown to the model ("." for the workspace itself)."""
        return display("/".join(self.parts)) if self.parts else "."

    def lstat(self) -> os.stat_result | None:
        """The leaf's own status (links not followed), or None when it does not exist."""
        try:
            if not self.leaf:
                return os.stat(self.dir_fd)
            return os.stat(self.leaf, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None


def _relative_parts(ctx: ToolContext, raw: str) -> list[str]:
    if not isinstance(raw, str) or "\x00" in raw:
        raise ToolFailure("invalid_arguments", "path must be a plain text path without NUL characters.")
    if not _is_fs_name(raw):
        raise ToolFailure("invalid_arguments", f"path {display(raw)!r} contains invalid characters (lone surrogates).")
    text = raw.strip() or "."
    if text.startswith("~"):
        raise _outside(raw)
    if os.path.isabs(text):
        rel = _under_root(ctx, text)
        if rel is None:
            raise _outside(raw)
        return rel
    return text.split("/")


def check_inside(ctx: ToolContext, raw: str) -> None:
    """Refuse (ToolFailure) a path that names a place outside the workspace by its words alone (`~`, an absolute
    path elsewhere, `..` above the root): what a plan knows before anything runs. A symlink that leads out is
    found when the call runs (`locate`)."""
    depth = 0
    for part in _relative_parts(ctx, raw):
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            raise _outside(raw)


def _under_root(ctx: ToolContext, absolute: str) -> list[str] | None:
    """The components of an absolute path below the workspace root (as given or resolved), else None."""
    normal = os.path.normpath(absolute)
    for root in {str(workspace_root(ctx)), os.path.normpath(os.path.abspath(ctx.workspace))}:
        if normal == root:
            return []
        if normal.startswith(root.rstrip("/") + "/"):
            return normal[len(root.rstrip("/")) + 1 :].split("/")
    return None


def _open_root(ctx: ToolContext) -> int:
    """A fresh fd of the workspace: re-opened through the pinned fd (never its path again), else by path."""
    try:
        if ctx.pin is not None:
            return os.open(".", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC, dir_fd=ctx.pin.fd)
        return os.open(workspace_root(ctx), os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError as exc:
        raise ToolFailure("tool_error", f"the workspace cannot be opened: {exc.strerror}.") from exc


@contextlib.contextmanager
def locate(ctx: ToolContext, raw: str, *, create_parents: bool = False, follow_leaf: bool = True) -> Iterator[Location]:
    """Walk `raw` inside the workspace; yields the leaf's parent fd (closed on exit). See the module doc.

    `follow_leaf=False` (undo's) stops at a symlink that is the last component instead of following it."""
    pending = [p for p in reversed(_relative_parts(ctx, raw)) if p not in ("", ".")]
    shield = Shield(str(workspace_root(ctx)))
    stack: list[int] = [_open_root(ctx)]
    names: list[str] = []
    links = 0
    leaf = ""
    seen = 0
    if len(pending) > MAX_COMPONENTS or sum(-1 if p == ".." else 1 for p in pending) > MAX_DEPTH + 1:
        raise ToolFailure(
            "invalid_arguments", f"path {display(raw)[:200]!r} is too deep (at most {MAX_DEPTH} folders)."
        )
    try:
        held = shield.hit([], os.fstat(stack[0])) or covering(shield.root, shield.items)
        if held is not None:
            raise _refused(".", held)
        while pending:
            part = pending.pop()
            seen += 1
            if seen > MAX_COMPONENTS or len(stack) > MAX_DEPTH:
                raise ToolFailure(
                    "invalid_arguments", f"path {display(raw)[:200]!r} is too deep (at most {MAX_DEPTH} folders)."
                )
            if part == "..":
                if len(stack) == 1:
                    raise _outside(raw) if links == 0 else _through_link(raw)
                os.close(stack.pop())
                names.pop()
                continue
            if len(os.fsencode(part)) > 255:
                raise ToolFailure("invalid_arguments", f"a name in {display(raw)!r} is longer than 255 bytes.")
            last = not pending
            try:
                info: os.stat_result | None = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                info = None
            held = shield.hit([*names, part], info)
            if held is not None:
                raise _refused("/".join([*names, part]), held)
            if info is None:
                if last:
                    leaf = part
                    break
                if not create_parents:
                    raise ToolFailure(
                        "not_found",
                        f"{display('/'.join([*names, part]))!r} does not exist; call list_dir to see what exists.",
                    ) from None
                made = "/".join([*names, part])
                checkpoints.before_change(stack[-1], part, made, after={"t": "dir", "mode": 0o777 & ~_umask()})
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=stack[-1])
                info = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode) and (follow_leaf or not last):
                links += 1
                if links > MAX_SYMLINKS:
                    raise ToolFailure("invalid_arguments", f"path {display(raw)!r} has too many symlinks (a loop?).")
                target = os.readlink(part, dir_fd=stack[-1])
                if os.path.isabs(target):
                    below = _under_root(ctx, target)
                    if below is None:
                        raise _through_link(raw)
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                    pending.extend(p for p in reversed(below) if p not in ("", "."))
                else:
                    pending.extend(p for p in reversed(target.split("/")) if p not in ("", "."))
                continue
            if last:
                leaf = part
                break
            if not stat.S_ISDIR(info.st_mode):
                where = display("/".join([*names, part]))
                raise ToolFailure("invalid_arguments", f"{where!r} is a file, not a folder.")
            stack.append(_open_dir_at(stack[-1], part, raw))
            names.append(part)
            held = shield.hit(names, os.fstat(stack[-1]))  # the folder opened is the one checked
            if held is not None:
                raise _refused("/".join(names), held)
        yield Location(stack[-1], leaf, [*names, leaf] if leaf else list(names))
    finally:
        for fd in stack:
            os.close(fd)


def _open_dir_at(dir_fd: int, part: str, raw: str) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):  # swapped for a link/file after the check
            raise ToolFailure(
                "permission_denied", f"path {display(raw)!r} changed while it was opened; refused."
            ) from exc
        raise ToolFailure("tool_error", f"cannot open a folder of {display(raw)!r}: {exc.strerror}.") from exc


def open_leaf(loc: Location, flags: int, mode: int = 0o666) -> int:
    """`openat(dir_fd, leaf, flags | O_NOFOLLOW | O_CLOEXEC)`; the root itself is re-opened by fd."""
    if not loc.leaf:
        return os.open(".", flags | _O_CLOEXEC, dir_fd=loc.dir_fd)
    try:
        return os.open(loc.leaf, flags | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=loc.dir_fd)
    except FileNotFoundError as exc:
        raise ToolFailure("not_found", f"{loc.name!r} does not exist; call list_dir to see what exists.") from exc
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            raise ToolFailure(
                "permission_denied", f"{loc.name!r} is not a regular file (or changed); refused."
            ) from exc
        raise ToolFailure("tool_error", f"cannot open {loc.name!r}: {exc.strerror}.") from exc


def check_writable(name: str, info: os.stat_result) -> None:
    """Refuse to write to anything but a regular file with exactly one name."""
    if stat.S_ISDIR(info.st_mode):
        raise ToolFailure("invalid_arguments", f"{name!r} is a directory; give a file path inside it.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailure("permission_denied", f"{name!r} is not a regular file (FIFO, device or socket); refused.")
    if info.st_nlink > 1:
        raise ToolFailure(
            "permission_denied",
            f"{name!r} has {info.st_nlink} hard links (another name may be outside the workspace); "
            "writing to it is refused. Write to a new file name instead.",
        )


def write_atomically(loc: Location, data: bytes, mode: int | None = None) -> bool:
    """Replace the leaf with `data` (temp file + rename, both by dir fd). Returns whether it existed.

    The previous content is checkpointed first (`checkpoints.before_change`, inside a recorded call), so a
    crash at any point leaves the old or the new file and a record that restores the old. `mode` (undo's)
    sets the permission bits; by default an existing file keeps its own and a new one gets 0o666 - umask.
    """
    if not loc.leaf:
        raise ToolFailure("invalid_arguments", "'.' is a directory; give a file path inside it.")
    before = loc.lstat()
    if before is not None:
        check_writable(loc.name, before)
    if mode is None:
        mode = stat.S_IMODE(before.st_mode) if before is not None else 0o666 & ~_umask()
    checkpoints.before_change(loc.dir_fd, loc.leaf, "/".join(loc.parts), data=data, after={"mode": mode})
    tmp = f".hermes-write.{secrets.token_hex(8)}.tmp"  # short: the leaf may already be 255 bytes
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600, dir_fd=loc.dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, loc.leaf, src_dir_fd=loc.dir_fd, dst_dir_fd=loc.dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=loc.dir_fd)
        raise
    return before is not None


def append_line(loc: Location, text: str) -> None:
    """Append `text` to the leaf (created if missing), refusing links, non-regular and hard-linked files."""
    if not loc.leaf:
        raise ToolFailure("invalid_arguments", "'.' is a directory.")
    raw = text.encode("utf-8")
    checkpoints.before_change(loc.dir_fd, loc.leaf, "/".join(loc.parts), append=raw)  # before O_CREAT makes it
    fd = open_leaf(loc, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
    try:
        check_writable(loc.name, os.fstat(fd))
        os.set_blocking(fd, True)
        data = memoryview(raw)
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def remove_leaf(loc: Location) -> None:
    """Remove the leaf (a file, a link or an empty folder; checkpointed first), by dir fd."""
    info = loc.lstat()
    if not loc.leaf or info is None:
        return
    checkpoints.before_change(loc.dir_fd, loc.leaf, "/".join(loc.parts), after=dict(checkpoints.ABSENT))
    if stat.S_ISDIR(info.st_mode):
        os.rmdir(loc.leaf, dir_fd=loc.dir_fd)
    else:
        os.unlink(loc.leaf, dir_fd=loc.dir_fd)


def make_node(loc: Location, state: checkpoints.State) -> None:
    """Create a folder or a symlink at the (absent) leaf as `state` says (checkpointed first), by dir fd."""
    checkpoints.before_change(loc.dir_fd, loc.leaf, "/".join(loc.parts), after=state)
    if state["t"] == "dir":
        os.mkdir(loc.leaf, state.get("mode", 0o755), dir_fd=loc.dir_fd)
    elif state["t"] == "link":
        os.symlink(state["target"], loc.leaf, dir_fd=loc.dir_fd)


def _umask() -> int:
    # os.umask is process-wide; read it from /proc when possible so threads never see a changed value.
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022
