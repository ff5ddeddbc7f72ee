"""The person at the terminal: approval questions and `ask_user` prompts on stderr, answers from stdin.

`terminal_approver` is the approver of every CLI command that runs tools (`run`, `chat`, `workflow run`):
`--yes`, `--allow` and the config policy, and, when stdin is a terminal, `ask_approval` for the rest.
`ask_approval` shows an `ApprovalRequest` (its note, then `approval_view`, the one rendering the service
sends over HTTP too) and reads yes / no / always; it denies without asking when stderr is not a terminal
(the user could only answer blind) or the view is too long to review. A view taller than the terminal (or
over `LONG_VIEW_CHARS`) is shown as its size and first lines, with `v` to page through it whole, and its
first line is repeated next to the question, so a dangerous first line cannot scroll away. `ask_user` is
the `ask_user` tool's prompt. Before every question, input typed or pasted ahead is discarded
(`discard_typed_ahead`): only an answer typed after the question counts, and "always" must be the whole
word. Does not decide policy: `tools/approval.py` does.
"""

from __future__ import annotations

import os
import sys

from hermes_local.config import Settings
from hermes_local.textsafe import collapse_runs, terminal_safe
from hermes_local.tools.approval import ApprovalRequest, Approver

LONG_VIEW_CHARS = 2000  # a longer view is shown as its head, with a pager for the whole
HEAD_LINES = 12  # lines of a long view shown before the question
HEAD_LINE_CHARS = 160  # characters of each of those lines
ANSWERS = {"y": "y", "yes": "y", "n": "n", "no": "n", "always": "a"}


def discard_typed_ahead() -> None:
    """Drop input typed or pasted before the question (a terminal's pending input); answers come after it."""
    try:
        import termios
    except ImportError:  # not POSIX: no terminal queue to flush
        return
    try:
        if sys.stdin.isatty():
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (termios.error, OSError, ValueError):  # not a terminal after all, or closed: nothing to discard
        pass


def _rows() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).lines or 24  # a fresh pty says 0
    except (OSError, ValueError, AttributeError):
        return 24


def _head(request: ApprovalRequest, view: str) -> tuple[str, str]:
    """(what to show above the question, the line to repeat next to it) for a view too long to show whole."""
    lines = view.split("\n")
    head = [
        line if len(line) <= HEAD_LINE_CHARS else f"{line[:HEAD_LINE_CHARS]}… ({len(line):,} characters)"
        for line in lines[:HEAD_LINES]
    ]
    size = sum(len(str(v)) for v in request.arguments.values())
    more = f"{len(lines) - HEAD_LINES:,} more lines, " if len(lines) > HEAD_LINES else ""
    head.append(f"  … {more}{size:,} characters of arguments in all: answer v to read them whole in a pager")
    first = next((str(v) for v in request.arguments.values()), "")
    shown = terminal_safe(collapse_runs(first.strip().split("\n")[0]))
    first_line = shown if len(shown) <= 100 else shown[:100] + "…"
    return "\n".join(head), f"{terminal_safe(request.tool.name)}: {first_line}"


def _page(view: str) -> None:
    import pydoc

    try:
        pydoc.pager(view)
    except Exception:  # noqa: BLE001 - no pager: print it whole instead
        sys.stderr.write(view + "\n")


def ask_approval(request: ApprovalRequest) -> str:
    """Ask on stderr, read the answer from stdin: "y", "n" or "a" (always for this tool: the word "always")."""
    discard_typed_ahead()
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
    view = request.view
    long = len(view) > LONG_VIEW_CHARS or view.count("\n") + 8 > _rows()
    shown, first = _head(request, view) if long else (view, "")
    out.write(f"\n{shown}\n")
    while True:
        if first:
            out.write(f"  ↳ {first}\n")
        out.write(
            "Allow? [y]es / [n]o" + (" / [v]iew whole" if long else "") + " / always (this tool, the whole word): "
        )
        out.flush()
        answer = sys.stdin.readline()
        if not answer:
            return "n"
        word = answer.strip().lower()
        if long and word in ("v", "view"):
            _page(view)
        elif word in ANSWERS:
            return ANSWERS[word]
        discard_typed_ahead()  # the rest of a paste is not an answer to the question asked again


def ask_user(question: str) -> str:
    """The `ask_user` tool's prompt: the question on stderr, one line from stdin (empty on end of input)."""
    discard_typed_ahead()
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
