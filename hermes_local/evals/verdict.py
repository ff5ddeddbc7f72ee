"""The user's verdict on a recorded run, as an exported case carries it, and suites built from rated runs.

`origin_of(events, session_id)` says where a case came from: the session, the user's verdict and note (`sessions
rate`), whether the run was undone (`tools/effects/undo.was_undone`: its checkpoints hold an undo not redone) and
which of the files it wrote the user changed later (`changed_by_user`: the current content, read through the tools'
confinement, differs from what the run left, as each built-in declares its effect (`Traits.file_effect`): the last
`write_file` content, compared by value or, when the log abbreviated it, by the call's digest; each `append_to_memo`
line must still be in the memo; a plan-only run counts the proposals `sessions apply` carried out). After an undo
the files it restored count as changed too. `regression_checks` turns a bad-rated run into what a better run must
do: its read calls, and the lines the user's own edits added to its files; `rated_sessions` finds the sessions
rated good or bad (`export.py` turns them into a suite). Does not run anything (`suite.py` does) and prints nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.errors import UserError
from hermes_local.events import Applied, Event, Proposal, RunStart, ToolFinished, ToolOutcome
from hermes_local.outcome import arguments_digest
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.session import last_rating, list_sessions, read_events
from hermes_local.tools.builtin import file_effect
from hermes_local.tools.builtin.files import current_bytes
from hermes_local.tools.effects.undo import was_undone
from hermes_local.tools.registry import ToolContext, ToolFailure

ABBREVIATED = "characters; full text in this step's assistant event]"
MAX_USER_LINES = 3  # lines of the user's own edit a regression case checks for, per file


@dataclass
class Written:
    """What the run left in one file: its whole content, a digest of the call that wrote it, or memo lines."""

    content: str | None = None
    # (tool, the argument that carries the content, digest, arguments) when the log abbreviated the content
    call: tuple[str, str, str, dict[str, Any]] | None = None
    lines: list[str] = field(default_factory=list)  # lines appended (to be found in the file)


def _writes(events: list[Event]) -> list[ToolOutcome]:
    """The run's file writes that worked, in order: its own calls and the proposals `sessions apply` ran."""
    proposals = [e for e in events if isinstance(e, Proposal)]
    done: list[ToolOutcome] = []
    for e in events:
        if isinstance(e, ToolFinished) and e.outcome.ok and e.outcome.approval != "proposed":
            done.append(e.outcome)
        elif isinstance(e, Applied) and e.outcome and e.outcome.get("ok") is True and 0 < e.index <= len(proposals):
            p = proposals[e.index - 1]  # its whole arguments
            done.append(ToolOutcome(p.step, p.name, p.arguments, ToolOutcome.from_dict(e.outcome).result))
    return [o for o in done if file_effect(o.name, o.arguments) is not None]


def written_files(events: list[Event]) -> dict[str, Written]:
    """Path (normalised, workspace-relative) -> what the run left there."""
    files: dict[str, Written] = {}
    for o in _writes(events):
        effect = file_effect(o.name, o.arguments)
        assert effect is not None  # `_writes` keeps only these
        path = posixpath.normpath(effect.path.strip() or ".")
        if effect.append:
            w = files.setdefault(path, Written())
            if w.content is not None:
                w.content += effect.text
            else:
                w.lines.extend(effect.text.splitlines())
            continue
        if effect.text.endswith(ABBREVIATED):
            files[path] = Written(call=(o.name, effect.argument, o.digest, dict(o.arguments)))
        else:
            files[path] = Written(content=effect.text)
    return files


def _differs(w: Written, current: bytes | None) -> bool:
    if current is None:
        return True
    try:
        text = current.decode("utf-8")
    except UnicodeDecodeError:
        return True
    if w.content is not None:
        return text != w.content
    if w.call is not None:
        name, argument, digest, arguments = w.call
        return arguments_digest(name, arguments | {argument: text}) != digest
    have = set(text.splitlines())
    return any(line not in have for line in w.lines)


def changed_files(workspace: str, files: dict[str, Written]) -> tuple[list[str], Callable[[str], bytes | None]]:
    """(the written files whose content is no longer what the run left, a reader of the current files)."""
    pin = PinnedWorkspace.open(Path(workspace))
    context = ToolContext(workspace=pin.path, pin=pin)
    current: dict[str, bytes | None] = {}
    try:
        for path in files:
            try:
                current[path] = current_bytes(context, path)
            except ToolFailure:
                current[path] = None
    finally:
        pin.close()
    return [p for p, w in files.items() if _differs(w, current[p])], current.get


def origin_of(events: list[Event], session_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(the case's `origin`, path -> the user's current text of each changed file) for a recorded run."""
    start = next((e for e in events if isinstance(e, RunStart)), None)
    rating = last_rating(events)
    undone = was_undone(session_id)  # `sessions undo` records itself in the checkpoints, not in the log
    origin: dict[str, Any] = {
        "session": session_id,
        "verdict": rating.verdict if rating else None,
        "note": rating.note if rating else "",
        "undone": undone,
    }
    files = written_files(events)
    edited: dict[str, str] = {}
    if start is None or not start.workspace or not files:
        origin["changed_by_user"] = [] if files == {} else None  # None: the workspace is not known
        return origin, edited
    try:
        changed, read = changed_files(start.workspace, files)
    except UserError:  # the workspace is gone (or now the agent's own)
        origin["changed_by_user"], origin["workspace_missing"] = None, True
        return origin, edited
    origin["changed_by_user"] = changed
    for path in changed:
        data = read(path)
        if data is not None:
            edited[path] = data.decode("utf-8", "replace")
    return origin, edited


def regression_checks(checks: dict[str, Any], files: dict[str, Written], edited: dict[str, str]) -> dict[str, Any]:
    """What a better run of a bad-rated task must do: the recorded read calls (not its writes or its answer)
    and, in each file the user edited afterwards, up to `MAX_USER_LINES` lines their edit added."""
    from hermes_local.tools import default_registry

    registry = default_registry()
    reads = [c for c in checks.get("tool_calls", []) if (t := registry.get(c["name"])) and t.permission == "read"]
    out: dict[str, Any] = {"tool_calls": reads}
    file_checks = []
    for path, text in edited.items():
        w = files.get(path) or Written()
        left = set((w.content or "").splitlines()) | set(w.lines)
        added = [line.strip() for line in text.splitlines() if line.strip() and line not in left]
        if added:
            file_checks.append({"path": path, "contains": added[:MAX_USER_LINES]})
    if file_checks:
        out["files"] = file_checks
    return out


def rated_sessions(verdict: str) -> list[tuple[str, list[Event]]]:
    """(id, events) of every recorded session whose last rating is `verdict`, oldest first."""
    found = []
    for info in list_sessions():
        events = read_events(info.path)
        rating = last_rating(events)
        if rating is not None and rating.verdict == verdict:
            found.append((info.id, events))
    return found
