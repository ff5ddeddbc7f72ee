"""The team's protocol: the `delegate(agent, task, inputs?)` tool and the `Envelope` a specialist's run returns.

`delegate_tool(specialists, runner)` is the tool the manager (and a specialist whose profile lists `delegate`) is
offered when profiles exist: `agent` is one of `specialists` (the names the prompt shows, each with its
description), so a name outside them is an invalid argument the model can fix. The tool never runs the model: it
hands the call to `runner`, injected by the front door (`runtime/assemble.py`, `agent/team.py`), which runs the
sub-run and always returns an `Envelope`, never raising. `labelled_approver` gives a sub-run the parent's approval
path with every question labelled with the specialist and its sub-task (sub-runs never approve for themselves).
`check_profiles` refuses a profile naming a tool or toolset the run does not have. Does not run agents, write logs
or print."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from hermes_local.config import Settings
from hermes_local.errors import UserError
from hermes_local.profiles import DELEGATE
from hermes_local.textsafe import terminal_safe
from hermes_local.tools.approval import ApprovalRequest, Approver
from hermes_local.tools.registry import Tool, ToolRegistry
from hermes_local.tools.toolsets import groups, parse_spec

Status = Literal["answered", "max_steps", "denied", "error"]


class Envelope(BaseModel):
    """What a delegation returns to its caller, defined once (the team protocol).

    `status`: answered, max_steps (the specialist hit its step limit), denied (a write or dangerous call of
    the specialist was denied, even if it then answered) or error (it failed: the engine, too many failed
    calls, a crash). `files_written`: workspace paths its successful writes named. `findings`: one line per
    successful call (what it found or did). `usage`: prompt, evaluated and generated tokens of the sub-run.
    """

    model_config = ConfigDict(extra="forbid")

    status: Status
    answer: str | None = None
    files_written: list[str] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)
    steps: int = 0
    usage: dict[str, int] = Field(default_factory=dict)
    outcome: str = ""  # what the evidence said of the sub-run (done, answered, unverified, failed, denied; issue 42)
    evidence: str = ""


# (agent, task, inputs) -> the envelope; the runner never raises
Runner = Callable[[str, str, dict[str, Any] | None], Envelope]


def delegate_tool(specialists: dict[str, str], runner: Runner) -> Tool:
    """The `delegate` tool over `specialists` (name -> description), run by `runner`."""
    names = tuple(sorted(specialists))
    listing = "; ".join(f"{n}: {' '.join(specialists[n].split())}" for n in names)
    model = create_model(
        "delegate_arguments",
        __config__=ConfigDict(extra="forbid"),
        agent=(Literal[names], Field(description="The specialist to hand the sub-task to.")),  # type: ignore[arg-type]
        task=(str, Field(min_length=1, max_length=8000, description="The sub-task, self-contained, in plain words.")),
        inputs=(dict[str, Any] | None, Field(None, description="Facts or values the specialist needs (optional).")),
    )

    def delegate(agent: str, task: str, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
        return runner(agent, task, inputs).model_dump()

    return Tool(
        name=DELEGATE,
        description=(
            "Hand a self-contained sub-task to a specialist agent and get back its result (status, answer, "
            f"files_written, findings, steps, usage). Specialists: {listing}."
        ),
        function=delegate,
        arguments_model=model,
        permission="read",  # its own calls are approved one by one on the same approval path as the caller's
        timeout=3600.0,  # a whole sub-run; its tools keep their own limits
        volatile=True,  # never served from the result cache
        cacheable=False,
    )


_ASK_LOCK = threading.Lock()  # concurrent delegations ask one question at a time


def labelled_approver(approver: Approver, agent: str, task: str) -> Approver:
    """The parent's approver for a sub-run: the same policy, flags, answers and asker, and each question labelled
    with the specialist and the sub-task it serves ("always" answers and allow/deny lists are shared)."""
    child = copy.copy(approver)
    ask = approver.ask
    if ask is not None:
        flat = " ".join(task.split())
        label = terminal_safe(f"Asked for specialist {agent!r}, for its sub-task: {flat[:200]}")

        def labelled(request: ApprovalRequest) -> str:
            note = "\n".join(text for text in (label, request.note) if text)
            with _ASK_LOCK:
                return ask(ApprovalRequest(request.tool, request.arguments, note))

        child.ask = labelled
    return child


def check_profiles(registry: ToolRegistry, settings: Settings) -> None:
    """One line (UserError, exit 2) for a profile naming a tool or toolset the run does not have."""
    registry_groups = groups(registry)
    for agent, entry in ((a, e) for a, p in settings.agents.items() for e in parse_spec(p.tools)):
        if entry != DELEGATE and entry not in registry_groups and registry.get(entry) is None:
            raise UserError(
                f"[agents.{agent}] tools {entry!r} is neither a toolset ({', '.join(registry_groups) or 'none'}) "
                "nor a tool; fix it in config.toml (see `hermes-local tools list`)"
            )


__all__ = ["Envelope", "Runner", "Status", "check_profiles", "delegate_tool", "labelled_approver"]
