"""Show and undo what a session changed in its workspace, from its checkpoints (`tools/effects/checkpoints.py`).

`session_diff(ID, step=N)` lists each changed path with its state before and after (the whole run, or step N; a team's
children's changes included, each labelled with the specialist and its step), `diff_text` renders that as a unified
diff for text and size/hash lines for binary files and folders. `undo_session(ID, to_step=N)` puts the workspace back
as it was before step N (default: before the run; a team's children's changes too): changed files get their previous
content and permission bits (never set-user/group-ID bits), files and folders the run made are removed, removed ones
come back. It refuses, per path, one whose current state is not the one the run left (someone changed it since;
`force=True` overrides) and one whose previous content was not kept (over the size limits), and it removes no folder
that still holds other files. The undo is recorded in the same session as a new step, so `redo=True` (undo to before
the last undo) brings the run's changes back. It holds the session log's lock (no undo while the run or a resume still
writes). The workspace comes from the session's records, so both work from any folder: it is reopened by the identity
the records kept (`PinnedWorkspace.reopen`: a folder moved away, replaced or linked elsewhere is refused in one line,
never redirected; records from before identities were kept are adopted with a note); every access goes through the
workspace's pinned fd and `tools/effects/confined.py`. Does not print.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hermes_local.errors import UserError, WorkspaceSwapped
from hermes_local.sandbox.protect import agent_home
from hermes_local.sandbox.workspace import FolderId, PinnedWorkspace, pin_recorded
from hermes_local.tools.effects.checkpoints import (
    ABSENT,
    CheckpointStore,
    Recorder,
    State,
    check_session,
    read_state,
    same_state,
)
from hermes_local.tools.effects.confined import locate, make_node, remove_leaf, write_atomically
from hermes_local.tools.effects.snapshot import changes_between, scan, snapshot_states
from hermes_local.tools.registry import ToolContext, ToolFailure

MAX_DIFF_BYTES = 1_000_000  # text files larger than this are described, not diffed
Note = Callable[[str], None]


@dataclass
class Change:
    """One path's change by one call: its state before and after (None: unknown, the call was cut off)."""

    step: int
    tool: str
    path: str
    before: State
    after: State | None
    by: dict[str, Any] = field(default_factory=dict)  # a team child's: its agent, session and own step

    def label(self) -> dict[str, Any]:
        """Who made it: the step, and a specialist's name, session and own step."""
        return {"step": self.step} | self.by


@dataclass
class FileDiff:
    """What one path went through: before, after and the unified diff text (or a one-line description)."""

    path: str
    before: State
    after: State
    text: str
    by: list[dict[str, Any]] = field(default_factory=list)  # each change's `Change.label()`, in order

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after, "diff": self.text, "by": self.by}


@dataclass
class UndoReport:
    """What an undo did: the step it was recorded as, paths restored and removed, and those it refused."""

    session: str
    step: int
    workspace: str = ""  # the folder it acted in (the one the session recorded)
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        refused = [{"path": p, "reason": why} for p, why in self.refused]
        return {"session": self.session, "step": self.step, "workspace": self.workspace, "restored": self.restored,
                "removed": self.removed, "refused": refused}  # fmt: skip


def _open(session: str) -> tuple[CheckpointStore, str, list[dict[str, Any]]]:
    check_session(session)
    store = CheckpointStore()
    records = store.records(session)
    if not records:
        raise UserError(
            f"session {session} has no checkpoints (it changed no files, or they were dropped: checkpoint_max_mb, "
            "`hermes-local checkpoints clear`); see `hermes-local sessions show ID`"
        )
    return store, str(records[-1]["workspace"]), records


def _pin(records: list[dict[str, Any]], session: str, on_note: Note | None) -> PinnedWorkspace:
    """The session's folder, reopened by the identity its first record kept (never redirected); records written
    before identities were kept are adopted with a note."""
    folder = next((f for r in records if (f := FolderId.from_dict(r.get("folder"))) is not None), None)
    try:
        return pin_recorded(folder, str(records[-1]["workspace"]), f"session {session}", on_note)
    except WorkspaceSwapped:
        raise
    except UserError as exc:
        raise UserError(f"the workspace of session {session} cannot be opened: {exc.line}") from exc


def was_undone(session: str) -> bool:
    """Whether the session's changes stand undone now: an odd number of undo records (each redo is one too)."""
    check_session(session)
    return sum(r.get("tool") == "undo" for r in CheckpointStore().records(session)) % 2 == 1


def load_changes(store: CheckpointStore, records: list[dict[str, Any]], pin: PinnedWorkspace) -> list[Change]:
    """Every change in record order; a command cut off mid-run is compared with the workspace now."""
    out: list[Change] = []
    open_begins: dict[tuple[int, int, str], tuple[int, dict[str, Any]]] = {}
    for r in records:
        key = (int(r["step"]), int(r["call"]), str(r.get("snapshot", "")))
        if r.get("phase") == "begin":
            open_begins[key] = (len(out), r)
            continue
        if r.get("phase") == "end":
            open_begins.pop(key, None)
        by: dict[str, Any] = {
            k: r[k] for k in ("agent", "child", "child_step") if k in r
        }  # a team child's change, mirrored
        out.extend(Change(int(r["step"]), str(r["tool"]), c["path"], c["before"], c["after"], by) for c in r["changes"])
    for at, r in sorted(open_begins.values(), key=lambda pair: -pair[0]):
        now = scan(pin, Recorder(store, "", str(pin.path)), 2**62).states
        cut = changes_between(snapshot_states(store, r["snapshot"]), now)
        out[at:at] = [Change(int(r["step"]), str(r["tool"]), c["path"], c["before"], None) for c in cut]
    return out


def current_state(ctx: ToolContext, path: str) -> State:
    """The state of `path` in the workspace now (its content not kept)."""
    try:
        with locate(ctx, path, follow_leaf=False) as loc:
            return read_state(loc.dir_fd, loc.leaf, None) if loc.leaf else {"t": "dir"}
    except ToolFailure as exc:
        return dict(ABSENT) if exc.kind == "not_found" else {"t": "other"}


def session_diff(session: str, step: int | None = None, on_note: Note | None = None) -> list[FileDiff]:
    """What session `session` changed (in step `step` only, when given): one entry per changed path. `on_note`
    is told when an older session's folder is taken as it is now (it recorded no identity)."""
    if (
        not CheckpointStore().records(check_session(session))
        and (agent_home() / "sessions" / f"{session}.jsonl").exists()
    ):
        return []  # a recorded run that changed nothing
    store, _, records = _open(session)
    with _pin(records, session, on_note) as pin:
        changes = load_changes(store, records, pin)
        ctx = ToolContext(workspace=pin.path, pin=pin)
        chosen = [c for c in changes if step is None or c.step == step]
        first: dict[str, State] = {}
        last: dict[str, State] = {}
        by: dict[str, list[dict[str, Any]]] = {}
        for c in chosen:
            first.setdefault(c.path, c.before)
            last[c.path] = c.after if c.after is not None else current_state(ctx, c.path)
            if c.label() not in by.setdefault(c.path, []):
                by[c.path].append(c.label())
    diffs = [FileDiff(p, first[p], last[p], "", by[p]) for p in first if not same_state(first[p], last[p])]
    for d in diffs:
        d.text = _describe(store, d)
    return diffs


def _content(store: CheckpointStore, state: State) -> bytes | None:
    if state["t"] == "absent":
        return b""
    if state["t"] != "file" or not state.get("kept"):
        return None
    try:
        return store.get(state["sha"])
    except KeyError:
        return None


def _text(data: bytes | None) -> list[str] | None:
    if data is None or b"\x00" in data or len(data) > MAX_DIFF_BYTES:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _brief(state: State) -> str:
    if state["t"] == "file":
        sha = state.get("sha")
        return f"{state.get('size', 0)} bytes" + (f" sha256:{sha[:12]}" if sha else "")
    return {"absent": "absent", "dir": "a folder", "link": f"a symlink to {state.get('target', '')!r}"}.get(
        state["t"], "a special file"
    )


def _describe(store: CheckpointStore, d: FileDiff) -> str:
    heads = "".join(
        f"# {d.path}: changed by {b['agent']} (its step {b.get('child_step')}) in step {b['step']}\n"
        for b in d.by
        if b.get("agent")
    )  # a team child's changes are part of the run's, labelled
    return heads + _unlabelled(store, d)


def _unlabelled(store: CheckpointStore, d: FileDiff) -> str:
    old, new = _text(_content(store, d.before)), _text(_content(store, d.after))
    if old is not None and new is not None:
        a = "/dev/null" if d.before["t"] == "absent" else f"a/{d.path}"
        b = "/dev/null" if d.after["t"] == "absent" else f"b/{d.path}"
        lines = list(difflib.unified_diff(old, new, a, b))
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return f"{d.path}: {_brief(d.before)} -> {_brief(d.after)}\n"


def diff_text(diffs: list[FileDiff]) -> str:
    """The diffs as one text (unified diff for text, one line for the rest)."""
    return "".join(d.text for d in diffs)


@contextlib.contextmanager
def _session_lock(session: str) -> Iterator[None]:
    """Hold the session log's lock (session/log.py's): no undo while the run (or a resume) still writes."""
    path = agent_home() / "sessions" / f"{session}.jsonl"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise UserError(f"session {session} is in use by a running hermes-local; wait for it to finish") from exc
        yield
    finally:
        os.close(fd)


def undo_session(
    session: str, to_step: int | None = None, *, force: bool = False, redo: bool = False, on_note: Note | None = None
) -> UndoReport:
    """Restore the workspace to before step `to_step` of `session` (default: before the run). See the module doc."""
    store, _, records = _open(session)
    with _session_lock(session), _pin(records, session, on_note) as pin:
        changes = load_changes(store, records, pin)
        if redo:
            undos = [c.step for c in changes if c.tool == "undo"]
            if not undos:
                raise UserError(f"session {session} has no undo to redo; undo first with `hermes-local sessions undo`")
            to_step = max(undos)
        first = to_step if to_step is not None else min(c.step for c in changes)
        chosen = [c for c in changes if c.step >= first]
        if not chosen:
            raise UserError(
                f"session {session} changed nothing at step {first} or later; see `sessions diff {session}`"
            )
        target: dict[str, State] = {}
        for c in chosen:
            target.setdefault(c.path, c.before)
        left: dict[str, State | None] = {c.path: c.after for c in changes}
        rec = Recorder(store, session, str(pin.path), step=max(c.step for c in changes) + 1)
        rec.folder = pin.identity.to_dict()
        report = UndoReport(session, rec.step, str(pin.path))
        with rec.call("undo"):
            _restore(store, ToolContext(workspace=pin.path, pin=pin), target, left, force, report)
    return report


def _restore(
    store: CheckpointStore,
    ctx: ToolContext,
    target: dict[str, State],
    left: dict[str, State | None],
    force: bool,
    report: UndoReport,
) -> None:
    now = {p: current_state(ctx, p) for p in target}
    todo = []
    for path, want in target.items():
        have = now[path]
        if same_state(have, want) and (want["t"] != "file" or have.get("mode") == want.get("mode")):
            continue
        expected = left.get(path)
        if not force and expected is not None and not same_state(have, expected) and not same_state(have, want):
            report.refused.append((path, "changed since the run (by you or another program); --force overrides"))
            continue
        if want["t"] == "file" and _content(store, want) is None:
            report.refused.append((path, f"its previous content ({_brief(want)}) was not kept: over the size limits"))
            continue
        todo.append(path)
    depth = lambda p: p.count("/")  # noqa: E731
    for path in sorted(todo, key=depth, reverse=True):  # removals: deepest first
        have, want = now[path], target[path]
        if have["t"] != "absent" and (want["t"] != have["t"] or want["t"] == "link"):
            try:
                with locate(ctx, path, follow_leaf=False) as loc:
                    remove_leaf(loc)
                now[path] = dict(ABSENT)
                if want["t"] == "absent":
                    report.removed.append(path)
            except (OSError, ToolFailure) as exc:
                why = "it holds files the run did not make" if getattr(exc, "errno", 0) == errno.ENOTEMPTY else exc
                report.refused.append((path, f"not removed: {why}"))
    for path in sorted(todo, key=depth):  # creations: shallowest first
        want = target[path]
        if want["t"] == "absent" or (now[path]["t"] != "absent" and want["t"] != "file"):
            continue
        try:
            with locate(ctx, path, create_parents=True, follow_leaf=False) as loc:
                if want["t"] == "file":
                    mode = int(want.get("mode") or 0o644) & 0o1777  # never set-user/group-ID bits
                    write_atomically(loc, _content(store, want) or b"", mode=mode)
                else:
                    make_node(loc, want)
        except (OSError, ToolFailure) as exc:
            report.refused.append((path, f"not restored: {exc}"))
            continue
        report.restored.append(path)
