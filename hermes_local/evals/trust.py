"""What an eval run may do: the approvals a case carries, checked against where it came from and the sandbox.

A case made from a recorded session (`export.py`) never carries an approval: the user approved a call once, for
that run, not for every replay of it. `recorded_approvals` splits what a session's calls would need into the case's
`deny` and `deny_calls` and the warnings that tell the user what to add by hand. A run rated bad replays only its
read calls: each of its other recorded calls (by name and arguments digest, `deny_calls`) is denied when the eval
meets it again, and a dangerous tool it used is denied outright (`deny`). `EvalApprover` enforces that, and refuses
every dangerous call when commands would run unsandboxed (`sandbox = off`, or bwrap missing or broken): an eval
replays model output nobody reviews, so it runs sandboxed or not at all. `denial_lines` says, for the eval's report,
which calls were refused and why. Does not run cases (`suite.py`) and prints nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hermes_local.outcome import ToolOutcome, arguments_digest
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.tools.approval import RUN_WITHOUT_ASKING, Approver
from hermes_local.tools.registry import Tool

RECORDED_BAD = "recorded_bad"  # the call is one a run rated bad made: a bad run's case replays only reads
NEEDS_SANDBOX = "needs_sandbox"  # a dangerous call in an eval with no sandbox in force


def recorded_approvals(
    outcomes: Iterable[ToolOutcome], permission: dict[str, str], verdict: str | None
) -> tuple[list[str], list[dict[str, str]], list[str]]:
    """(deny, deny_calls, warnings) for a case exported from a session's tool outcomes.

    `permission`: tool name -> read/write/dangerous for the tools the case offers. No approval is ever carried
    over; a dangerous call that worked is a warning naming what the user must add to replay it on purpose.
    A bad verdict denies every recorded call that is not a read, and each dangerous tool the run used."""
    deny: list[str] = []
    deny_calls: list[dict[str, str]] = []
    warnings: list[str] = []
    for o in outcomes:
        kind = permission.get(o.name)
        if kind is None or kind == "read":
            continue
        if verdict == "bad":
            entry = {"name": o.name, "digest": o.digest}
            if entry not in deny_calls:
                deny_calls.append(entry)
            if kind == "dangerous" and o.name not in deny:
                deny.append(o.name)
        elif kind == "dangerous" and o.ok:
            note = (
                f"the run used {o.name}, approved for that run only: the case does not approve it; add "
                f'"approve": ["{o.name}"] to replay it (an eval runs dangerous tools only in the sandbox)'
            )
            if note not in warnings:
                warnings.append(note)
    return deny, deny_calls, warnings


class EvalApprover(Approver):
    """The approver of one eval run: the case's `approve`/`deny`, its recorded bad calls, and no dangerous call
    without a sandbox. Nobody is asked; a denied call's outcome carries the reason as its `approval`."""

    def __init__(
        self,
        *,
        allow: Iterable[str],
        deny: Iterable[str],
        deny_calls: Iterable[dict[str, Any]] = (),
        sandbox: SandboxPolicy,
    ) -> None:
        super().__init__(allow=allow, deny=deny, interactive=False)
        self.deny_calls = {(str(c.get("name")), str(c.get("digest"))) for c in deny_calls}
        self.sandboxed, self.sandbox_why = sandbox.in_force()

    def refusal(self, t: Tool, arguments: dict[str, Any], workspace: Path | None = None) -> tuple[str, str] | None:
        """The eval's own refusals first (a recorded bad call, a dangerous call without a sandbox), then the
        approver's (deny list, deny rules): every way of asking (`decision`, `decide`, a plan) goes through it."""
        if (t.name, arguments_digest(t.name, arguments)) in self.deny_calls:
            return RECORDED_BAD, ""
        if t.permission == "dangerous" and not self.sandboxed:
            return NEEDS_SANDBOX, ""
        return super().refusal(t, arguments, workspace)


def denial_lines(calls: list[ToolOutcome], approver: EvalApprover) -> list[str]:
    """One line per call the eval refused, in order: `step N: NAME denied (why)`."""
    why = {
        RECORDED_BAD: "the run it came from was rated bad; its case replays only read calls",
        NEEDS_SANDBOX: f"dangerous, and no sandbox is in force ({approver.sandbox_why})",
    }
    return [_denial_line(c, why) for c in calls if c.error_kind == "permission_denied"]


def _denial_line(c: ToolOutcome, why: dict[str, str]) -> str:
    """`step N: NAME denied (why)`, or, for a call approved and then refused by the tool itself (a path outside
    the workspace), `step N: NAME refused by the tool (its reason)` rather than the approval's name."""
    if c.approval in RUN_WITHOUT_ASKING:
        reason = " ".join(str(c.error or "").split()).split(";")[0]
        return f"step {c.step}: {c.name} refused by the tool ({reason[:120]})"
    return f"step {c.step}: {c.name} denied ({why.get(c.approval, c.approval or 'not approved')})"
