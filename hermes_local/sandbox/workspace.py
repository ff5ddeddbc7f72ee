"""A pinned workspace: the folder a run was accepted with, opened once and used through its directory fd.

`PinnedWorkspace.open(path)` resolves the folder once, opens it (`O_DIRECTORY`) and refuses a folder
that is, or lies inside, the agent's own state or code (`protect.py`). Every later use goes through the
fd: the file tools walk from it (`tools/effects/confined.py`), the sandbox binds it with bwrap's `--bind-fd`
(`policy.py`), an unsandboxed command or server starts in it through `/proc/PID/fd/N` (`cwd`), and an
argv-only caller (an MCP stdio client) gets `launcher()`, a `/bin/sh` prefix that opens that magic
link as fd 3 for `--bind-fd 3`. `check()` refuses a run whose folder was swapped (moved away, or
replaced by a symlink or another folder) since it was pinned: it is never redirected to the new
target. `strip_set_id()` clears set-id bits a command left on files of the workspace.

What outlives the run keeps the folder's identity, not its path: `identity` is a `FolderId` (the resolved path,
the device and inode of the opened folder), recorded once when a run, schedule or checkpoint first names the
workspace, and `PinnedWorkspace.reopen(recorded)` is how every later act (a schedule firing, `sessions apply`,
`undo`/`diff`, `run --resume`/`--continue`, the serve routes that do the same) opens it again: each component of
the recorded path is opened with `O_NOFOLLOW | O_DIRECTORY` from `/`, so a symlink anywhere on the way is refused,
and the folder reached must have the recorded device and inode; a folder moved away, replaced or linked elsewhere
is `WorkspaceSwapped` (one line naming the recorded path and what stands there now), never redirected. Does not
walk paths inside the workspace for the tools or decide what a tool may do.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.errors import UserError, WorkspaceSwapped
from hermes_local.sandbox.protect import STATE, covering

LAUNCH_FD = 3  # the fd number the launcher opens the pinned folder as
MAX_STRIP_SCAN = 100_000  # entries looked at after a command for set-id bits
MAX_DEPTH = 64
SET_ID = stat.S_ISUID | stat.S_ISGID
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class FolderId:
    """A folder's identity as first recorded: its resolved path and the device and inode of the folder opened."""

    path: str
    dev: int
    ino: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "dev": self.dev, "ino": self.ino}

    @classmethod
    def from_dict(cls, data: Any) -> FolderId | None:
        """The identity a log, record or schedule file holds; None when it holds none (or a tampered one)."""
        if not isinstance(data, dict):
            return None
        path, dev, ino = data.get("path"), data.get("dev"), data.get("ino")
        if not (isinstance(path, str) and path.startswith("/") and isinstance(dev, int) and isinstance(ino, int)):
            return None
        return cls(path, dev, ino)


@dataclass
class PinnedWorkspace:
    """An open directory fd of the run's workspace and the real path it had when it was pinned."""

    path: Path
    fd: int
    dev: int
    ino: int
    closed: bool = field(default=False)

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> PinnedWorkspace:
        """Resolve and open `folder` now; UserError (one line) when it is missing or the agent's own."""
        real = Path(os.path.realpath(folder))
        held = covering(real)
        if held is not None:
            hint = "it would let tools change the agent itself" if held.kind != STATE else "tools would reach its data"
            raise UserError(f"workspace {real} is inside {held.what} ({held.path}); {hint}: choose another folder")
        try:
            fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            why = f"workspace {folder} is not a directory ({exc.strerror}); create it or pass --workspace DIR"
            raise UserError(why) from exc
        info = os.fstat(fd)
        return cls(real, fd, info.st_dev, info.st_ino)

    @classmethod
    def reopen(cls, recorded: FolderId, what: str = "the run") -> PinnedWorkspace:
        """The recorded folder itself, opened again without following a symlink at any component of its path;
        WorkspaceSwapped (one line naming `what`, the recorded path and what stands there now) when the path no
        longer leads to that folder (moved away, replaced, a symlink swapped in). Never redirected."""
        fd, why = _walk(recorded.path)
        if fd >= 0:
            info = os.fstat(fd)
            held = covering(recorded.path)  # its path has no symlink now: this is where it is
            if (info.st_dev, info.st_ino) == (recorded.dev, recorded.ino) and held is None:
                return cls(Path(recorded.path), fd, info.st_dev, info.st_ino)
            os.close(fd)
            if held is not None:
                raise UserError(f"workspace {recorded.path} of {what} is inside {held.what} ({held.path}); refused")
            why = "another folder stands there now (the recorded one was moved away or replaced)"
        now = os.path.realpath(recorded.path)
        where = f" ({recorded.path} leads to {now} now)" if now != recorded.path else ""
        raise WorkspaceSwapped(
            f"workspace {recorded.path} of {what} is not the folder it recorded: {why}{where}; refused, not "
            f"redirected. Put the folder back at {recorded.path}, or start a new run in the folder you mean"
        )

    @property
    def identity(self) -> FolderId:
        """What a run, schedule or checkpoint records of this folder (`reopen` checks it later)."""
        return FolderId(str(self.path), self.dev, self.ino)

    def swapped(self) -> str | None:
        """Why the path no longer names the pinned folder (moved, replaced, a symlink now), else None."""
        if self.closed:
            return "the run has ended"
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except OSError as exc:
            return f"it is gone ({exc.strerror})"
        if (now.st_dev, now.st_ino) != (self.dev, self.ino):
            return "it was replaced (by a symlink or another folder)"
        if os.path.realpath(self.path) != str(self.path):
            return "a folder above it was replaced by a symlink"
        return None

    def check(self) -> None:
        """Raise WorkspaceSwapped (one line) when the folder was swapped since the run was accepted."""
        why = self.swapped()
        if why:
            raise WorkspaceSwapped(
                f"workspace {self.path} changed after the run was accepted: {why}; the run is refused, not "
                "redirected. Check the folder and start the run again"
            )

    def proc_path(self) -> str:
        """`/proc/PID/fd/N`: opens (or `chdir`s into) the pinned folder itself, whatever its path names now."""
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def launcher(self) -> list[str]:
        """A `/bin/sh` prefix that opens the pinned folder as fd LAUNCH_FD and runs the rest of the argv."""
        return ["/bin/sh", "-c", f'exec {LAUNCH_FD}<"$0" && exec "$@"', self.proc_path()]

    def strip_set_id(self, since_ns: int, limit: int = MAX_STRIP_SCAN) -> list[str]:
        """Clear the set-user-ID / set-group-ID bits of regular files changed (ctime) since `since_ns`.

        The sandbox mounts nosuid, but the mode stays on the host file, where a later user could run
        it. Walked by directory fds (no symlink followed, no other filesystem entered), at most `limit`
        entries and MAX_DEPTH folders deep. Returns the workspace-relative names it changed.
        """
        changed: list[str] = []
        budget = [limit]
        root = os.open(".", _DIR, dir_fd=self.fd)
        try:
            _strip_in(root, "", self.dev, since_ns, changed, budget, 0)
        finally:
            os.close(root)
        return changed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)

    def __enter__(self) -> PinnedWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def folder_of(workspace: PinnedWorkspace | Path | None) -> Path | None:
    """The folder a pinned workspace or a path names (None stays None)."""
    return workspace.path if isinstance(workspace, PinnedWorkspace) else workspace


def _walk(path: str) -> tuple[int, str]:
    """(an fd of the folder `path` names, "") opening each component with O_NOFOLLOW from `/`; (-1, why) when a
    component is missing, not a folder, or a symlink."""
    fd = os.open("/", _DIR)
    at = ""
    for part in [p for p in path.split("/") if p]:
        at += "/" + part
        try:
            nxt = os.open(part, _DIR, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            try:
                link = stat.S_ISLNK(os.lstat(at).st_mode)
            except OSError:
                link = False
            if link:
                return -1, f"{at} is a symlink now"
            return -1, f"{at} is {'gone' if isinstance(exc, FileNotFoundError) else 'not a folder'} ({exc.strerror})"
        os.close(fd)
        fd = nxt
    return fd, ""


def _strip_in(fd: int, rel: str, dev: int, since_ns: int, changed: list[str], budget: list[int], depth: int) -> None:
    try:
        with os.scandir(fd) as it:
            entries = list(it)
    except OSError:
        return
    folders = []
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            return
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_dev != dev:
            continue  # another filesystem mounted inside the workspace
        if stat.S_ISDIR(info.st_mode):
            folders.append(entry.name)
        elif stat.S_ISREG(info.st_mode) and info.st_mode & SET_ID and info.st_ctime_ns >= since_ns:
            if _clear(fd, entry.name, info):
                changed.append(rel + entry.name)
    if depth >= MAX_DEPTH:
        return
    for name in folders:
        try:
            sub = os.open(name, _DIR, dir_fd=fd)
        except OSError:
            continue
        try:
            _strip_in(sub, f"{rel}{name}/", dev, since_ns, changed, budget, depth + 1)
        finally:
            os.close(sub)


def _clear(fd: int, name: str, info: os.stat_result) -> bool:
    """Clear the set-id bits of `name` in folder `fd` (by its own fd when it can be opened, links never followed)."""
    try:
        leaf = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except PermissionError:  # unreadable to its owner (mode 4111): by name, it was just seen as a regular file
        with contextlib.suppress(OSError):
            os.chmod(name, stat.S_IMODE(info.st_mode) & ~SET_ID, dir_fd=fd)
            return True
        return False
    except OSError:
        return False
    try:
        now = os.fstat(leaf)
        if not stat.S_ISREG(now.st_mode):
            return False
        os.fchmod(leaf, stat.S_IMODE(now.st_mode) & ~SET_ID)
        return True
    except OSError:
        return False
    finally:
        os.close(leaf)


def pin_recorded(
    recorded: FolderId | None, path: str | os.PathLike[str], what: str, on_note: Callable[[str], None] | None = None
) -> PinnedWorkspace:
    """`PinnedWorkspace.reopen(recorded)`; a record written before identities were kept (`recorded` None) is
    adopted: `path` is opened as it is now, and `on_note` is told so in one line."""
    if recorded is not None:
        return PinnedWorkspace.reopen(recorded, what)
    pin = PinnedWorkspace.open(path)
    if on_note is not None:
        on_note(f"note: {what} recorded no folder identity (an older version wrote it); using {pin.path} as it is now")
    return pin
