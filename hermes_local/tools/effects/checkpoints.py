"""Checkpoints: what each write-capable tool call changed in the workspace, kept so it can be shown and undone.

The store lives under `$HERMES_LOCAL_HOME/checkpoints/` (out of every tool's reach, `sandbox/protect.py`):
`objects/ab/cdef...` holds file contents, zlib-compressed and named by the SHA-256 of the raw bytes (each
content stored once), and `sessions/<id>.jsonl` holds one record per call: session step, call number, tool,
workspace (its path and its identity: device and inode, checked again by undo and diff), and for each affected
path the state before and after (`absent`, a file with its hash, size and mode, a folder, a symlink with its
target). Nothing goes into the workspace or into `sessions/*.jsonl`.

Order makes a kill -9 harmless: the previous content is written (temp file, fsync, rename) and the record
appended and fsynced *before* the tool touches the file, and the tool writes atomically (confined.py), so
after a crash the file holds the old or the new content and the checkpoint restores the old.

`Recorder` is one run's (or one undo's) recording (a team child's also keeps each record in its caller's, at the
delegation's step, labelled with the specialist: `Recorder.parent`, set by `Executor.join`); `Executor` makes it
current around each write or dangerous call (`Recorder.call`, a context variable that follows the tool into its
thread), and the one write path every file tool uses (`tools/effects/confined.py`: `write_atomically`,
`append_line`, folders created on the way, `remove_leaf`) calls `before_change` here. `run_shell` records through
`tools/effects/snapshot.py`. Retention (`prune`) removes the oldest sessions' records first, then the objects nothing
refers to. Does not restore or diff anything (`tools/effects/undo.py`) and never follows a workspace path itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import secrets
import shutil
import stat
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.errors import UserError
from hermes_local.sandbox.protect import agent_home
from hermes_local.session import valid_session_id
from hermes_local.tools.registry import ToolFailure

FILE_MAX_BYTES = 32 * 2**20  # previous content larger than this is described (size), not kept
COLLECT_GRACE = 600.0  # seconds an unreferenced object is left alone (its record may be on its way)
State = dict[str, Any]  # {"t": "absent"|"file"|"dir"|"link"|"other", ...}
ABSENT: State = {"t": "absent"}
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def check_session(session: str) -> str:
    """`session` if it is a plain session ID, else a UserError naming where IDs are listed."""
    if not valid_session_id(session):  # session/log.py's rule: a name, never a path
        raise UserError(f"{session[:100]!r} is not a session ID; see `hermes-local sessions list`")
    return session


def store_dir() -> Path:
    """`$HERMES_LOCAL_HOME/checkpoints`."""
    return agent_home() / "checkpoints"


class CheckpointStore:
    """Content-addressed objects and per-session JSONL records under one folder."""

    def __init__(self, root: Path | None = None) -> None:
        root = root or store_dir()
        self.root = root
        self.objects = root / "objects"
        self.index = root / "sessions"

    def _object_path(self, sha: str) -> Path:
        return self.objects / sha[:2] / sha[2:]

    def has(self, sha: str) -> bool:
        return self._object_path(sha).exists()

    def put(self, data: bytes, sha: str | None = None, *, durable: bool = True) -> str:
        """Keep `data` (once per content); returns its SHA-256. Atomic: a killed process leaves no half object;
        `durable` also syncs it to disk (for content a checkpoint restores, so it outlives a power cut)."""
        sha = sha or hashlib.sha256(data).hexdigest()
        path = self._object_path(sha)
        if path.exists():
            return sha
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.parent / f".{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(zlib.compress(data, 1))
                fh.flush()
                if durable:
                    os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return sha

    def get(self, sha: str) -> bytes:
        """The content kept under `sha`; KeyError when it is not (or no longer) kept."""
        try:
            return zlib.decompress(self._object_path(sha).read_bytes())
        except (FileNotFoundError, zlib.error) as exc:
            raise KeyError(sha) from exc

    def append(self, session: str, record: dict[str, Any], *, durable: bool = True) -> None:
        """Add one record to the session's list: one write (fsynced when `durable`; a crash loses at most it)."""
        check_session(session)
        self.index.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
        fd = os.open(self.index / f"{session}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_CLOEXEC, 0o600)
        try:
            os.write(fd, line)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    def records(self, session: str) -> list[dict[str, Any]]:
        """The session's records in order (a torn last line is skipped); [] when it has none."""
        try:
            raw = (self.index / f"{check_session(session)}.jsonl").read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for line in raw.split(b"\n"):
            with contextlib.suppress(ValueError):
                if line.strip():
                    out.append(json.loads(line))
        return out

    def sessions(self) -> list[tuple[str, float, int]]:
        """(session id, last change, record bytes) of every session with records, oldest first."""
        found = []
        for p in self.index.glob("*.jsonl") if self.index.is_dir() else []:
            with contextlib.suppress(OSError):
                info = p.stat()
                found.append((p.stem, info.st_mtime, info.st_size))
        return sorted(found, key=lambda s: s[1])

    def size(self) -> tuple[int, int]:
        """(objects, bytes on disk) of the whole store, records included in the bytes."""
        count = total = 0
        for base, _, files in os.walk(self.root):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.stat(os.path.join(base, name)).st_size
                    count += base.startswith(str(self.objects))
        return count, total

    def prune(self, max_bytes: int, keep: frozenset[str] = frozenset()) -> list[str]:
        """Drop the oldest sessions (not those in `keep`, nor any changed in the last `COLLECT_GRACE` seconds)
        until the store fits `max_bytes`; returns their ids."""
        dropped: list[str] = []
        total = self.size()[1]
        for session, changed, size in self.sessions():
            if total <= max_bytes:
                break
            if session in keep or changed > time.time() - COLLECT_GRACE:  # a session this young may still run
                continue
            with contextlib.suppress(FileNotFoundError):
                (self.index / f"{session}.jsonl").unlink()
            dropped.append(session)
            total -= size + self.collect()[1]
        return dropped

    def collect(self) -> tuple[int, int]:
        """Remove objects no remaining record refers to; returns (objects, bytes) removed. Objects younger than
        `COLLECT_GRACE` stay: another run may have kept one and not yet written the record naming it."""
        used: set[str] = set()
        for session, _, _ in self.sessions():
            for record in self.records(session):
                used.update(_shas(record))
                if isinstance(record.get("snapshot"), str):
                    used.add(record["snapshot"])
                    with contextlib.suppress(KeyError, ValueError):
                        used.update(_shas(json.loads(self.get(record["snapshot"]))))
        removed = freed = 0
        young = time.time() - COLLECT_GRACE
        for base, _, files in os.walk(self.objects):
            for name in files:
                path = os.path.join(base, name)
                with contextlib.suppress(OSError):
                    info = os.stat(path)
                    if os.path.basename(base) + name not in used and info.st_mtime < young:
                        os.unlink(path)
                        removed, freed = removed + 1, freed + info.st_size
        return removed, freed

    def clear(self) -> tuple[int, int]:
        """Delete every checkpoint; returns (objects, bytes) removed."""
        before = self.size()
        shutil.rmtree(self.root, ignore_errors=True)
        return before


def _shas(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if isinstance(value.get("sha"), str) and value.get("kept"):
            yield value["sha"]
        for v in value.values():
            yield from _shas(v)
    elif isinstance(value, list):
        for v in value:
            yield from _shas(v)


def file_state(
    store: CheckpointStore | None, data: bytes, mode: int, limit: int = FILE_MAX_BYTES, *, durable: bool = True
) -> State:
    """The state of a file holding `data`, its content kept in `store` when it is at most `limit` bytes."""
    sha = hashlib.sha256(data).hexdigest()
    kept = store is not None and len(data) <= limit
    if kept and store is not None:
        store.put(data, sha, durable=durable)
    return {"t": "file", "sha": sha, "size": len(data), "mode": stat.S_IMODE(mode), "kept": kept}


def read_state(dir_fd: int, leaf: str, store: CheckpointStore | None, limit: int = FILE_MAX_BYTES) -> State:
    """The state of `leaf` in the folder `dir_fd` (links not followed); its content kept when it is a file."""
    try:
        info = os.stat(leaf, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return dict(ABSENT)
    if stat.S_ISDIR(info.st_mode):
        return {"t": "dir", "mode": stat.S_IMODE(info.st_mode)}
    if stat.S_ISLNK(info.st_mode):
        return {"t": "link", "target": os.fsdecode(os.readlink(leaf, dir_fd=dir_fd))}
    if not stat.S_ISREG(info.st_mode):
        return {"t": "other", "mode": info.st_mode}
    if info.st_size > limit:
        return {"t": "file", "sha": None, "size": info.st_size, "mode": stat.S_IMODE(info.st_mode), "kept": False}
    try:
        fd = os.open(leaf, os.O_RDONLY | os.O_NONBLOCK | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=dir_fd)
    except PermissionError:  # unreadable to us: described, not kept
        return {"t": "file", "sha": None, "size": info.st_size, "mode": stat.S_IMODE(info.st_mode), "kept": False}
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        return {"t": "file", "sha": None, "size": len(data), "mode": stat.S_IMODE(info.st_mode), "kept": False}
    return file_state(store, data, info.st_mode, limit)


def same_state(a: State | None, b: State | None) -> bool:
    """Whether two states are the same content (files by hash; unknown hashes by size)."""
    if a is None or b is None:
        return a is b
    if a["t"] != b["t"]:
        return False
    if a["t"] == "file":
        if a.get("sha") and b.get("sha"):
            return bool(a["sha"] == b["sha"])
        return bool(a.get("size") == b.get("size") and a.get("mtime") == b.get("mtime"))
    if a["t"] == "link":
        return bool(a.get("target") == b.get("target"))
    return True


@dataclass
class Call:
    """One tool call being recorded: where its changes go."""

    recorder: Recorder
    step: int
    number: int
    tool: str


_CURRENT: contextvars.ContextVar[Call | None] = contextvars.ContextVar("hermes_checkpoint_call", default=None)


def current() -> Call | None:
    """The call being recorded in this context, or None (a library write outside a run: nothing recorded)."""
    return _CURRENT.get()


@dataclass
class Recorder:
    """One session's recording: its store, id and workspace, and the step the run is at."""

    store: CheckpointStore
    session: str
    workspace: str
    step: int = 0
    folder: dict[str, Any] | None = None  # the workspace's identity (`FolderId.to_dict()`): undo and diff check it
    file_limit: int = FILE_MAX_BYTES
    shell_budget: int = 256 * 2**20  # bytes of previous content one run_shell snapshot may read
    parent: Recorder | None = None  # a team child's: its caller's recording, which keeps each record too
    agent: str = ""  # a team child's specialist, the label its records carry in the caller's
    _numbers: dict[int, int] = field(default_factory=dict)
    _mirrored: dict[tuple[str, int, int], int] = field(default_factory=dict)  # (child, step, call) -> call number
    _lock: threading.Lock = field(default_factory=threading.Lock)
    scan_cache: dict[tuple[str, int, int, int, int], State] = field(default_factory=dict)  # snapshot.py's
    changed: set[str] = field(default_factory=set)  # workspace paths this run changed (what a run's outcome reads)

    def at(self, step: int) -> None:
        """The run has reached `step` (the agent's step number, as in the session log)."""
        self.step = step

    @contextlib.contextmanager
    def call(self, tool: str) -> Iterator[Call]:
        """Record the changes of one tool call made inside this block (and in threads started from it)."""
        with self._lock:
            number = self._numbers.get(self.step, 0) + 1
            self._numbers[self.step] = number
        token = _CURRENT.set(Call(self, self.step, number, tool))
        try:
            yield _CURRENT.get()  # type: ignore[misc]
        finally:
            _CURRENT.reset(token)

    def record(self, call: Call, changes: list[dict[str, Any]], *, durable: bool = True, **extra: Any) -> None:
        """Append one record of `call`'s changes ({"path", "before", "after"} each); `durable=False` for a
        record whose loss in a power cut undo survives (run_shell's second scan)."""
        record = {
            "step": call.step,
            "call": call.number,
            "tool": call.tool,
            "ts": round(time.time(), 3),
            "workspace": self.workspace,
            **({"folder": self.folder} if self.folder else {}),
            "changes": changes,
            **extra,
        }
        self._keep(record, durable)

    def _keep(self, record: dict[str, Any], durable: bool) -> None:
        """Append `record` to this session's records, and to the caller's when this is a team child's."""
        with self._lock:
            self.store.append(self.session, record, durable=durable)
            self.changed.update(str(c["path"]) for c in record.get("changes") or () if c.get("path"))
        if self.parent is not None:
            self.parent.mirror(record, self.agent, self.session, durable)

    def mirror(self, record: dict[str, Any], agent: str, child: str, durable: bool) -> None:
        """Keep a team child's record as one of this run's: at this run's current step (the delegation's), labelled
        with the specialist, its session and its own step (a grandchild's keeps its innermost labels)."""
        key = (str(record.get("child") or child), int(record["step"]), int(record["call"]))
        with self._lock:
            number = self._mirrored.get(key)
            if number is None:  # a command's begin and end records become one call here too
                number = self._mirrored[key] = self._numbers.get(self.step, 0) + 1
                self._numbers[self.step] = number
        labels = {"agent": record.get("agent") or agent, "child": key[0]}
        labels["child_step"] = record.get("child_step", key[1])
        self._keep(record | {"step": self.step, "call": number} | labels, durable)


def before_change(
    dir_fd: int,
    leaf: str,
    path: str,
    *,
    after: State | None = None,
    data: bytes | None = None,
    append: bytes | None = None,
) -> None:
    """Called by the write path just before it changes `leaf` in `dir_fd` (`path`: workspace-relative).

    Keeps the previous state and the new content (`data`: the whole new content; `append`: bytes added at
    the end), then appends the record, all before the change. `after` is the state the change leaves when
    neither says it (a folder made, a name removed). Does nothing outside a recorded call.
    """
    call = current()
    if call is None:
        return
    try:
        _before_change(call, dir_fd, leaf, path, after, data, append)
    except OSError as exc:  # no unrecorded change: the write is not made
        raise ToolFailure(
            "tool_error",
            f"{path!r} was not changed: its checkpoint cannot be kept ({exc.strerror or exc}); tell the user "
            "(free disk space in the hermes-local home, or set checkpoint_max_mb = 0 to run without checkpoints).",
        ) from exc


def _before_change(
    call: Call, dir_fd: int, leaf: str, path: str, after: State | None, data: bytes | None, append: bytes | None
) -> None:
    rec = call.recorder
    before = read_state(dir_fd, leaf, rec.store, rec.file_limit)
    if append is not None:
        if before["t"] == "absent":
            data = append
        elif before.get("kept"):
            data = rec.store.get(before["sha"]) + append
        else:
            after = {"t": "file", "sha": None, "size": before.get("size", 0) + len(append), "kept": False}
            after["mode"] = before.get("mode", 0o644)
    if data is not None:
        mode = int((after or {}).get("mode") or before.get("mode") or 0o644)
        after = file_state(rec.store, data, mode, rec.file_limit, durable=False)  # the new content: for diff
    rec.record(call, [{"path": path, "before": before, "after": after}])
