"""`run_shell`: run one `/bin/sh -c` command in the workspace, sandboxed, limited, timed, output capped.

The command runs through `procs.spawn` in its own session, with the run's resource limits, a
parent-death signal and (where available) a pids cgroup, and registered so that Ctrl-C, SIGTERM or
exit of the agent kills it. With the sandbox in force (`sandbox/policy.py`: bwrap) it sees only the system
directories and the workspace, has no network, only the allow-listed environment variables, and lives
in its own PID namespace; with `sandbox = off` (or `auto` where bwrap does not work) it runs with the
user's rights, still limited and with the filtered environment, and a warning says so once per run
(through the caller's `ToolContext.notice`; this module writes to no terminal).
When the command exits, or when the time limit is reached, everything it started is killed: a
background child that still holds the output pipes can neither hang the agent nor outlive the call.
The command starts in the run's pinned workspace through its fd (`sandbox/workspace.py`); a workspace
swapped since the run was accepted is refused. Inside a recorded call the workspace is scanned before and
after the command, so its changes can be shown and undone (`tools/effects/snapshot.py`). Afterwards,
set-user/group-ID bits it left on workspace files are removed (a note says which). Output is read with
`select` as it arrives and only a head and a tail are kept in memory. A command stopped by a resource
limit is reported as `tool_error` naming the limit. This is a `dangerous` tool: it needs approval. Its traits
(the `shell` toolset, the goal words that call for it, a command in the sandbox that scans around itself) are on
its `@tool`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import selectors
import signal
import subprocess
import time

from hermes_local.errors import UserError
from hermes_local.outcome import ToolResult
from hermes_local.sandbox.policy import Limits, SandboxPolicy, sandboxed_command
from hermes_local.sandbox.procs import spawn
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.tools.effects import snapshot
from hermes_local.tools.effects.confined import workspace_root
from hermes_local.tools.limits import HeadTailBuffer
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool
from hermes_local.tools.traits import Cue, Toolset, Traits

_log = logging.getLogger(__name__)
# After the command exits, how long background children may keep the pipes open before they are killed.
EXIT_GRACE = 0.2
# Files whose ctime is this much before the command started still count as its own (coarse file clocks).
STRIP_MARGIN_NS = 2_000_000_000
SHELL = Toolset("shell", "run a shell command in the workspace")
GOAL_WORDS = re.compile(  # the goal words that call for it (files renamed, moved or deleted in bulk too)
    r"\b(run|execute)\b.*\b(command|script|shell)\b|\bshell\b|\b(rename|move|delete|remove)\b.*\bfiles\b|运行命令|执行"
)


def run_captured(
    command: str,
    cwd: str,
    seconds: float,
    out_cap: int,
    err_cap: int,
    policy: SandboxPolicy | None = None,
    pin: PinnedWorkspace | None = None,
) -> tuple[int | None, HeadTailBuffer, HeadTailBuffer, str | None]:
    """(exit code or None on timeout, stdout, stderr, limit hit or None). Everything started is dead on return.

    With `pin` (the run's pinned workspace) the command starts in that folder through its fd (bwrap's
    `--bind-fd`, or `/proc/PID/fd/N` as cwd), whatever `cwd` names now.
    """
    policy = policy or SandboxPolicy()
    sandboxed, _ = policy.in_force()
    # Limits, the parent-death signal and the pids cage are applied by spawn() in the child, not by argv.
    argv, env = sandboxed_command(
        ["/bin/sh", "-c", command],
        workspace=pin.path if pin else cwd,
        env_allow=policy.env_allow,
        use_bwrap=sandboxed,
        pdeathsig=False,
        workspace_fd=pin.fd if pin and sandboxed else None,
        tmp_mb=policy.limits.tmp_mb,
    )
    out = HeadTailBuffer(out_cap * 2 // 3, out_cap // 3)
    err = HeadTailBuffer(err_cap * 2 // 3, err_cap // 3)
    running = spawn(
        argv,
        cwd=pin.proc_path() if pin else cwd,
        env=env,
        limits=policy.limits,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(pin.fd,) if pin and sandboxed else (),
        confine_root=not sandboxed,  # a root command outside bwrap cannot leave its pids cgroup
    )
    proc = running.proc
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
        running.kill()
        # Drain whatever the killed processes left in the pipes, without blocking.
        for key in list(selector.get_map().values()):
            os.set_blocking(key.fd, False)
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(key.fd, 65536):
                    key.data.write(chunk)
        selector.close()
        hit = running.limit_hit()
        running.close()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    code = None if timed_out else proc.returncode
    return code, out, err, limit_reached(policy.limits, code, err.text(), cage_full=hit)


def limit_reached(limits: Limits, code: int | None, stderr: str, *, cage_full: bool = False) -> str | None:
    """Which resource limit stopped the command, judged from its exit status and error output, or None.

    Signals (SIGXCPU, SIGXFSZ) and a full pids cgroup are certain; a failed fork or allocation is read
    from the error output of a command that failed, so a program printing "Cannot allocate memory" for
    another reason is reported the same way.
    """
    signum = -code if code is not None and code < 0 else code - 128 if code is not None and 128 < code < 193 else 0
    lowered = stderr.lower()
    failed_fork = "fork" in lowered and ("resource temporarily unavailable" in lowered or "cannot fork" in lowered)
    if limits.processes and (cage_full or (code != 0 and failed_fork)):
        return f"the process limit ({limits.processes} processes) was reached"
    if limits.cpu_seconds and signum == signal.SIGXCPU:
        return f"the CPU time limit ({limits.cpu_seconds} s) was reached"
    if limits.file_size_mb and (signum == signal.SIGXFSZ or (code and "file too large" in lowered)):
        return f"the file size limit ({limits.file_size_mb} MB) was reached"
    no_memory = ("memoryerror", "cannot allocate memory", "out of memory", "bad_alloc")
    if limits.memory_mb and code and any(m in lowered for m in no_memory):
        return f"the memory limit ({limits.memory_mb} MB) was reached"
    return None


def warn_unsandboxed(ctx: ToolContext, policy: SandboxPolicy) -> None:
    """Once per run: one notice (to `ctx.notice`, else logged) when commands run without the sandbox."""
    if "unsandboxed" in ctx.warned:
        return
    ctx.warned.add("unsandboxed")
    sandboxed, why = policy.in_force()
    if not sandboxed:
        (ctx.notice or _log.warning)(f"warning: run_shell runs WITHOUT a sandbox: {why}")


@tool(
    permission="dangerous",
    repeatable=True,
    # sandboxed: the approval prompt says how the command runs; it brackets itself with the workspace scans
    traits=Traits(toolset=SHELL, cues=(Cue(30, GOAL_WORDS.search),), sandboxed=True, checkpoints_itself=True),
)
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
    policy = ctx.sandbox
    refusal = policy.refusal()
    if refusal:
        raise ToolFailure(
            "permission_denied", f"{refusal}; commands cannot run. Do without run_shell and tell the user."
        )
    warn_unsandboxed(ctx, policy)
    try:
        pin = ctx.pin or PinnedWorkspace.open(workspace_root(ctx))  # a library context: pinned for this call
        pin.check()  # a workspace swapped since the run began: refused, never followed
    except UserError as exc:
        raise ToolFailure("permission_denied", f"{exc.line}; commands cannot run.") from exc
    try:
        watch = snapshot.begin(pin)  # inside a recorded call: the workspace before the command (a checkpoint)
        since = time.time_ns() - STRIP_MARGIN_NS
        try:
            code, out, err, limit = run_captured(
                command, str(pin.path), seconds, cap * 2 // 3, cap // 3, policy, pin=pin
            )
            stripped = pin.strip_set_id(since)  # everything it started is dead: nothing can put them back
        finally:
            snapshot.end(watch, pin)  # what it changed
    finally:
        if pin is not ctx.pin:
            pin.close()
    if limit:
        partial = (out.text()[-200:] + err.text()[-200:]).strip()
        raise ToolFailure(
            "tool_error",
            f"the command hit a resource limit: {limit}; everything it started was killed. "
            "Do the work with fewer processes or less data. " + (f"Last output: {partial}" if partial else ""),
        )
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
    if stripped:
        shown = ", ".join(stripped[:5]) + (f" and {len(stripped) - 5} more" if len(stripped) > 5 else "")
        data["note"] = (data.get("note", "") + f" Set-user/group-ID bits were removed from: {shown}.").strip()
    summary = f"run_shell exit {code}" + (" (output truncated)" if truncated else "")
    if stdout.strip():
        first = " ".join(stdout.split())[:80]
        summary += f": {first}"
    if code != 0:  # a non-zero exit is a failure (✗ with its exit code) for the model, the marks, stats, outcome
        shown = "; ".join(f"{name}: {text[-600:].strip()}" for name, text in (("stdout", stdout), ("stderr", stderr)))
        error = f"the command exited with code {code} (a failure); {shown}"
        return ToolResult(False, summary.replace(f"run_shell exit {code}", f"run_shell failed: exit {code}", 1), data,
                          error, "tool_error")  # fmt: skip
    return ToolResult.success(data, summary)


TOOLS: list[Tool] = [run_shell]  # the family's tools, in the registry's order
