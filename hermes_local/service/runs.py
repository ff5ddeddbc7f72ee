"""Runs started over HTTP: a FIFO queue of agent runs on one shared model, with events, approvals and cancel.

`RunManager.submit()` queues a run (`run.Run`, owned by its creator's credential) and returns it at once, or
refuses it with `QueueFull` when `serve_max_queue` runs wait already; up to `settings.parallel` runs (one by
default) execute at once, in arrival order, each in its own thread, through `runtime.start_run`, exactly like
`hermes-local run`: the same settings, registry, approval rules and session log (the run id IS the session id,
so `sessions show ID` and `run --resume ID` work on it). No stall: a run holds one of the `parallel` slots
while it works; waiting for approval it gives its slot back (the next queued run starts, on the same model)
and takes one again, before any queued run, once the call is decided or timed out; at most `serve_max_queue`
runs wait so (past that a waiting run keeps its slot, so threads stay bounded). Runs submitted with
`unattended=ALLOW` (schedules) never ask anyone: a write/dangerous call not in ALLOW is denied, as with no
terminal. `cancel()` stops a queued run at once and a running one at its next event
or token (its session log stays resumable, like a killed CLI run; the tool commands its worker spawned are
killed at once, tagged by `procs.own`, and none of them starts afterwards, not even one approved a moment
before: `procs.stop_owned`; all the server's child processes too when it is the one run going).
The model's streamed tokens go to the run's stream as coalesced `token` events (`Run.token`).
`rate()` stores the user's verdict on a finished run in its session log. `shutdown()` cancels everything, kills
the process groups of tool processes this server started, and waits for the runs' threads. `SharedModel`
serializes model calls between runs and chat completions, unless the model decodes concurrent calls together
(`parallel` > 1: `engines/inprocess/batching.py`). A crashed run is logged (`logging`).
Does not speak HTTP, print, or hold agent logic.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

from hermes_local.config import Settings
from hermes_local.dialects.base import Dialect
from hermes_local.errors import Conflict, HermesError, QueueFull, RunNotFound, UserError, WorkspaceForbidden
from hermes_local.events import Event
from hermes_local.longterm import LOCAL_OWNER, LongTermMemory, Scope
from hermes_local.sandbox import procs
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.service.process import SharedModel, kill_child_process_groups
from hermes_local.service.run import Run, RunCancelled, RunRequest
from hermes_local.session import new_session_id, rate_session
from hermes_local.tools import Approver, ToolRegistry
from hermes_local.tools.approval import ApprovalRequest

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
        self.parallel = max(1, settings.parallel)
        self._active = 0  # runs holding a slot (working, not waiting for a person)
        self._parked = 0  # runs that gave their slot back while they wait for approval
        self._resuming = 0  # decided runs waiting to take a slot back (they go before the queue)
        self._threads: set[threading.Thread] = set()  # one per started run
        self._workers = [threading.Thread(target=self._work, name="hermes-runs", daemon=True)]
        for worker in self._workers:
            worker.start()

    @property
    def current(self) -> Run | None:
        """The oldest running run (None when idle)."""
        return self.running[0] if self.running else None

    # -- requests --------------------------------------------------------------------------
    def resolve_workspace(self, requested: str | None) -> Path:
        """The run's workspace: the server's by default; a folder under a configured root, else 403 (a schedule's
        folder, set by the local user, comes pinned by its identity instead: `submit(pin=)`)."""
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
        """A run's own registry over the server's tools (all, or `names`), with their sources (toolsets); closing it
        leaves the server's open."""
        unknown = [n for n in names or [] if self.registry.get(n) is None]
        if unknown:
            raise UserError(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(self.registry.names())}")
        return self.registry.subset(self.registry.names() if names is None else names, share_cleanup=False)

    def submit(
        self,
        request: RunRequest,
        owner: str = "",
        *,
        unattended: list[str] | None = None,
        pin: PinnedWorkspace | None = None,
    ) -> Run:
        """Queue a run for `owner` (the creator's credential, see `Run.check_owner`); QueueFull past the bound.
        `unattended`: nobody is asked; only these write/dangerous tools run (a schedule's allow-list). `pin`: the
        folder already opened by its recorded identity (a schedule's, in any folder of the local user's); the run
        owns it from here."""
        try:
            self.registry_for(request.tools)  # reject unknown tools now, not in the background
        except BaseException:
            if pin is not None:
                pin.close()
            raise
        if pin is None:
            # Pinned now, when the run is accepted: a folder swapped while it waits is refused, never followed.
            pin = PinnedWorkspace.open(self.resolve_workspace(request.workspace))
        run = Run(new_session_id(), request, pin.path, self.approval_timeout, owner)
        run.unattended = unattended
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
            with self._cond:
                self._cond.notify_all()  # a cancelled run waiting to take a slot back unwinds at once
            procs.stop_owned(run.id)  # its running tool command ends now, and none of its commands starts later
            if self.kill_children and self.running == [run]:
                kill_child_process_groups()  # and anything else it started (the only run going)
        return run

    def rate(self, run: Run, verdict: str, note: str) -> dict[str, Any]:
        """Record the user's verdict on a finished run in its session log (as `sessions rate` does)."""
        if not run.finished:
            raise Conflict(f"run {run.id} has not finished; rate it once it has")
        rating = rate_session(run.id, verdict, note)
        with contextlib.closing(LongTermMemory(scope=Scope(owner=run.owner or LOCAL_OWNER))) as memory:
            memory.rated(run.id, rating.verdict)  # a bad run's episode (its owner's) is never recalled
        return {"id": run.id, "verdict": rating.verdict, "note": rating.note}

    def health(self) -> dict[str, Any]:
        return {
            "status": "shutting_down" if self._closing else "ok",
            "model": self.model.description,
            "n_ctx": self.model.n_ctx,
            "queue": len(self.queue),
            "running": self.current.id if self.current else None,
            "running_ids": [r.id for r in self.running],
            "waiting_approval": self._parked,
            "parallel": self.parallel,
        }

    # -- execution -------------------------------------------------------------------------
    def _work(self) -> None:
        """Start queued runs, in order, each in its own thread, while a slot is free and no decided run waits."""
        while True:
            with self._cond:
                while not self._closing and not (self.queue and self._active < self.parallel and not self._resuming):
                    self._cond.wait()
                if self._closing:
                    return
                run = self.queue.popleft()
                self.running.append(run)
                self._active += 1
                thread = threading.Thread(target=self._go, args=(run,), name=f"hermes-run-{run.id}", daemon=True)
                self._threads.add(thread)
            thread.start()

    def _go(self, run: Run) -> None:
        try:
            self._execute(run)
        finally:
            with self._cond:
                self.running.remove(run)
                self._active -= 1
                self._threads.discard(threading.current_thread())
                self._cond.notify_all()

    def _asking(self, run: Run) -> Any:
        """The run's approval question, asked without its slot: other runs go on while a person decides."""

        def ask(request: ApprovalRequest) -> str:
            with self._cond:
                parked = self._parked < self.settings.serve_max_queue  # else it keeps its slot (bounded threads)
                if parked:
                    self._parked += 1
                    self._active -= 1
                    self._cond.notify_all()
            try:
                return run.ask(request)
            finally:
                if parked:
                    self._take_slot(run)

        return ask

    def _take_slot(self, run: Run) -> None:
        with self._cond:
            self._parked -= 1
            self._resuming += 1
            try:
                while self._active >= self.parallel and not (self._closing or run.cancel_requested):
                    self._cond.wait(1.0)
            finally:
                self._resuming -= 1
                self._active += 1
                self._cond.notify_all()

    def _execute(self, run: Run) -> None:
        from hermes_local.runtime import Model, RunSpec, Sinks, start_run

        req = run.request
        updates = {k: v for k, v in (("max_steps", req.max_steps), ("tool_choice", req.tool_choice)) if v is not None}
        if run.unattended is not None:  # a schedule: nobody to ask, only its own allow-list runs
            approver = Approver(allow=run.unattended, deny=self.settings.deny_tools)
        else:
            approver = Approver(
                allow=self.settings.allow_tools, deny=self.settings.deny_tools, interactive=True, ask=self._asking(run)
            )

        def publish(event: Event) -> None:
            if event.logged or event.kind == "child_event":  # a specialist's event, tagged with its agent
                run.publish(event.kind, event.to_dict())

        sinks = Sinks(display=publish, tokens=run.token, guard=run.check_cancel)
        run.started = time.time()
        run.set_status("running")
        procs.own(run.id)  # the commands this worker thread spawns belong to this run (cancel kills them)
        try:
            spec = RunSpec(
                task=req.task,
                settings=self.settings,
                overrides=updates,
                workspace=self._pins.get(run.id) or run.workspace,  # the pin taken at POST
                owner=run.owner,
                tools=self.registry_for(req.tools),
                approver=approver,
                plan=req.plan,  # plan-only: proposals for `hermes-local sessions apply ID`
                team=req.team,  # a router model picks the toolsets among the ones this run has
                db=self.db_path,
                session_id=run.id,  # the run id IS the session id: checkpoints (GET /v1/runs/ID/diff), the episode
                instructions=req.instructions,  # after the configured rules and the routing note
                on_notice=run.notice,
            )
            with start_run(spec, Model(self.model, self.dialect), sinks) as handle:
                result = handle.run()
            data = result.to_json()
            if req.plan:  # what `hermes-local sessions apply ID` would run, in order
                data["proposals"] = handle.proposals(result)  # a team's specialists' included
            run.finish("error" if result.stopped == "error" else "done", data, result.error)
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
        with self._cond:
            threads = [*self._workers, *self._threads]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
