"""Runs started over HTTP: a FIFO queue of agent runs on one shared model, with events, approvals and cancel.

`RunManager.submit()` queues a run and returns it at once; `settings.parallel` worker threads (one by default)
execute runs in arrival order through `runtime.build_agent`, exactly like `hermes-local run`: the same settings,
registry, approval rules and session log (the run id IS the session id, so `sessions show ID` and `run --resume ID`
work on it). Each run keeps the list of its events for the SSE stream (the session log's events as
`event.to_dict()`, plus `approval_request` / `approval_decision`, the tools' `notice` lines and a final `status`);
late subscribers replay it from the start. A write/dangerous call that is not pre-approved parks the run in
`waiting_approval` until `decide()` or the approval timeout (a denial); its request shows what a terminal shows
(`ApprovalRequest`: the sandbox note and the `approval_view`). `cancel()` stops a queued run at once and a running
one at its next event or token (its session log stays resumable, like a killed CLI run; the tool commands its
worker spawned are killed at once, tagged by `procs.own`, and all the server's child processes too when it is the
one run going). `shutdown()` cancels everything, kills the process groups of tool processes this server started,
and waits for the workers. `SharedModel` serializes model calls between runs and chat completions, unless the
model decodes concurrent calls together (`parallel` > 1: `batching.py`). A crashed run is logged (`logging`).
Does not speak HTTP, print, or hold agent logic.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hermes_local.config import Settings
from hermes_local.dialects.base import Dialect
from hermes_local.errors import HermesError, UserError
from hermes_local.events import Event
from hermes_local.sandbox import procs
from hermes_local.service.process import SharedModel, kill_child_process_groups
from hermes_local.session import SessionLog, new_session_id
from hermes_local.tools import Approver, ToolRegistry
from hermes_local.tools.approval import ApprovalRequest

_log = logging.getLogger(__name__)
RunStatus = Literal["queued", "running", "waiting_approval", "done", "error", "cancelled"]
FINISHED = frozenset({"done", "error", "cancelled"})
KEEP_RUNS = 200  # finished runs remembered for GET /v1/runs


class WorkspaceForbidden(UserError):
    """The run asked for a workspace outside the configured roots (HTTP 403)."""


class RunNotFound(UserError):
    """No run with that id in this server (HTTP 404)."""


class Conflict(UserError):
    """The request does not fit the run's state, e.g. an approval for a call that is not waiting (HTTP 409)."""


class RunCancelled(Exception):  # noqa: N818 - control flow: unwinds the agent loop of a cancelled run
    """Raised inside a run's event sink (or approval wait) to stop it."""


class RunRequest(BaseModel):
    """Body of `POST /v1/runs`."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=100_000)
    workspace: str | None = None
    tools: list[str] | None = None
    max_steps: int | None = Field(None, ge=1, le=100)
    tool_choice: Literal["auto", "required", "none"] | None = None
    instructions: str | None = Field(None, max_length=20_000)


@dataclass
class PendingApproval:
    """A write/dangerous call waiting for `POST /v1/runs/{id}/approvals`."""

    call: str
    request: ApprovalRequest
    done: threading.Event = field(default_factory=threading.Event)
    decision: str | None = None

    def view(self) -> dict[str, Any]:  # the whole arguments, and what a terminal shows (view None: too long)
        r, t = self.request, self.request.tool
        shown = {"note": r.note, "view": r.view}
        return {"call": self.call, "tool": t.name, "permission": t.permission, "arguments": r.arguments} | shown


class Run:
    """One run: its request, status, result and the events published so far."""

    def __init__(self, run_id: str, request: RunRequest, workspace: Path, approval_timeout: float) -> None:
        self.id = run_id
        self.request = request
        self.workspace = workspace
        self.approval_timeout = approval_timeout
        self.status: RunStatus = "queued"
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.created = time.time()
        self.started: float | None = None
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.cond = threading.Condition()
        self.pending: dict[str, PendingApproval] = {}
        self.cancel_requested = False
        self._calls = itertools.count(1)

    # -- state -----------------------------------------------------------------------------
    def publish(self, name: str, data: dict[str, Any]) -> None:
        with self.cond:
            self.events.append((name, data))
            self.cond.notify_all()

    def set_status(self, status: RunStatus) -> None:
        with self.cond:
            self.status = status
            self.cond.notify_all()

    def finish(self, status: RunStatus, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        with self.cond:
            if self.status in FINISHED:
                return
            self.status, self.result, self.error = status, result, error
            self.pending.clear()
            self.events.append(("status", {"id": self.id, "status": status, "error": error}))
            self.cond.notify_all()

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def view(self) -> dict[str, Any]:
        """The `GET /v1/runs/{id}` object."""
        with self.cond:
            return {
                "id": self.id,
                "status": self.status,
                "task": self.request.task,
                "workspace": str(self.workspace),
                "created": round(self.created, 3),
                "pending_approvals": [p.view() for p in self.pending.values()],
                "result": self.result,
                "error": self.error,
            }

    def follow(self, start: int = 0, keepalive: float = 10.0) -> Iterator[tuple[str, dict[str, Any]] | None]:
        """Every event from number `start` (0: the first), then new ones as they come, until the run has finished.

        Yields None after `keepalive` seconds without an event (so a server can ping the client).
        """
        index = max(0, start)
        while True:
            with self.cond:
                if index >= len(self.events) and not self.finished:
                    self.cond.wait(keepalive)
                batch = self.events[index:]
                index += len(batch)
                done = self.finished and index >= len(self.events)
            if not batch and not done:
                yield None
            yield from batch
            if done:
                return

    # -- hooks called from the run's worker thread ------------------------------------------
    def check_cancel(self) -> None:
        if self.cancel_requested:
            raise RunCancelled()

    def ask(self, request: ApprovalRequest) -> str:
        """The approver's `ask`: park the call until decided: "y" allows, "n" denies, "t" if nobody decides in time."""
        pending = PendingApproval(f"call-{next(self._calls)}", request)
        with self.cond:
            self.check_cancel()
            self.pending[pending.call] = pending
            self.status = "waiting_approval"
        self.publish("approval_request", pending.view() | {"timeout": self.approval_timeout})
        decided = pending.done.wait(self.approval_timeout)
        with self.cond:
            self.pending.pop(pending.call, None)
            self.check_cancel()
            self.status = "running"
        decision = pending.decision if decided and pending.decision else "timeout"
        self.publish("approval_decision", {"call": pending.call, "tool": request.tool.name, "decision": decision})
        if decision == "timeout":
            return "t"
        return "y" if decision == "allow" else "n"

    def notice(self, line: str) -> None:
        """A tool's one-line notice (e.g. commands run unsandboxed): in the run's stream, and logged."""
        _log.warning("run %s: %s", self.id, line)
        self.publish("notice", {"text": line})

    def decide(self, call: str, decision: str) -> None:
        with self.cond:
            pending = self.pending.get(call)
            if pending is None:
                waiting = ", ".join(self.pending) or "none"
                raise Conflict(f"run {self.id} has no call {call!r} waiting for approval (waiting: {waiting})")
            pending.decision = decision
            pending.done.set()

    def request_cancel(self) -> None:
        with self.cond:
            self.cancel_requested = True
            for pending in self.pending.values():
                pending.done.set()
            self.cond.notify_all()


class RunManager:
    """Queues runs and executes up to `settings.parallel` at once on the shared model (see the module docstring)."""

    def __init__(
        self,
        model: SharedModel,
        settings: Settings,
        *,
        registry: ToolRegistry,
        workspace: Path,
        db_path: Path | None = None,
        approval_timeout: float = 300.0,
        kill_children: bool = False,
        dialect: Dialect | None = None,
    ) -> None:
        self.model = model
        self.dialect = dialect  # the served model's, chosen once by `serve` (None: each run chooses it)
        self.settings = settings
        self.registry = registry
        self.workspace = workspace.resolve()
        self.roots = [self.workspace, *(Path(r).expanduser().resolve() for r in settings.workspace_roots)]
        self.db_path = db_path
        self.approval_timeout = approval_timeout
        self.kill_children = kill_children
        self.runs: collections.OrderedDict[str, Run] = collections.OrderedDict()
        self.queue: collections.deque[Run] = collections.deque()
        self.running: list[Run] = []
        self._cond = threading.Condition()
        self._closing = False
        self._workers = [
            threading.Thread(target=self._work, name=f"hermes-runs-{i}", daemon=True)
            for i in range(max(1, settings.parallel))
        ]
        for worker in self._workers:
            worker.start()

    @property
    def current(self) -> Run | None:
        """The oldest running run (None when idle)."""
        return self.running[0] if self.running else None

    # -- requests --------------------------------------------------------------------------
    def resolve_workspace(self, requested: str | None) -> Path:
        """The run's workspace: the server's by default; a folder under a configured root, else 403."""
        if requested is None:
            return self.workspace
        path = Path(requested).expanduser()
        path = (path if path.is_absolute() else self.workspace / path).resolve()
        if not any(path == root or path.is_relative_to(root) for root in self.roots):
            raise WorkspaceForbidden(
                f"workspace {requested} is not under a configured workspace root; add it to workspace_roots"
            )
        if not path.is_dir():
            raise UserError(f"workspace {requested} is not a directory")
        return path

    def registry_for(self, names: list[str] | None) -> ToolRegistry:
        """A run's own registry over the server's tools (all, or `names`); closing it leaves the server's open."""
        if names is None:
            return ToolRegistry(self.registry)
        unknown = [n for n in names if self.registry.get(n) is None]
        if unknown:
            raise UserError(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(self.registry.names())}")
        return ToolRegistry(t for t in self.registry if t.name in names)

    def submit(self, request: RunRequest) -> Run:
        workspace = self.resolve_workspace(request.workspace)
        self.registry_for(request.tools)  # reject unknown tools now, not in the background
        run = Run(new_session_id(), request, workspace, self.approval_timeout)
        with self._cond:
            if self._closing:
                raise Conflict("the server is shutting down")
            self.runs[run.id] = run
            self.queue.append(run)
            self._forget_old()
            self._cond.notify_all()
        return run

    def _forget_old(self) -> None:
        for run_id in list(self.runs):
            if len(self.runs) <= KEEP_RUNS:
                break
            if self.runs[run_id].finished:
                del self.runs[run_id]

    def get(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r} in this server; see GET /v1/runs")
        return run

    def recent(self) -> list[dict[str, Any]]:
        return [
            {"id": r.id, "status": r.status, "task": r.request.task[:200], "created": round(r.created, 3)}
            for r in reversed(self.runs.values())
        ]

    def cancel(self, run_id: str) -> Run:
        run = self.get(run_id)
        with self._cond:
            if run in self.queue:
                self.queue.remove(run)
                run.finish("cancelled", error="cancelled before it started")
                return run
        if not run.finished:
            run.request_cancel()
            procs.kill_owned(run.id)  # its running tool command ends now, not at its time limit
            if self.kill_children and self.running == [run]:
                kill_child_process_groups()  # and anything else it started (the only run going)
        return run

    def health(self) -> dict[str, Any]:
        return {
            "status": "shutting_down" if self._closing else "ok",
            "model": self.model.description,
            "n_ctx": self.model.n_ctx,
            "queue": len(self.queue),
            "running": self.current.id if self.current else None,
            "running_ids": [r.id for r in self.running],
            "parallel": len(self._workers),
        }

    # -- execution -------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self.queue and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                run = self.queue.popleft()
                self.running.append(run)
            try:
                self._execute(run)
            finally:
                with self._cond:
                    self.running.remove(run)
                    self._cond.notify_all()

    def _execute(self, run: Run) -> None:
        from hermes_local.runtime import build_agent

        req = run.request
        updates = {k: v for k, v in (("max_steps", req.max_steps), ("tool_choice", req.tool_choice)) if v is not None}
        settings = self.settings.model_copy(update=updates)
        approver = Approver(allow=settings.allow_tools, deny=settings.deny_tools, interactive=True, ask=run.ask)
        run.started = time.time()
        run.set_status("running")
        procs.own(run.id)  # the commands this worker thread spawns belong to this run (cancel kills them)
        try:
            with SessionLog(run.id) as session:

                def on_event(event: Event) -> None:
                    run.check_cancel()
                    session.log(event)
                    if event.logged:
                        run.publish(event.kind, event.to_dict())

                agent = build_agent(
                    self.model,
                    settings,
                    workspace=run.workspace,
                    registry=self.registry_for(req.tools),
                    approver=approver,
                    on_event=on_event,
                    db_path=self.db_path,
                    on_notice=run.notice,
                    dialect=self.dialect,
                    extra_instructions=req.instructions,  # after the configured rules and the routing note
                )
                with agent:
                    result = agent.run(req.task)
            result.session_id = run.id
            run.finish("error" if result.stopped == "error" else "done", result.to_json(), result.error)
        except RunCancelled:
            run.finish("cancelled", error=f"cancelled; continue with: hermes-local run --resume {run.id}")
        except HermesError as exc:
            run.finish("error", error=exc.line)
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the worker; it is logged
            _log.exception("run %s crashed", run.id)
            run.finish("error", error=f"internal error: {type(exc).__name__}: {exc}")

    # -- shutdown --------------------------------------------------------------------------
    def shutdown(self, grace: float = 10.0) -> None:
        """Cancel queued and running runs, kill tool process groups, wait up to `grace` s for the workers."""
        with self._cond:
            self._closing = True
            queued = list(self.queue)
            self.queue.clear()
            self._cond.notify_all()
        for run in queued:
            run.finish("cancelled", error="the server shut down before the run started")
        for run in list(self.running):
            run.request_cancel()
        if self.kill_children:
            kill_child_process_groups()
        deadline = time.monotonic() + grace
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
