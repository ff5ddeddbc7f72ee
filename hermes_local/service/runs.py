"""Runs started over HTTP: a FIFO queue of agent runs on one shared model, with events, approvals and cancel.

`RunManager.submit()` queues a run (`run.Run`, owned by its creator's credential) and returns it at once, or
refuses it with `QueueFull` when `serve_max_queue` runs wait already; `settings.parallel` worker threads (one
by default) execute runs in arrival order through `runtime.build_agent`, exactly like `hermes-local run`: the
same settings, registry, approval rules and session log (the run id IS the session id, so `sessions show ID`
and `run --resume ID` work on it). `cancel()` stops a queued run at once and a running one at its next event
or token (its session log stays resumable, like a killed CLI run; the tool commands its worker spawned are
killed at once, tagged by `procs.own`, and none of them starts afterwards, not even one approved a moment
before: `procs.stop_owned`; all the server's child processes too when it is the one run going).
`shutdown()` cancels everything, kills the process groups of tool processes this server started,
and waits for the workers. `SharedModel` serializes model calls between runs and chat completions, unless the
model decodes concurrent calls together (`parallel` > 1: `engines/inprocess/batching.py`). A crashed run is
logged (`logging`). Does not speak HTTP, print, or hold agent logic.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from pathlib import Path
from typing import Any

from hermes_local.config import Settings
from hermes_local.dialects.base import Dialect
from hermes_local.errors import HermesError, UserError
from hermes_local.events import Event
from hermes_local.sandbox import procs
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.service.process import SharedModel, kill_child_process_groups
from hermes_local.service.run import Conflict, QueueFull, Run, RunCancelled, RunNotFound, RunRequest, WorkspaceForbidden
from hermes_local.session import SessionLog, new_session_id
from hermes_local.tools import Approver, ToolRegistry

_log = logging.getLogger(__name__)
KEEP_RUNS = 200  # finished runs remembered for GET /v1/runs


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
        self._pins: dict[str, PinnedWorkspace] = {}  # run id -> its workspace, opened when the POST was accepted
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
        try:
            path = Path(requested).expanduser()
            path = (path if path.is_absolute() else self.workspace / path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long, ~nobody
            raise UserError(f"workspace {requested[:200]!r} cannot be resolved: {exc.__class__.__name__}") from exc
        if not any(path == root or path.is_relative_to(root) for root in self.roots):
            raise WorkspaceForbidden(
                f"workspace {requested} is not under a configured workspace root; add it to workspace_roots"
            )
        try:
            is_dir = path.is_dir()
        except (OSError, ValueError):
            is_dir = False
        if not is_dir:
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

    def submit(self, request: RunRequest, owner: str = "") -> Run:
        """Queue a run for `owner` (the creator's credential, see `Run.check_owner`); QueueFull past the bound."""
        workspace = self.resolve_workspace(request.workspace)
        self.registry_for(request.tools)  # reject unknown tools now, not in the background
        # Pinned now, when the run is accepted: a folder swapped while it waits is refused, never followed.
        pin = PinnedWorkspace.open(workspace)
        run = Run(new_session_id(), request, pin.path, self.approval_timeout, owner)
        with self._cond:
            if self._closing:
                pin.close()
                raise Conflict("the server is shutting down")
            if len(self.queue) >= self.settings.serve_max_queue:
                waiting = len(self.queue)
                pin.close()
                raise QueueFull(f"the run queue is full ({waiting} runs waiting); retry when runs have finished")
            self._pins[run.id] = pin
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

    def recent(self, owner: str | None = None) -> list[dict[str, Any]]:
        """The remembered runs, newest first (only `owner`'s when given)."""
        return [
            {"id": r.id, "status": r.status, "task": r.request.task[:200], "created": round(r.created, 3)}
            for r in reversed(list(self.runs.values()))
            if owner is None or r.owner == owner
        ]

    def cancel(self, run_id: str) -> Run:
        run = self.get(run_id)
        with self._cond:
            if run in self.queue:
                self.queue.remove(run)
                self._unpin(run)
                run.finish("cancelled", error="cancelled before it started")
                return run
        if not run.finished:
            run.request_cancel()
            procs.stop_owned(run.id)  # its running tool command ends now, and none of its commands starts later
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
                    workspace=self._pins.get(run.id) or run.workspace,  # the pin taken at POST
                    registry=self.registry_for(req.tools),
                    approver=approver,
                    on_event=on_event,
                    db_path=self.db_path,
                    on_notice=run.notice,
                    dialect=self.dialect,
                    extra_instructions=req.instructions,  # after the configured rules and the routing note
                    session_id=run.id,  # the episode long-term memory keeps of this run
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
        finally:
            self._unpin(run)

    def _unpin(self, run: Run) -> None:
        pin = self._pins.pop(run.id, None)
        if pin is not None:
            pin.close()

    # -- shutdown --------------------------------------------------------------------------
    def shutdown(self, grace: float = 10.0) -> None:
        """Cancel queued and running runs, kill tool process groups, wait up to `grace` s for the workers."""
        with self._cond:
            self._closing = True
            queued = list(self.queue)
            self.queue.clear()
            self._cond.notify_all()
        for run in queued:
            self._unpin(run)
            run.finish("cancelled", error="the server shut down before the run started")
        for run in list(self.running):
            run.request_cancel()
        if self.kill_children:
            kill_child_process_groups()
        deadline = time.monotonic() + grace
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
