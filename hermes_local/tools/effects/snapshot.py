"""What a `run_shell` command changed in the workspace, recorded as a checkpoint.

This machine's bwrap gives no copy-on-write view to run a command on (`--overlay` arrived in bubblewrap 0.9,
and a view would also need the changes merged back), and previous contents cannot be read after the fact,
so the command is bracketed by two scans of the pinned workspace (`os.fwalk` from its fd, links never
followed, the agent's own state skipped): `begin` keeps every regular file's content (up to the
recorder's per-file limit and the per-call `shell_budget`; a file already kept in this run with the
same inode, size, mtime and ctime is not read again) and writes the scan as one object plus a record
*before* the command runs; `end` scans again and records each path whose state changed (created,
changed, removed; folders and symlinks too). A file over the limits is recorded by size and mtime only:
its change is shown, but its previous content cannot be restored (`shell_notes` says so in the approval
prompt, `doctor` too). A command that is killed between the two leaves the first record: undo then
compares with the scan. Changes made outside the workspace are not seen. The same brackets (`scanned`) go
around every write or dangerous call of a tool that writes by its own means (a tool module's, an MCP
server's), so their workspace changes are recorded too. Also the wiring a run needs: `open_recorder` (one
run's recorder, retention first), `steps_to` (tells it each call's step) and `shell_notes` (the approval
prompt's lines). Does not run the command.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hermes_local.errors import UserError
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.tools.effects.checkpoints import (
    Call,
    CheckpointStore,
    Recorder,
    State,
    current,
    read_state,
    same_state,
)
from hermes_local.tools.effects.confined import Shield, workspace_root
from hermes_local.tools.registry import ToolContext

MAX_ENTRIES = 100_000  # names one scan looks at; beyond, the rest of the workspace is not recorded


@dataclass
class Scan:
    """One scan: path -> state, and whether it covered everything (`missed`: what it could not keep)."""

    states: dict[str, State] = field(default_factory=dict)
    complete: bool = True
    missed: list[str] = field(default_factory=list)


def scan(pin: PinnedWorkspace, rec: Recorder, budget: int) -> Scan:
    """Every name under the workspace with its state; file contents kept within `budget` bytes."""
    out = Scan()
    shield = Shield(str(pin.path))
    left = [budget]
    count = 0
    for top, dirs, files, dir_fd in os.fwalk(".", dir_fd=pin.fd, follow_symlinks=False):
        rel = "" if top == "." else top[2:] + "/"
        for name in sorted([*dirs, *files]):
            count += 1
            if count > MAX_ENTRIES:
                out.complete = False
                dirs.clear()
                break
            path = rel + name
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in shield.ids:  # the agent's own (its folder pruned: all inside too)
                if name in dirs:
                    dirs.remove(name)
                continue
            out.states[path] = _state(dir_fd, name, path, info, rec, left, out)
    return out


def _state(dir_fd: int, name: str, path: str, info: os.stat_result, rec: Recorder, left: list[int], out: Scan) -> State:
    if not stat.S_ISREG(info.st_mode):
        return read_state(dir_fd, name, None)
    key = (path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    known = rec.scan_cache.get(key)
    if known is not None:
        return known
    if info.st_size > min(rec.file_limit, left[0]):
        out.missed.append(path)
        return {
            "t": "file",
            "sha": None,
            "size": info.st_size,
            "mode": stat.S_IMODE(info.st_mode),
            "mtime": info.st_mtime_ns,
            "kept": False,
        }
    try:
        state = read_state(dir_fd, name, rec.store, rec.file_limit)
    except OSError:
        return {"t": "other"}
    left[0] -= info.st_size
    rec.scan_cache[key] = state
    return state


@dataclass
class Watch:
    """A command being watched: its call, the scan before it and the record that names it."""

    call: Call
    before: Scan
    snapshot: str


def begin(pin: PinnedWorkspace) -> Watch | None:
    """Scan and record the workspace before a command runs (None outside a recorded call)."""
    call = current()
    if call is None:
        return None
    rec = call.recorder
    before = scan(pin, rec, rec.shell_budget)
    blob = json.dumps(before.states, sort_keys=True, separators=(",", ":")).encode()
    sha = rec.store.put(blob)
    rec.record(call, [], snapshot=sha, phase="begin", complete=before.complete, missed=before.missed[:20])
    return Watch(call, before, sha)


def changes_between(before: dict[str, State], after: dict[str, State]) -> list[dict[str, Any]]:
    """{"path", "before", "after"} for each path whose state differs (absent on one side included)."""
    absent: State = {"t": "absent"}
    out = []
    for path in sorted(set(before) | set(after)):
        b, a = before.get(path, absent), after.get(path, absent)
        if not same_state(b, a) or b.get("mode") != a.get("mode"):  # chmod counts: undo restores the bits
            out.append({"path": path, "before": b, "after": a})
    return out


def end(watch: Watch | None, pin: PinnedWorkspace) -> None:
    """Scan again after the command and record what it changed."""
    if watch is None:
        return
    rec = watch.call.recorder
    after = scan(pin, rec, rec.shell_budget)
    changes = changes_between(watch.before.states, after.states)
    # not synced: lost in a power cut, undo compares the first scan with the workspace instead
    rec.record(watch.call, changes, durable=False, snapshot=watch.snapshot, phase="end", complete=after.complete)


def snapshot_states(rec_store: Any, sha: str) -> dict[str, State]:
    """The scan a `begin` record names."""
    states: dict[str, State] = json.loads(rec_store.get(sha))
    return states


@contextlib.contextmanager
def scanned(pin: PinnedWorkspace | None, workspace: os.PathLike[str] | str) -> Iterator[None]:
    """Bracket a call whose tool writes by its own means with two scans, like run_shell (inside a recorded call)."""
    if current() is None:
        yield
        return
    opened = pin is None
    try:
        pin = pin or PinnedWorkspace.open(workspace)
    except UserError:  # the tool reports the missing workspace itself
        yield
        return
    try:
        watch = begin(pin)
        try:
            yield
        finally:
            end(watch, pin)
    finally:
        if opened:
            pin.close()


@functools.cache
def overlay_supported() -> bool:
    """Whether this machine's bwrap has `--overlay` (bubblewrap 0.9+); hermes-local records by scans either way."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=5)
        return "--overlay" in out.stdout + out.stderr
    return False


def recording_note(rec: Recorder | None) -> str:
    """One line: how run_shell's changes are recorded in this run (approval prompt, doctor)."""
    if rec is None:
        return "checkpoint: NONE (no session, or checkpoint_max_mb = 0): its changes cannot be undone"
    return (
        f"checkpoint: workspace scanned before and after; files up to {rec.file_limit // 2**20} MB "
        f"(at most {rec.shell_budget // 2**20} MB per command) can be restored, larger ones and changes "
        "outside the workspace cannot (no copy-on-write view)"
    )


def shell_notes(sandbox: SandboxPolicy, rec: Recorder | None) -> str:
    """The approval prompt's lines for run_shell: the sandbox, then the checkpoint."""
    return f"{sandbox.approval_note()}\n{recording_note(rec)}"


def doctor_line(max_mb: int) -> str:
    """`doctor`'s line on checkpoints: on or off, the store's size, and what run_shell's recording can restore."""
    from hermes_local.tools.effects.checkpoints import FILE_MAX_BYTES, CheckpointStore

    if max_mb <= 0:
        return "OFF (checkpoint_max_mb = 0): what runs change cannot be shown or undone"
    store = CheckpointStore()
    used = store.size()[1] / 2**20
    view = "bwrap has --overlay, unused" if overlay_supported() else "this bwrap has no --overlay"
    return (
        f"{store.root} ({used:.1f} of {max_mb} MiB); run_shell: workspace scanned before and after, no "
        f"copy-on-write view ({view}); files over {FILE_MAX_BYTES // 2**20} MB and changes outside the "
        "workspace cannot be restored"
    )


def open_recorder(session: str | None, context: ToolContext, max_mb: int) -> Recorder | None:
    """The recorder of one run in session `session`, in `context`'s workspace (None: no session or `max_mb` 0).

    Retention happens here, before the run: the oldest other sessions go until the store fits `max_mb`.
    """
    if not session or max_mb <= 0:
        return None
    store = CheckpointStore()
    if store.size()[1] > max_mb * 2**20:
        store.prune(max_mb * 2**20, keep=frozenset({session}))
    folder = context.pin.identity.to_dict() if context.pin is not None else None
    return Recorder(store, session, os.fspath(workspace_root(context)), folder=folder)


def steps_to(rec: Recorder | None, sink: Callable[[Any], None] | None) -> Callable[[Any], None] | None:
    """An event sink that tells `rec` the step of each tool call (`tool_call` events), then passes it on."""
    if rec is None:
        return sink

    def observed(event: Any) -> None:
        if getattr(event, "kind", "") == "tool_call":
            rec.at(int(event.step))
        if sink is not None:
            sink(event)

    return observed
