"""Who may run `write` and `dangerous` tools: flags, the config policy, or a person the caller asks.

`read` tools always run. Denied tools (config `deny_tools`) never run. `--yes` approves `write`
tools only; `dangerous` tools (`run_shell`, `http_get`, extension tools declared dangerous) need
`--allow NAME` (or config `allow_tools`, or a yes from the person asked). Otherwise the caller's
`ask` is given an `ApprovalRequest` and answers yes / no / always (the CLI asks on the terminal,
`cli/asker.py`; the service over HTTP, `service/runs.py`); with no `ask` (piped, CI, cron) the call
is denied, and the denial names the flag that would approve it. The request carries what every asker
shows: the note above the question (e.g. whether the call runs sandboxed) and `approval_view`, every
argument whole: long whitespace runs collapsed to a visible marker, control, format and bidi
characters escaped, each line of a multi-line value behind a `│` gutter so an argument cannot fake
the prompt; None when the view would be too long to review.
Does not run tools and writes nothing: the asker shows the question.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hermes_local.textsafe import collapse_runs, terminal_safe
from hermes_local.tools.registry import Tool

# Longer views are not shown (nobody reviews them): a terminal denies the call instead.
MAX_VIEW_CHARS = 20_000


def approval_view(t: Tool, arguments: dict[str, Any]) -> str | None:
    """What the person sees before answering: every argument whole and terminal-safe, or None if too long."""
    lines = [f"{terminal_safe(t.name)} ({t.permission}) wants to run with:"]
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
        shown = terminal_safe(collapse_runs(text), keep_newlines=True).replace("\t", "\\t")
        label = terminal_safe(str(key))
        if "\n" in shown or not shown.strip():
            lines.append(f"  {label} ({len(text)} characters):")
            lines.extend(f"    │ {line}" for line in shown.split("\n"))
        else:
            lines.append(f"  {label}: {shown}")
    view = "\n".join(lines)
    return view if len(view) <= MAX_VIEW_CHARS else None


@dataclass
class ApprovalRequest:
    """One question for the person who approves, the same for every asker: the call, its note and its view."""

    tool: Tool
    arguments: dict[str, Any]
    note: str = ""  # shown above the question, e.g. whether the call runs sandboxed ("" when none)
    view: str | None = field(init=False)  # `approval_view`: rendered once, None when too long to review

    def __post_init__(self) -> None:
        self.view = approval_view(self.tool, self.arguments)


# The person's answer: "y", "n", "a" (always for this tool) or "t" (nobody answered in time).
AskFunction = Callable[[ApprovalRequest], str]


class Approver:
    """Decides whether a write or dangerous call may run (flags, policy, or asking through `ask`)."""

    def __init__(
        self,
        *,
        approve_all: bool = False,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        interactive: bool | None = None,
        ask: AskFunction | None = None,
    ) -> None:
        """`ask` is who answers questions (None: nobody, calls not pre-approved are denied); `interactive=False`
        never asks even with an `ask`."""
        self.approve_all = approve_all
        self.allowed = set(allow)
        self.denied = set(deny)
        self.interactive = ask is not None and interactive is not False
        self.ask = ask
        self.notes: Callable[[Tool], str] = lambda t: ""  # e.g. whether the call runs sandboxed (runtime sets it)

    def decide(self, t: Tool, arguments: dict[str, Any]) -> tuple[bool, str]:
        """(approved, how): how is read, denied_by_policy, flag, policy, user, no_terminal, needs_allow or timeout."""
        if t.name in self.denied:
            return False, "denied_by_policy"
        if t.permission == "read":
            return True, "read"
        if self.approve_all and t.permission == "write":
            return True, "flag"
        if t.name in self.allowed:
            return True, "policy"
        if not self.interactive or self.ask is None:
            return False, "needs_allow" if t.permission == "dangerous" else "no_terminal"
        answer = self.ask(ApprovalRequest(t, dict(arguments), self.notes(t)))
        if answer == "t":
            return False, "timeout"
        if answer == "a":
            self.allowed.add(t.name)
        return answer in ("y", "a"), "user"
