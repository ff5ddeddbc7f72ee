"""`run_shell`: run one `/bin/sh -c` command in the workspace with a time limit and capped output.

The command runs in its own session (`start_new_session=True`), so it and everything it starts
form one process group. When the command exits, or when the time limit is reached, the whole group
is killed with SIGKILL: a background child (`sleep 30 &`) that still holds the output pipes can
neither hang the agent nor outlive the call. Output is read with `select` as it arrives and only a
head and a tail are kept in memory. This is a `dangerous` tool: it needs approval, and it is NOT a
sandbox (the command can touch anything the user can); it only bounds time and output.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time

from hermes_local.tools.confined import workspace_root
from hermes_local.tools.limits import HeadTailBuffer
from hermes_local.tools.registry import ToolContext, ToolFailure, ToolResult, tool

# After the command exits, how long background children may keep the pipes open before they are killed.
EXIT_GRACE = 0.2


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_captured(
    command: str, cwd: str, seconds: float, out_cap: int, err_cap: int
) -> tuple[int | None, HeadTailBuffer, HeadTailBuffer]:
    """(exit code or None on timeout, stdout, stderr). The process group is always dead on return."""
    out = HeadTailBuffer(out_cap * 2 // 3, out_cap // 3)
    err = HeadTailBuffer(err_cap * 2 // 3, err_cap // 3)
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.monotonic() + seconds
    exited_at: float | None = None
    selector = selectors.DefaultSelector()
    try:
        selector.register(proc.stdout, selectors.EVENT_READ, out)  # type: ignore[arg-type]
        selector.register(proc.stderr, selectors.EVENT_READ, err)  # type: ignore[arg-type]
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            stop_at = deadline if exited_at is None else min(deadline, exited_at + EXIT_GRACE)
            if now >= stop_at:
                break
            for key, _ in selector.select(timeout=min(0.05, stop_at - now)):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.write(chunk)
                else:
                    selector.unregister(key.fileobj)
        if proc.poll() is None:  # the deadline passed, or the command closed its output and kept running
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        timed_out = proc.poll() is None
    finally:
        _kill_group(proc)
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        # Drain whatever the killed processes left in the pipes, without blocking.
        for key in list(selector.get_map().values()):
            os.set_blocking(key.fd, False)
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(key.fd, 65536):
                    key.data.write(chunk)
        selector.close()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return (None if timed_out else proc.returncode), out, err


@tool(permission="dangerous", repeatable=True)
def run_shell(command: str, ctx: ToolContext) -> ToolResult:
    """Run a shell command in the workspace; returns exit code, stdout and stderr.

    Args:
        command: The command line, e.g. "ls -la".
    """
    # repeatable: commands such as "ls" or "pytest" are legitimately run again after other changes.
    if not command.strip():
        raise ToolFailure("invalid_arguments", "command is empty; give the shell command to run.")
    seconds = max(0.1, ctx.timeout - min(0.5, ctx.timeout * 0.1))
    cap = max(600, ctx.output_cap * 3 // 4)  # bytes kept from both streams; the rest of the envelope fits too
    code, out, err = run_captured(command, str(workspace_root(ctx)), seconds, cap * 2 // 3, cap // 3)
    if code is None:
        partial = (out.text()[-300:] + err.text()[-300:]).strip()
        raise ToolFailure(
            "timeout",
            f"the command did not finish within {seconds:g} s and was killed (with everything it started). "
            "Run something quicker or with a smaller input. " + (f"Last output: {partial}" if partial else ""),
        )
    stdout, stderr = out.text(), err.text()
    data: dict = {"exit_code": code, "stdout": stdout, "stderr": stderr}
    truncated = out.truncated or err.truncated
    if truncated:
        data["note"] = (
            f"output truncated ({out.total} bytes stdout, {err.total} bytes stderr; head and tail shown). "
            "Filter it, e.g. with | head, | tail or grep."
        )
    summary = f"run_shell exit {code}" + (" (output truncated)" if truncated else "")
    if stdout.strip():
        first = " ".join(stdout.split())[:80]
        summary += f": {first}"
    return ToolResult.success(data, summary)
