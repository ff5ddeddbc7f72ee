"""The user's hooks: `[[hooks]]` commands run on `pre_tool`, `post_tool`, `stop` and `session_end`.

A hook gets one JSON object on stdin, in the shape Claude Code's and goose's hooks read (so existing hooks port):
`hook_event_name` (`PreToolUse`, `PostToolUse`, `Stop`, `SessionEnd`), `session_id`, `cwd`, `tool_name`,
`tool_input`, and ours: `event`, `step`, `tool`, `arguments`, `provenance` (`untrusted` once the run has read
untrusted content), `workspace`; `post_tool` adds `tool_response` / `outcome` (the result's envelope), `stop` the
`answer` and `stopped`. It answers as those hooks do: exit 0 with nothing, or a JSON line `{"decision": "allow"}`,
allows; exit 2 (stderr is the reason) or `{"decision": "block", "reason": "..."}` blocks (Claude Code's
`hookSpecificOutput.permissionDecision` `deny` / `ask` / `allow` and `{"continue": false}` are read too);
`{"decision": "ask"}` sends the call down the normal approval path as one that must be asked. A `pre_tool` hook
fails closed: one that times out, exits with another code, or prints anything but a JSON decision blocks the call,
with one line saying why. The model reads a block's reason as the tool's result. A hook never lowers a permission:
`allow` only lets the usual approval (rules, flags, provenance) decide. A `post_tool` block adds its reason to
the result the model reads (its data becomes `{"result": ..., "hooks": [...]}`); `stop` and `session_end` hooks
are told, and their answers are logged.

Each hook runs as `/bin/sh -c COMMAND` in the command sandbox (`sandbox/policy.py`) with the workspace read-only,
the folders of absolute paths named in the command readable, and its `writable` paths writable (nothing else
outside its private /tmp); the sandbox setting, environment allow-list and limits are the run's. Every decision is
a `HookRan` event in the session log, with the hook's name (`sessions show`, `stats`). Does not decide approval.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hermes_local.events import Event, HookRan, RunEnd, StepStart
from hermes_local.outcome import ToolResult
from hermes_local.sandbox.policy import SandboxPolicy, sandboxed_command
from hermes_local.sandbox.procs import spawn
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.shaping import HookConfig
from hermes_local.tools.limits import clip_text
from hermes_local.tools.registry import Tool

CLAUDE_NAMES = {"pre_tool": "PreToolUse", "post_tool": "PostToolUse", "stop": "Stop", "session_end": "SessionEnd"}
DECISIONS = {"allow": "allow", "approve": "allow", "block": "block", "deny": "block", "ask": "ask"}
MAX_REASON, MAX_OUTPUT = 500, 64_000


def _one_line(text: str) -> str:
    return clip_text(" ".join(text.split()), MAX_REASON)[0]


def parse_answer(code: int | None, stdout: str, stderr: str, timeout: float) -> tuple[str, str]:
    """(decision, reason) from a hook's exit code and output: allow, block, ask, or error (it failed to answer)."""
    if code is None:
        return "error", f"did not answer within {timeout:g} s"
    if code == 2:
        return "block", _one_line(stderr) or "exit status 2"
    if code != 0:
        tail = _one_line(stderr)
        return "error", f"failed with exit status {code}" + (f": {tail}" if tail else "")
    text = stdout.strip()
    if not text:
        return "allow", ""
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = json.loads(text.splitlines()[-1])
        except ValueError:
            return "error", f"printed something that is not a JSON decision: {_one_line(text)[:120]!r}"
    if not isinstance(data, dict):
        return "error", "printed JSON that is not an object"
    specific = data.get("hookSpecificOutput")
    if isinstance(specific, dict) and "permissionDecision" in specific:
        word, reason = specific.get("permissionDecision"), specific.get("permissionDecisionReason")
    elif data.get("continue") is False:
        word, reason = "block", data.get("stopReason")
    else:
        word, reason = data.get("decision", "allow"), data.get("reason")
    decision = DECISIONS.get(word) if isinstance(word, str) else None
    if decision is None:
        return "error", f"answered an unknown decision {str(word)[:40]!r} (allow, block or ask)"
    return decision, _one_line(reason) if isinstance(reason, str) else ""


def home_paths(command: str) -> str:
    """The command with each `~/` that starts a word spelled out: inside the sandbox HOME is its private /tmp."""
    home = os.path.expanduser("~")
    return re.sub(r"(?<![^\s'\"=])~/", lambda _: home.rstrip("/") + "/", command)


def readable_dirs(command: str) -> list[str]:
    """The folders of the absolute paths a command names (its script), made readable in the sandbox."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    out = []
    for word in words:
        path = os.path.expanduser(word)
        if os.path.isabs(path) and os.path.exists(path):
            folder = path if os.path.isdir(path) else os.path.dirname(path)
            if folder not in out and folder != "/":
                out.append(folder)
    return out


def writable_paths(paths: list[str]) -> list[str]:
    """A hook's `writable` paths, each created empty when missing (bwrap binds only what exists)."""
    out = []
    for raw in paths:
        path = os.path.expanduser(raw)
        if not os.path.exists(path) and os.path.isdir(os.path.dirname(path) or "."):
            Path(path).touch()
        out.append(path)
    return out


def run_hook(hook: HookConfig, payload: dict[str, Any], policy: SandboxPolicy, pin: PinnedWorkspace) -> tuple[str, str]:
    """Run one hook on `payload`: (decision, reason) as `parse_answer` reads it; a sandbox that must be there and is
    not is an error (nothing runs)."""
    refusal = policy.refusal()
    if refusal:
        return "error", refusal
    sandboxed, _ = policy.in_force()
    command = home_paths(hook.command)
    argv, env = sandboxed_command(
        ["/bin/sh", "-c", command],
        workspace=pin.path,
        writable=False,
        env_allow=policy.env_allow,
        use_bwrap=sandboxed,
        pdeathsig=False,
        workspace_fd=pin.fd if sandboxed else None,
        tmp_mb=policy.limits.tmp_mb,
        extra_ro=readable_dirs(command),
        extra_rw=writable_paths(hook.writable),
    )
    running = spawn(
        argv, cwd=pin.proc_path(), env=env, limits=policy.limits, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, pass_fds=(pin.fd,) if sandboxed else (), confine_root=not sandboxed,
    )  # fmt: skip
    data = json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
    try:
        code, out, err = exchange(running.proc, data, hook.timeout)
    finally:
        running.close()
    return parse_answer(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), hook.timeout)


def exchange(proc: subprocess.Popen, data: bytes, timeout: float) -> tuple[int | None, bytes, bytes]:
    """Write `data` to the process's stdin and read its stdout and stderr (each kept to `MAX_OUTPUT` bytes, the rest
    read and dropped) until it exits or `timeout` passes: (exit code or None, stdout, stderr)."""

    def feed() -> None:
        with contextlib.suppress(OSError, ValueError):  # a hook that does not read its stdin closes the pipe
            assert proc.stdin is not None
            proc.stdin.write(data)
            proc.stdin.close()

    threading.Thread(target=feed, name="hook-stdin", daemon=True).start()
    kept: dict[Any, bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for pipe in kept:
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return None, bytes(kept[proc.stdout]), bytes(kept[proc.stderr])
            for key, _ in selector.select(min(left, 0.1)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                kept[key.fileobj] += chunk[: max(0, MAX_OUTPUT - len(kept[key.fileobj]))]
    try:
        code: int | None = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        code = None
    return code, bytes(kept[proc.stdout]), bytes(kept[proc.stderr])


class Hooks:
    """A run's hooks: runs them on their events, logs each decision, and tells the executor what `pre_tool` said."""

    def __init__(
        self, hooks: list[HookConfig], policy: SandboxPolicy, pin: PinnedWorkspace, session: str,
        emit: Callable[[Event], None] | None) -> None:  # fmt: skip
        self.hooks, self.policy, self.pin, self.session, self.emit = hooks, policy, pin, session, emit
        self.step = 0
        self._lock = threading.Lock()  # reads of one turn run concurrently: their hook events one at a time
        self._ended = False

    def _run(self, event: str, payload: dict[str, Any], tool: str = "") -> list[tuple[str, str, str]]:
        """(hook, decision, reason) of each hook for `event` that matches `tool`, in config order; logged."""
        base = {
            "hook_event_name": CLAUDE_NAMES[event], "event": event, "session_id": self.session, "step": self.step,
            "cwd": str(self.pin.path), "workspace": str(self.pin.path),
        }  # fmt: skip
        out = []
        for hook in self.hooks:
            matched = not tool or not hook.match or any(fnmatch.fnmatchcase(tool, m) for m in hook.match)
            if hook.event != event or not matched:
                continue
            try:
                decision, reason = run_hook(hook, base | payload, self.policy, self.pin)
            except OSError as exc:
                decision, reason = "error", f"could not start: {exc.strerror or exc}"
            out.append((hook.label, decision, reason))
            with self._lock:
                if self.emit is not None:
                    self.emit(HookRan(self.step, hook.label, event, tool, decision, reason))
            if event == "pre_tool" and decision in ("block", "error"):
                break  # blocked: later hooks are not asked
        return out

    def _call(self, t: Tool, arguments: dict[str, Any], untrusted: bool) -> dict[str, Any]:
        provenance = "untrusted" if untrusted else "trusted"
        return {"tool_name": t.name, "tool_input": arguments, "tool": t.name, "arguments": arguments,
                "provenance": provenance}  # fmt: skip

    def pre_tool(self, t: Tool, arguments: dict[str, Any], *, untrusted: bool) -> tuple[str, str]:
        """("allow" | "block" | "ask", reason) for a call about to be approved; a failed hook blocks."""
        asks = []
        for label, decision, reason in self._run("pre_tool", self._call(t, arguments, untrusted), t.name):
            if decision == "error":
                return "block", f"the hook {label} {reason}, so the call is blocked (hooks fail closed)"
            if decision == "block":
                return "block", f"the hook {label} blocked it" + (f": {reason}" if reason else "")
            if decision == "ask":
                asks.append(f"The hook {label} asks for this call" + (f": {reason}" if reason else "."))
        return ("ask", "\n".join(asks)) if asks else ("allow", "")

    def post_tool(self, t: Tool, arguments: dict[str, Any], result: ToolResult, *, untrusted: bool) -> ToolResult:
        """The result the model reads: a blocking hook's reason added to it (its data wrapped, its error extended)."""
        envelope = result.envelope()
        payload = self._call(t, arguments, untrusted) | {"tool_response": envelope, "outcome": envelope}
        notes = [f"hook {label}: {reason or 'blocked'}" for label, decision, reason in self._run(
            "post_tool", payload, t.name) if decision == "block"]  # fmt: skip
        if not notes:
            return result
        data = {"result": result.data, "hooks": notes} if result.ok else result.data  # what the model reads
        error = f"{result.error} ({'; '.join(notes)})" if result.error else result.error
        return replace(result, data=data, error=error, summary=f"{result.summary} ({'; '.join(notes)})")

    def watch(self, sink: Callable[[Event], None] | None) -> Callable[[Event], None]:
        """An event sink that learns each step and runs the `stop` hooks before a run's end event is passed on."""

        def observed(event: Event) -> None:
            if isinstance(event, StepStart):
                self.step = event.step
            elif isinstance(event, RunEnd):
                self._run("stop", {"answer": event.answer, "stopped": event.stopped})
            if sink is not None:
                sink(event)

        return observed

    def session_end(self) -> None:
        """Run the `session_end` hooks once (the run's closer)."""
        if not self._ended:
            self._ended = True
            self._run("session_end", {})
