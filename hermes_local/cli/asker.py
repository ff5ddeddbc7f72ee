"""The person at the terminal: approval questions and `ask_user` prompts on stderr, answers from stdin.

`terminal_approver` is the approver of every CLI command that runs tools (`run`, `chat`, `workflow run`):
`--yes`, `--allow` and the config policy, and, when stdin is a terminal, `ask_approval` for the rest.
`ask_approval` shows an `ApprovalRequest` (its note, then `approval_view`, the one rendering the service
sends over HTTP too) and reads yes / no / always; it denies without asking when stderr is not a terminal
(the user could only answer blind) or the view is too long to review. `ask_user` is the `ask_user`
tool's prompt. Does not decide policy: `tools/approval.py` does.
"""

from __future__ import annotations

import sys

from hermes_local.config import Settings
from hermes_local.textsafe import terminal_safe
from hermes_local.tools.approval import ApprovalRequest, Approver


def ask_approval(request: ApprovalRequest) -> str:
    """Ask on stderr, read the answer from stdin: "y", "n" or "a" (always for this tool)."""
    t, out = request.tool, sys.stderr
    if request.note:
        out.write(f"\n{request.note}")
    if not out.isatty():  # the question would go to a file or pipe: the user could only answer blind
        out.write(f"\n{terminal_safe(t.name)} denied: stderr is not a terminal, so the question cannot be shown.\n")
        out.flush()
        return "n"
    if request.view is None:
        size = sum(len(str(v)) for v in request.arguments.values())
        out.write(
            f"\n{terminal_safe(t.name)} ({t.permission}) wants to run with {size} characters of arguments, too "
            f"long to review here: denied. Rerun with --allow {terminal_safe(t.name)} if you trust it.\n"
        )
        out.flush()
        return "n"
    out.write(f"\n{request.view}\n")
    while True:
        out.write("Allow? [y]es / [n]o / [a]lways for this tool: ")
        out.flush()
        answer = sys.stdin.readline()
        if not answer:
            return "n"
        answer = answer.strip().lower()[:1]
        if answer in ("y", "n", "a"):
            return answer


def ask_user(question: str) -> str:
    """The `ask_user` tool's prompt: the question on stderr, one line from stdin (empty on end of input)."""
    sys.stderr.write(f"\nThe agent asks: {terminal_safe(question)}\nyour answer> ")
    sys.stderr.flush()
    return sys.stdin.readline().strip()


def terminal_approver(settings: Settings, *, yes: bool) -> Approver:
    """Flags and config decide first; a person is asked on the terminal when stdin is one (else: denied)."""
    return Approver(
        approve_all=yes,
        allow=settings.allow_tools,  # --allow is already there (cli.common.settings_from_flags)
        deny=settings.deny_tools,
        ask=ask_approval if sys.stdin.isatty() else None,
    )
