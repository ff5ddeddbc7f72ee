"""Who may run `write` and `dangerous` tools: flags, the config policy, or a question on a terminal.

`read` tools always run. Denied tools (config `deny_tools`) never run. `--yes` approves all,
`--allow NAME` approves one tool. Otherwise a terminal user is asked yes / no / always; with no
terminal (piped, CI, cron) the call is denied. Does not run tools.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

from hermes_local.tools.registry import Tool

# Asked on a terminal: returns "y", "n" or "a" (always for this tool).
AskFunction = Callable[[Tool, dict[str, Any]], str]


def ask_on_terminal(t: Tool, arguments: dict[str, Any]) -> str:
    shown = json.dumps(arguments, ensure_ascii=False)
    if len(shown) > 400:
        shown = shown[:400] + "…"
    sys.stderr.write(f"\n{t.name} ({t.permission}) wants to run with {shown}\n")
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
        """(approved, how) where how is one of: read, denied_by_policy, flag, policy, user, no_terminal."""
        if t.name in self.denied:
            return False, "denied_by_policy"
        if t.permission == "read":
            return True, "read"
        if self.approve_all:
            return True, "flag"
        if t.name in self.allowed:
            return True, "policy"
        if not self.interactive:
            return False, "no_terminal"
        if note := self.notes(t):
            sys.stderr.write(f"\n{note}")
        answer = self.ask(t, arguments)
        if answer == "a":
            self.allowed.add(t.name)
        return answer in ("y", "a"), "user"
