"""What `hermes-local run` reads before it starts: the task's words (one task, `-` for stdin, `- "INSTRUCTION"` put
before the piped text), and the session a `--resume ID` / `--continue ID` goes on from (`--continue "MESSAGE"`:
this workspace's last finished run). Mistakes are one line (`fail`, exit 2). Starts no run; `run.py` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hermes_local.cli.common import fail, notice
from hermes_local.textsafe import terminal_safe


def joined(words: list[str]) -> str | None:
    """The task from TASK's words: one task, "-" (stdin), or "-" and an instruction put before the piped text."""
    if not words:
        return None
    if len(words) == 1:
        return words[0]
    if words[0] != "-" or len(words) > 2:
        fail('give the task as one quoted argument: hermes-local run "Summarise notes.txt"')
    text = sys.stdin.read().strip()
    if not text:
        fail(
            f'run - "{words[1]}" reads the text from stdin, and stdin was empty; e.g. cat notes.txt | hermes-local '
            f'run - "{words[1]}"'
        )
    return f"{words[1]}\n\n{text}"


def is_session(name: str) -> bool:
    from hermes_local.errors import UserError
    from hermes_local.session import session_path

    try:
        session_path(name)
    except UserError:
        return False
    return True


def last_run_here(workspace: Path) -> str:
    """The newest finished session that ran in `workspace` (`run --continue "MESSAGE"`), or one line."""
    from hermes_local.session import list_sessions

    here = workspace.resolve()
    found = [i for i in list_sessions() if i.end is not None and i.workspace and Path(i.workspace).resolve() == here]
    if not found:
        fail(f"no finished run in {terminal_safe(str(here))} to continue; see `hermes-local sessions list`")
    return max(found, key=lambda i: (i.modified, i.id)).id


def task_and_events(task: str | None, resume: str | None, continue_id: str | None) -> tuple[str | None, list]:
    """The task (stdin for "-") and the logged events a --resume / --continue goes on from; one line otherwise."""
    from hermes_local.session import events_to_continue, events_to_resume

    if resume and continue_id:
        fail("give --resume ID (a killed run) or --continue ID (a finished one), not both")
    if continue_id and task is None:
        fail(f'--continue {continue_id} needs the new message: hermes-local run --continue {continue_id} "..."')
    if not continue_id and (task is None) == (resume is None):
        fail("give a TASK, or --resume ID to continue a session (not both)")
    if task == "-":
        task = sys.stdin.read().strip()
        if not task:
            fail('run - reads the task from stdin, and stdin was empty; e.g. echo "Summarise it" | hermes-local run -')
    if resume:
        return task, events_to_resume(resume, on_skip=notice)
    if continue_id:
        return task, events_to_continue(continue_id, on_skip=notice)
    return task, []
