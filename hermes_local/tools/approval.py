"""Who may run `write` and `dangerous` tools: flags, the config policy, or a question on a terminal.

`read` tools always run. Denied tools (config `deny_tools`) never run. `--yes` approves `write`
tools only; `dangerous` tools (`run_shell`, `http_get`, extension tools declared dangerous) need
`--allow NAME` (or config `allow_tools`, or a yes on the terminal). Otherwise a terminal user is
asked yes / no / always; with no terminal (piped, CI, cron) the call is denied, and the denial
names the flag that would approve it. The question shows every argument whole
(`approval_view`): long whitespace runs collapsed to a visible marker, control, format and bidi
characters escaped, each line of a multi-line value behind a `│` gutter so an argument cannot
fake the prompt; when the view would be too long to review, or stderr (where the question goes) is
not a terminal, the call is denied without asking.
Does not run tools.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

from hermes_local.textsafe import collapse_runs, terminal_safe
from hermes_local.tools.registry import Tool

# Asked on a terminal: returns "y", "n" or "a" (always for this tool).
AskFunction = Callable[[Tool, dict[str, Any]], str]


# Longer views are not shown (nobody reviews them on a terminal): the call is denied instead.
MAX_VIEW_CHARS = 20_000


def approval_view(t: Tool, arguments: dict[str, Any]) -> str | None:
    """What the user sees before answering: every argument whole and terminal-safe, or None if too long."""
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


def ask_on_terminal(t: Tool, arguments: dict[str, Any]) -> str:
    if not sys.stderr.isatty():  # the question would go to a file or pipe: the user could only answer blind
        sys.stderr.write(
            f"\n{terminal_safe(t.name)} denied: stderr is not a terminal, so the question cannot be shown.\n"
        )
        return "n"
    view = approval_view(t, arguments)
    if view is None:
        size = sum(len(str(v)) for v in arguments.values())
        sys.stderr.write(
            f"\n{terminal_safe(t.name)} ({t.permission}) wants to run with {size} characters of arguments, too "
            f"long to review here: denied. Rerun with --allow {terminal_safe(t.name)} if you trust it.\n"
        )
        sys.stderr.flush()
        return "n"
    sys.stderr.write(f"\n{view}\n")
    while True:
        sys.stderr.write("Allow? [y]es / [n]o / [a]lways for this tool: ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
        if not answer:
            return "n"
        answer = answer.strip().lower()[:1]
        if answer in ("y", "n", "a"):
            return answer


class Approver:
    """Decides whether a write or dangerous call may run (flags, policy, or asking)."""

    def __init__(
        self,
        *,
        approve_all: bool = False,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        interactive: bool | None = None,
        ask: AskFunction = ask_on_terminal,
    ) -> None:
        self.approve_all = approve_all
        self.allowed = set(allow)
        self.denied = set(deny)
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self.ask = ask
        self.notes: Callable[[Tool], str] = lambda t: ""  # e.g. whether the call runs sandboxed (runtime sets it)

    def decide(self, t: Tool, arguments: dict[str, Any]) -> tuple[bool, str]:
        """(approved, how): how is read, denied_by_policy, flag, policy, user, no_terminal, needs_allow or timeout.

        `ask` answers y, n, a (always for this tool) or t (nobody answered in time, e.g. in the service).
        """
        if t.name in self.denied:
            return False, "denied_by_policy"
        if t.permission == "read":
            return True, "read"
        if self.approve_all and t.permission == "write":
            return True, "flag"
        if t.name in self.allowed:
            return True, "policy"
        if not self.interactive:
            return False, "needs_allow" if t.permission == "dangerous" else "no_terminal"
        if note := self.notes(t):
            sys.stderr.write(f"\n{note}")
        answer = self.ask(t, arguments)
        if answer == "t":
            return False, "timeout"
        if answer == "a":
            self.allowed.add(t.name)
        return answer in ("y", "a"), "user"
