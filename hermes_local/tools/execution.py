"""Run one validated tool call: look up, validate, approve, execute with a timeout, cap the output. Every path ends in
a `ToolResult` envelope; model mistakes (unknown tool, bad arguments) and tool failures become error results the
model can act on. Each call gets a time limit (`@tool(timeout=)` or `ToolContext.timeout`); the tool sees that
limit as `ctx.timeout` so it can stop itself and say why, and a tool that does not is abandoned shortly after.
Results longer than the context's `output_cap` are cut to a head and a tail with a notice. A write/dangerous call
repeated with identical arguments in one run returns the first result instead of running twice, unless the tool is
`repeatable` (failed calls may be retried). A write or dangerous call that timed out is "started, outcome unknown"
(it may have done its work); `remember_unknown` hands the executor such calls of a resumed run (timed out, or cut
off by a kill), and one asked for again is never re-run by itself: the person is asked (the note says why), and
with nobody to ask the run stops with one line naming the call (`HermesError`, exit 1). An unknown argument name
with exactly one close match among the tool's (`startDate` for `start_date`) is renamed, said in the result for the
model and in a notice line. Identical read calls within a run come from the `ResultCache` (`tools/cache.py`), which
any write or dangerous call clears. Every result the tool produced carries the tool's `provenance`, and the
approver sees each one (`Approver.observe`) before the next call is decided, so a dangerous call after untrusted
content is asked again. With `plan` (a plan-only run, `run --plan`) a validated write or dangerous call meets the
checks a real run makes before acting (hook, deny list and rules, the tool's `dry_run`), then is not approved or
run: it succeeds as a proposal (`approval` "proposed") recorded for review. `run_grouped` runs one turn's calls:
consecutive read calls concurrently (a bounded pool), every other call alone and in order, results in call order.
Does not parse model output or talk to the LLM, and does not sandbox tools: confinement is each tool's job (see
`tools/effects/confined.py`). With a checkpoint `Recorder` (`checkpoints`), every write or dangerous call runs as
one recorded call: what it changes in the workspace is kept before it changes it (`tools/effects/checkpoints.py`);
the call of a tool that does not checkpoint itself (`Traits.checkpoints_itself`: a tool module's, an MCP server's)
is bracketed by two workspace scans (`tools/effects/snapshot.py`). `join` makes a team's child executor part of its
caller's run.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import json
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from hermes_local.errors import HermesError
from hermes_local.outcome import ToolResult, arguments_digest
from hermes_local.tools.approval import ApprovalRequest, Approver, denial_message
from hermes_local.tools.cache import ResultCache
from hermes_local.tools.effects import confined, snapshot
from hermes_local.tools.effects.checkpoints import Recorder
from hermes_local.tools.hooks import Hooks
from hermes_local.tools.limits import clip_text
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, ToolRegistry

# Extra time given to a tool past its own limit, so tools that enforce `ctx.timeout` themselves report first.
ABANDON_GRACE = 1.0
MAX_ERROR_CHARS = 1500
MAX_PARALLEL_CALLS = 4
UNKNOWN_NOTE = (
    "This call was started before (it timed out, or the run was killed while it ran) and its outcome is "
    "unknown: it may already have done its work, and running it again may do it twice."
)
T = TypeVar("T")


@dataclass
class Executor:
    """Runs tool calls: look up, validate, approve, run with limits, one envelope."""

    registry: ToolRegistry
    context: ToolContext
    approver: Approver = field(default_factory=lambda: Approver(interactive=False))
    plan: bool = False  # a plan-only run: write/dangerous calls become proposals (see the module docstring)
    _done_writes: dict[str, ToolResult] = field(default_factory=dict)
    cache: ResultCache = field(default_factory=ResultCache)
    _unknown: set[str] = field(default_factory=set)  # digests of started calls whose outcome is unknown
    checkpoints: Recorder | None = None  # records what each write/dangerous call changes (tools/effects/checkpoints.py)
    hooks: Hooks | None = None  # the user's [[hooks]]: pre_tool may block or ask, post_tool is told (tools/hooks.py)

    def concurrent(self, name: str) -> bool:
        """Whether a call to this tool may run at the same time as other read calls of its turn."""
        t = self.registry.get(name)
        return t is None or (t.permission == "read" and not t.exclusive and not t.fresh_after_untrusted)

    def remember_done(self, digest: str, result: ToolResult) -> None:
        """Mark a write call (by `events.arguments_digest` of the call as made) as done: never run it twice.
        A resumed run's logged untrusted results count as content the run has read."""
        self._done_writes[digest] = result
        if result.provenance == "untrusted" and not self.approver.untrusted_from:
            self.approver.untrusted_from = "a tool result of the resumed run"

    def join(self, child: Executor, agent: str) -> None:
        """A team's child run is part of this one: it shares the writes done and started (a finished write is never
        repeated anywhere in the run, a resumed one included), and its checkpoint records are kept in this run's
        too, labelled with `agent` (`Recorder.parent`), so undo and diff of this run include them."""
        child._done_writes, child._unknown = self._done_writes, self._unknown
        if self.checkpoints is not None and child.checkpoints is not None:
            child.checkpoints.parent, child.checkpoints.agent = self.checkpoints, agent

    def remember_unknown(self, digest: str) -> None:
        """Mark a write call (by digest) as started with an unknown outcome: never re-run it by itself."""
        self._unknown.add(digest)

    def _unknown_again(self, t: Tool, args: dict[str, Any]) -> ToolResult | None:
        """None when the person says to run the call again; otherwise its refusal (or the run stops)."""
        approver = self.approver
        if not approver.interactive or approver.ask is None:
            shown = json.dumps(args, ensure_ascii=False, default=str)
            raise HermesError(
                f"{t.name}({clip_text(shown, 200)[0]}) was started by the run before and its outcome is unknown; "
                "check its effect, then resume on a terminal to decide whether to run it again",
                exit_code=1,
            )
        if approver.ask(ApprovalRequest(t, dict(args), UNKNOWN_NOTE)) in ("y", "a"):
            return None
        message = (
            f"{t.name} was not run again: it was started before and its outcome is unknown, and the user "
            "declined to repeat it. Check its effect (e.g. read what it writes) instead of calling it again."
        )
        return dataclasses.replace(ToolResult.failure("permission_denied", message), approval="user")

    def execute(self, name: str, arguments: dict[str, Any], *, truncated: bool = False) -> ToolResult:
        """Run one call; the result carries how it was approved (`result.approval`). `truncated` marks a
        call the decoder had to close early (issue 18): a truncated write or dangerous call is not run."""
        return self._execute(name, arguments, truncated)

    def _execute(self, name: str, arguments: dict[str, Any], truncated: bool = False) -> ToolResult:
        t = self.registry.get(name)
        if t is None:
            known = ", ".join(self.registry.names()) or "none"
            if name in self.registry.left_out:
                why = f"{name} is not available in this run: it {self.registry.left_out[name]}. Do not call it again"
                return ToolResult.failure("not_found", f"{why}; tell the user. Available tools: {known}.")
            return ToolResult.failure("not_found", f"There is no tool named {name!r}. Available tools: {known}.")
        if truncated and t.permission != "read":
            return ToolResult.failure("truncated", truncated_message(t.name, arguments), "cut off, not run")
        corrected, renamed = correct_names(t, arguments)
        try:
            validated = t.arguments_model.model_validate(corrected)
        except ValidationError as exc:
            return ToolResult.failure("invalid_arguments", _validation_message(t, exc))
        args = validated.model_dump()
        if renamed:
            note = "; ".join(f"argument {wrong!r} was read as {right!r}" for wrong, right in renamed.items())
            if self.context.notice is not None:
                self.context.notice(f"{t.name}: {note} (a misspelled argument name, corrected)")
            result = self._approved_run(t, args, arguments)
            return dataclasses.replace(result, summary=f"({note}: use the exact names next time) {result.summary}")
        return self._approved_run(t, args, arguments)

    def _approved_run(self, t: Tool, args: dict[str, Any], arguments: dict[str, Any]) -> ToolResult:
        """Approve, then serve from the cache, refuse a repeat write, or run: the validated call's result
        (`arguments` as the model wrote them: what a finished write is known by, also across a resume)."""
        if t.permission != "read" and t.traits.file_effect is not None:  # a path outside: refused as a run would,
            try:  # before approval (never a proposal, never a "not approved")
                confined.check_inside(self.context, t.traits.file_effect(args).path)
            except ToolFailure as exc:
                return ToolResult.failure(exc.kind, str(exc))
        if self.plan and t.permission != "read":
            return self._proposal(t, args)
        key = arguments_digest(t.name, arguments)
        if t.permission != "read" and key in self._unknown and t.name not in self.approver.denied:
            refused = self._unknown_again(t, args)  # asking again is this call's approval
            if refused is not None:
                return refused
            self._unknown.discard(key)
            approved, how, rule = True, "user", ""
        else:
            untrusted = bool(self.approver.untrusted_from)
            verdict, why = self.hooks.pre_tool(t, args, untrusted=untrusted) if self.hooks else ("allow", "")
            if verdict == "block":
                return hook_blocked(t.name, why)
            hook_ask = why if verdict == "ask" else ""
            approved, how, rule = self.approver.decision(t, args, self.context.workspace, hook_ask=hook_ask)
        if not approved:
            denied = ToolResult.failure("permission_denied", denial_message(t.name, how, rule))
            return dataclasses.replace(denied, approval=how, rule=rule)
        result = dataclasses.replace(self._approved(t, args, arguments, how), rule=rule)
        self.approver.observe(t, args, result)
        if self.hooks is not None:
            result = self.hooks.post_tool(t, args, result, untrusted=bool(self.approver.untrusted_from))
        return result

    def _proposal(self, t: Tool, args: dict[str, Any]) -> ToolResult:
        """A plan-only run's write or dangerous call, after the checks a real run makes before it acts (a pre_tool
        hook, the deny list and deny rules, the tool's own dry run): their refusal, else a proposal, not run.
        Asking is left to `sessions apply`, which runs the call for real."""
        untrusted = bool(self.approver.untrusted_from)
        verdict, why = self.hooks.pre_tool(t, args, untrusted=untrusted) if self.hooks else ("allow", "")
        if verdict == "block":
            return hook_blocked(t.name, why)
        refused = self.approver.refusal(t, args, self.context.workspace)
        if refused is not None:
            how, rule = refused
            denied = ToolResult.failure("permission_denied", denial_message(t.name, how, rule))
            return dataclasses.replace(denied, approval=how, rule=rule)
        if t.traits.dry_run is not None:
            try:
                t.traits.dry_run(args, self.context)
            except ToolFailure as exc:
                return ToolResult.failure(exc.kind, str(exc))
        return proposed(t.name)

    def _approved(self, t: Tool, args: dict[str, Any], arguments: dict[str, Any], how: str) -> ToolResult:
        if t.permission == "read":
            hit = self.cache.get(t, args)
            if hit is not None:
                return dataclasses.replace(hit, approval=how, provenance=t.provenance)  # the disk store drops it
        else:
            self.cache.invalidate()  # before and after: reads must not outlive a possible change
        key = arguments_digest(t.name, arguments)
        if t.permission != "read" and not t.repeatable and key in self._done_writes:
            first = self._done_writes[key]
            return dataclasses.replace(
                first, summary=f"(already done earlier in this run; not repeated) {first.summary}", approval=how
            )
        recording = self.checkpoints.call(t.name) if self.checkpoints and t.permission != "read" else None
        with recording or contextlib.nullcontext():  # the tool's thread inherits the call being recorded
            if recording is not None and not t.traits.checkpoints_itself:  # it writes by its own means
                with snapshot.scanned(self.context.pin, self.context.workspace):
                    result = cap_result(self._run(t, args, how), self.context.output_cap)
            else:
                result = cap_result(self._run(t, args, how), self.context.output_cap)
        if t.permission != "read" and result.error_kind == "timeout":
            result = unknown_outcome(t.name, result)
        if t.permission == "read":
            self.cache.put(t, args, result)
        else:
            self.cache.invalidate()
        if t.permission != "read" and (result.ok or result.error_kind == "timeout"):
            # A timed-out write may still be running in its abandoned thread: never start it twice.
            self._done_writes[key] = result
        return dataclasses.replace(result, approval=how)

    def _run(self, t: Tool, args: dict[str, Any], how: str = "") -> ToolResult:
        kwargs = dict(args)
        timeout = t.timeout or self.context.timeout
        if t.context_param:  # this call's own: its time limit, how it was approved, what the run had read before it
            tainted = bool(self.approver.untrusted_from)
            kwargs[t.context_param] = dataclasses.replace(
                self.context, timeout=timeout, approval=how, after_untrusted=tainted
            )
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = t.function(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - reported to the model as tool_error
                outcome["error"] = exc

        context = contextvars.copy_context()  # e.g. procs.own: the commands it spawns belong to this run
        worker = threading.Thread(target=context.run, args=(target,), name=f"tool-{t.name}", daemon=True)
        worker.start()
        worker.join(timeout + min(ABANDON_GRACE, timeout / 2))
        if worker.is_alive():  # our own words, trusted: the tool gave nothing back
            return ToolResult.failure(
                "timeout",
                f"{t.name} did not finish within {timeout:g} s and was abandoned. "
                "Try a smaller request, or tell the user it is too slow.",
            )
        # What the tool produced carries the tool's provenance, its failures too (they may quote what it read).
        if "error" in outcome:
            exc = outcome["error"]
            if isinstance(exc, ToolFailure):
                failed = ToolResult.failure(exc.kind, clip_text(str(exc), MAX_ERROR_CHARS)[0])
            else:
                message = clip_text(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS)[0]
                failed = ToolResult.failure("tool_error", f"{t.name} failed: {message}")
            return dataclasses.replace(failed, provenance=t.provenance)
        value = outcome.get("value")
        if isinstance(value, ToolResult):
            return value if t.traits.stamps_provenance else dataclasses.replace(value, provenance=t.provenance)
        return dataclasses.replace(ToolResult.success(value, _summarize(t.name, value)), provenance=t.provenance)


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def correct_names(t: Tool, arguments: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Arguments with each unknown name that has exactly one close match among the tool's missing ones
    renamed to it (`startDate` -> `start_date`, `pth` -> `path`), and the renames made."""
    known = list(t.parameters_schema().get("properties", {}))
    unknown = [k for k in arguments if k not in known]
    free = [k for k in known if k not in arguments]
    renamed: dict[str, str] = {}
    for key in unknown:
        same = [k for k in free if _squash(k) == _squash(key)]
        close = same or difflib.get_close_matches(key, free, n=2, cutoff=0.75)
        if len(close) == 1 and close[0] not in renamed.values():
            renamed[key] = close[0]
    if not renamed:
        return arguments, {}
    return {renamed.get(k, k): v for k, v in arguments.items()}, renamed


def hook_blocked(name: str, why: str) -> ToolResult:
    """A call a pre_tool hook blocked: the model reads the hook's reason as the result."""
    blocked = ToolResult.failure("permission_denied", f"{name} was not run: {why}. Do not retry it.")
    return dataclasses.replace(blocked, approval="hook")


def proposed(name: str) -> ToolResult:
    """What the model reads for a write/dangerous call of a plan-only run: recorded for review, not run."""
    message = (
        f"Recorded for review, not run (a plan-only run): the user will review and apply this {name} call. "
        "Go on as if it were done; do not call it again."
    )
    summary = f"proposed {name} (recorded for review, not run)"
    return ToolResult(True, summary, message, approval="proposed", provenance="trusted")


def unknown_outcome(name: str, result: ToolResult) -> ToolResult:
    """A timed-out write or dangerous call as the model and the log see it: started, outcome unknown."""
    message = (
        f"{result.error} Started, outcome unknown: {name} may have done its work before the limit. It is not "
        "run again by itself; check its effect (e.g. read what it writes) before asking for it again."
    )
    return ToolResult.failure("timeout", message, f"started, outcome unknown: {result.summary}")


def _summarize(name: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(str(text).split())
    return f"{name} -> {text[:120]}{'…' if len(text) > 120 else ''}"


def _validation_message(t: Tool, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    expected = json.dumps(t.parameters_schema().get("properties", {}), ensure_ascii=False)
    return f"Invalid arguments for {t.name}: {'; '.join(problems)}. Expected properties: {expected}"


def cap_result(result: ToolResult, cap: int) -> ToolResult:
    """Cut data longer than `cap` characters to a head and a tail, with a notice in the data and summary."""
    if not result.ok or result.data is None:
        return result
    text = result.data if isinstance(result.data, str) else json.dumps(result.data, ensure_ascii=False, default=str)
    if len(text) <= cap:
        return result
    cut, _ = clip_text(text, cap)
    return ToolResult(
        ok=True,
        data=cut,
        summary=f"{result.summary} (output truncated: {len(text)} characters, showing the first and last part)",
        provenance=result.provenance,
    )


def truncated_message(name: str, arguments: dict[str, Any]) -> str:
    """What the model reads when its write/dangerous call was cut at the output limit and not run."""
    strings = [(len(v), k) for k, v in arguments.items() if isinstance(v, str)]
    where = ""
    if strings:
        length, key = max(strings)
        where = f" Its argument {key!r} was cut after {length} characters."
    return (
        f"Your call to {name} was cut off at the output limit and was NOT run.{where} "
        "Send it again in smaller pieces: shorter arguments, split over several calls."
    )


def run_grouped(
    jobs: Sequence[Callable[[], T]],
    concurrent: Sequence[bool],
    *,
    before: Callable[[int], None] = lambda i: None,
    after: Callable[[int, T], None] = lambda i, r: None,
    max_workers: int = MAX_PARALLEL_CALLS,
) -> list[T]:
    """Run jobs in call order; a run of consecutive `concurrent` jobs runs in a bounded thread pool.

    `before(i)` is called (in order, on this thread) just before job i's group starts and `after(i,
    result)` (in order) once the group is done, so callers can log without locking.
    """
    results: list[T] = []
    i = 0
    while i < len(jobs):
        j = i + 1
        if concurrent[i]:
            while j < len(jobs) and concurrent[j]:
                j += 1
        group = range(i, j)
        for k in group:
            before(k)
        if len(group) == 1:
            done = [jobs[i]()]
        else:
            with ThreadPoolExecutor(max_workers=min(max_workers, len(group)), thread_name_prefix="calls") as pool:
                # one context copy per job (a context runs in one thread at a time), e.g. procs.own's owner
                runs = [(contextvars.copy_context(), jobs[k]) for k in group]
                done = list(pool.map(lambda pair: pair[0].run(pair[1]), runs))
        for k, r in zip(group, done, strict=True):
            after(k, r)
            results.append(r)
        i = j
    return results
