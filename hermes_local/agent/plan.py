"""A plan-only run's proposals: what they would change, and applying them (`run --plan`, `sessions apply`).

`plan_of(events)` reads a plan-only session back: its workspace (from `RunStart`), its `Proposal`s in order (a
team's specialists' too, each labelled and placed at the step that delegated)
and how far an earlier `sessions apply` got (`Applied` events). `proposed_changes` simulates the proposed
file writes in order on the current contents, as each built-in declares its effect (`Traits.file_effect`:
`write_file` replaces, `append_to_memo` appends its memo line exactly as the tool does) and `change_lines` renders
them as unified diffs (size and hash for what is not
UTF-8 text); `proposal_lines` lists the other proposals with their whole arguments. Every shown line is
terminal-safe. `apply_proposals` runs the proposals in order through an executor (normal approval), logging
`Applied` before and after each one: a proposal that finished ok is never run again, and one that a crash cut
off is "started, outcome unknown" (the executor asks the person, or stops with one line). `workspace_reader`
reads the current files of the folder the run recorded (by its identity: a swapped folder is refused) through the
tools' confinement. Does not print, build executors or open session logs
(the caller does).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hermes_local.errors import UserError
from hermes_local.events import Applied, Event, Proposal, RunStart, StepStart, ToolFinished, ToolOutcome
from hermes_local.outcome import ToolResult
from hermes_local.sandbox.workspace import FolderId, pin_recorded
from hermes_local.textsafe import terminal_safe
from hermes_local.tools.builtin import file_effect
from hermes_local.tools.builtin.files import current_bytes
from hermes_local.tools.execution import Executor
from hermes_local.tools.registry import ToolContext, ToolFailure

MAX_DIFF_LINES = 400  # per file; the rest is counted
Reader = Callable[[str], bytes | None]  # a workspace path -> its current bytes (None: absent)


@dataclass
class Plan:
    """A plan-only session: its workspace, its proposals (numbered from 1) and what `apply` already did."""

    session_id: str
    workspace: str
    proposals: list[Proposal]
    applied: dict[int, ToolOutcome | None] = field(default_factory=dict)  # last Applied per index (None: cut off)
    untrusted: bool = False  # the run read untrusted content before proposing (a fresh approval is needed)
    folder: FolderId | None = None  # the workspace's identity at the run's start (None: an older log)
    steps: list[int] = field(default_factory=list)  # each proposal's step in this session (a specialist's: the
    # step that delegated to it)

    def step_of(self, index: int) -> int:
        """The step of proposal `index` (from 1) in this session."""
        return self.steps[index - 1] if index <= len(self.steps) else self.proposals[index - 1].step

    def listing(self) -> list[dict[str, Any]]:
        """The proposals as `run --plan --json` and serve list them: name, arguments, and a specialist's name."""
        return [{"name": p.name, "arguments": p.arguments} | ({"agent": p.agent} if p.agent else {})
                for p in self.proposals]  # fmt: skip

    def pending(self) -> list[Proposal]:
        """The proposals an earlier `apply` did not carry out (all of them before the first apply)."""
        return [p for i, p in enumerate(self.proposals, 1) if not ((o := self.applied.get(i)) and o.ok)]


def plan_of(session_id: str, events: list[Event]) -> Plan:
    """The plan of a logged session; one line when it is no plan-only run or recorded no workspace."""
    start = next((e for e in events if isinstance(e, RunStart)), None)
    proposals: list[Proposal] = []  # also those of a `run --plan --resume ID`, and those of the team's children
    steps: list[int] = []
    step = 0
    for e in events:
        if isinstance(e, StepStart):
            step = e.step
        elif isinstance(e, Proposal):
            proposals.append(e)
            steps.append(step if e.agent else e.step)
    if start is None or not (start.plan or proposals):
        raise UserError(f"session {session_id} is not a plan-only run; start one with: hermes-local run --plan TASK")
    if not start.workspace:
        raise UserError(f"session {session_id} did not record its workspace; run the task again with --plan")
    plan = Plan(session_id, start.workspace, proposals, folder=FolderId.from_dict(start.folder), steps=steps)
    for e in events:
        if isinstance(e, Applied):
            plan.applied[e.index] = _outcome(e)
        elif isinstance(e, ToolFinished) and e.outcome.result.provenance == "untrusted":
            plan.untrusted = True
    return plan


def _outcome(e: Applied) -> ToolOutcome | None:
    """The logged outcome of an applied proposal; None (outcome unknown) while it ran, or when unreadable."""
    try:
        return ToolOutcome.from_dict(e.outcome) if e.outcome is not None else None
    except (KeyError, TypeError, ValueError):  # a tampered line: never taken for done
        return None


@contextlib.contextmanager
def workspace_reader(plan: Plan, on_note: Callable[[str], None] | None = None) -> Iterator[Reader]:
    """Reads the plan's workspace files (the folder it recorded, reopened by its identity; through the tools'
    confinement) while the block runs."""
    pin = pin_recorded(plan.folder, plan.workspace, f"session {plan.session_id}", on_note)
    try:
        context = ToolContext(workspace=pin.path, pin=pin)
        yield lambda path: current_bytes(context, path)
    finally:
        pin.close()


@dataclass
class FileChange:
    """What the proposals would make of one file: `before` (None: absent) and `after`, or why it is unknown."""

    path: str
    before: bytes | None
    after: bytes
    error: str = ""


def proposed_changes(proposals: list[Proposal], read: Reader) -> list[FileChange]:
    """The file writes among `proposals`, simulated in order on the current contents (`read`), one per file."""
    changes: dict[str, FileChange] = {}
    for p in proposals:
        effect = file_effect(p.name, p.arguments)  # known before the proposal runs
        if effect is None:
            continue
        path = posixpath.normpath(effect.path.strip() or ".")
        change = changes.get(path)
        if change is None:
            try:
                before = read(path)
            except ToolFailure as exc:
                if exc.kind != "not_found":  # a missing folder: the write creates it (and the file)
                    changes[path] = FileChange(path, None, b"", error=str(exc))
                    continue
                before = None
            change = changes[path] = FileChange(path, before, before or b"")
        if change.error:
            continue
        data = effect.text.encode("utf-8", "surrogateescape")
        change.after = change.after + data if effect.append else data
    return list(changes.values())


def _text(data: bytes | None) -> list[str] | None:
    if data is None:
        return []
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _size(data: bytes | None) -> str:
    return "absent" if data is None else f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:12]}"


def change_lines(change: FileChange) -> list[str]:
    """A unified diff of one proposed file change (terminal-safe), or its sizes and hashes when not text."""
    name = terminal_safe(change.path)
    if change.error:
        return [f"{name}: cannot be shown ({terminal_safe(change.error)})"]
    old, new = _text(change.before), _text(change.after)
    if old is None or new is None:
        return [f"{name}: binary or not UTF-8 ({_size(change.before)} -> {_size(change.after)})"]
    if old == new:
        return [f"{name}: unchanged"]
    source = "/dev/null" if change.before is None else f"a/{name}"
    lines = [line.rstrip("\n") for line in difflib.unified_diff(old, new, source, f"b/{name}")]
    shown = [terminal_safe(line) for line in lines[:MAX_DIFF_LINES]]
    more = len(lines) - len(shown)
    return shown + ([f"... {more} more diff lines"] if more > 0 else [])


def _brief(p: Proposal, key: str, value: Any) -> Any:
    """A file write's content (shown as its diff) as its size; every other argument whole."""
    effect = file_effect(p.name, p.arguments)
    long = effect is not None and key == effect.argument and isinstance(value, str) and len(value) > 80
    return f"<{len(value)} characters>" if long else value


def proposal_lines(plan: Plan) -> list[str]:
    """One line per proposal (number, step, tool, arguments whole: long text as its size), terminal-safe."""
    lines = []
    for i, p in enumerate(plan.proposals, 1):
        shown = {k: _brief(p, k, v) for k, v in p.arguments.items()}
        state = ""
        if i in plan.applied:
            done = plan.applied[i]
            state = " [applied]" if done is not None and done.ok else " [tried]"
        args = json.dumps(shown, ensure_ascii=False, default=str)
        who = f"[{terminal_safe(p.agent)}, its step {p.step}] " if p.agent else ""
        lines.append(f"{i}. step {plan.step_of(i)}: {who}{terminal_safe(p.name)}({terminal_safe(args)}){state}")
    return lines


@dataclass
class ApplyItem:
    """One proposal as `apply` left it: its number, the call, the outcome, and whether an earlier apply did it."""

    index: int
    proposal: Proposal
    outcome: ToolOutcome
    earlier: bool = False


def apply_proposals(
    plan: Plan, executor: Executor, log: Callable[[Event], None], at_step: Callable[[int], None] | None = None
) -> list[ApplyItem]:
    """Run the plan's proposals in order through `executor` (its approver decides each), logging `Applied`
    before and after each one; one that finished ok in an earlier apply is not run again (see the module doc).
    `at_step` is told each proposal's step before it runs (e.g. a checkpoint recorder's `at`)."""
    if plan.untrusted and not executor.approver.untrusted_from:  # what the model read may have steered it
        executor.approver.untrusted_from = f"a tool result of the plan-only run {plan.session_id}"
    items: list[ApplyItem] = []
    for i, p in enumerate(plan.proposals, 1):
        before = plan.applied.get(i)
        if before is not None and before.ok:
            executor.remember_done(before.digest, before.result)
            items.append(ApplyItem(i, p, before, earlier=True))
            continue
        step = plan.step_of(i)
        outcome = ToolOutcome(step, p.name, p.arguments, ToolResult(True, ""))
        if i in plan.applied and before is None:  # started by an apply that was cut off: it may have done its work
            executor.remember_unknown(outcome.digest)
        log(Applied(i))
        if at_step is not None:
            at_step(step)
        result = executor.execute(p.name, p.arguments)
        outcome = ToolOutcome(step, p.name, p.arguments, result)
        log(Applied(i, outcome.to_dict()))
        items.append(ApplyItem(i, p, outcome))
    return items
