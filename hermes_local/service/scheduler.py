"""Running schedules unattended: `Scheduler` fires due schedules (in `serve` and in `schedule daemon`).

`tick()` looks at every schedule (`schedules.scan`) and starts a thread for each one that is due; a broken one
(a file that does not load, a cron with no next time) is skipped and reported once per change of its file; `run_forever`
ticks every `poll` seconds (and once at once, so a run missed while nothing ran goes at the next start, once,
and says so). `fire(name)` takes the schedule's lock without waiting (a run of it still going: this one is
skipped and reported; `run-now` is refused), re-reads the schedule under the lock (another process may have
handled that time already), records the time as handled, and runs it in the folder the schedule recorded when it
was added (reopened by its identity; one swapped since, or a schedule without an identity, is a failed and reported
run, never redirected): a task as an ordinary run of the
`RunManager` (its session is the run id: `sessions show`, the page and resume work on it) with
`unattended=` the schedule's allow-list, so nobody is ever waited for and every write/dangerous call outside
it is denied; a workflow through `workflow.run.run_workflow` with a non-asking approver. The outcome (session,
status, the denied calls, a missed-run note) goes into the schedule's file and one line to `on_line`.
`serving_manager` loads the model once and builds the manager for `schedule daemon|run-now`. Does not parse
cron (`schedules.py`), speak HTTP or print.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_local.config import Settings
from hermes_local.errors import HermesError, QueueFull, UserError
from hermes_local.sandbox.workspace import FolderId, PinnedWorkspace
from hermes_local.service import schedules
from hermes_local.service.run import RunRequest
from hermes_local.service.runs import RunManager
from hermes_local.service.schedules import Schedule, ScheduleLock
from hermes_local.textsafe import terminal_safe
from hermes_local.tools import Approver, ToolRegistry

Line = Callable[[str], None]


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


class Scheduler:
    """Fires the schedules kept under `$HERMES_LOCAL_HOME/schedules/` on `manager` (see the module docstring)."""

    def __init__(self, manager: RunManager, *, on_line: Line = lambda line: None, poll: float = 20.0) -> None:
        self.manager = manager
        self.on_line = on_line
        self.poll = poll
        self.stopping = threading.Event()
        self._busy: dict[str, float] = {}  # schedule -> the due time reported as skipped (reported once)
        self._threads: list[threading.Thread] = []
        self._broken: dict[str, tuple[int, int]] = {}  # schedule -> the file version reported as broken

    # -- when ------------------------------------------------------------------------------
    def tick(self, now: float | None = None) -> list[threading.Thread]:
        """Start a run of every due schedule (each in its own thread); returns the threads started."""
        now = time.time() if now is None else now
        started = []
        good, broken = schedules.scan(now)
        self._report_broken(broken)
        for schedule in good:
            if schedules.due(schedule, now) is None:
                continue
            thread = threading.Thread(
                target=self._fire_quietly, args=(schedule.name, now), name=f"hermes-schedule-{schedule.name}"
            )
            thread.start()
            started.append(thread)
        self._threads = [t for t in self._threads if t.is_alive()] + started
        return started

    def _report_broken(self, broken: list[schedules.Broken]) -> None:
        """One line for each broken schedule file, once per change of the file (not at every tick)."""
        now = {b.name: b.version for b in broken}
        for b in broken:
            if self._broken.get(b.name) != b.version:
                self.on_line(f"{b.line}; the other schedules still run")
        self._broken = now

    def run_forever(self) -> None:
        """Tick now and every `poll` seconds until `stop()`."""
        while not self.stopping.is_set():
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - one bad look (a full disk, a bug) must not end the schedules
                self.on_line(f"schedules: {type(exc).__name__}: {exc}"[:300])
            self.stopping.wait(self.poll)

    def stop(self, grace: float = 10.0) -> None:
        self.stopping.set()
        deadline = time.monotonic() + grace
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- what ------------------------------------------------------------------------------
    def _fire_quietly(self, name: str, now: float) -> None:
        try:
            self.fire(name, now)
        except HermesError as exc:
            self.on_line(f"schedule {name}: {exc.line}")

    def fire(self, name: str, now: float | None = None) -> Schedule | None:
        """Run schedule `name`: for its due time at `now`, or at once (`now` None: run-now). The schedule as it
        ended; None when nothing ran (not due any more, or a run of it still going)."""
        lock = ScheduleLock(name)
        if not lock.acquire():
            if now is None:
                raise UserError(f"schedule {name} is running now; wait for that run to finish")
            found = schedules.due(schedules.get(name), now)
            if found and self._busy.get(name) != found[0]:
                self._busy[name] = found[0]
                self.on_line(f"schedule {name}: its {_when(found[0])} run waits: the previous run is still going")
            return None
        try:
            schedule = schedules.get(name)  # again, under the lock
            note = ""
            if now is not None:
                found = schedules.due(schedule, now)
                if found is None:
                    return None
                schedule.last_due, missed = found
                if missed is not None:
                    first, last = _when(missed), _when(found[0])
                    which = f"run of {first}" if missed == found[0] else f"runs from {first} to {last}"
                    note = f"missed {which} (nothing ran then), run once at {_when(now)}"
            schedule.last_started, schedule.last_status, schedule.last_session = time.time(), "running", None
            schedule.last_note = note or None
            schedules.save(schedule)
            if note:
                self.on_line(f"schedule {name}: {note}")
            try:
                session, status, denied = self._launch(schedule, note)
            except HermesError as exc:
                session, status, denied, note = None, "error", [], exc.line
            schedule.last_session, schedule.last_status = session, status
            schedule.last_note = "; ".join(part for part in (note, _denied_note(name, denied)) if part) or None
            schedules.save(schedule)
            self.on_line(_summary(schedule))
            return schedule
        finally:
            lock.release()

    def _launch(self, schedule: Schedule, note: str) -> tuple[str | None, str, list[str]]:
        """(session id, status, names of the denied calls) of one unattended run of `schedule`, in the folder it
        recorded when added (reopened by its identity: a folder swapped since is refused, never redirected)."""
        folder = recorded_folder(schedule)
        if schedule.workflow is not None:
            return self._workflow(schedule, folder)
        options: dict[str, Any] = {"max_steps": schedule.max_steps, "tool_choice": schedule.tool_choice}
        options["instructions"] = schedule.instructions
        request = RunRequest.model_validate({"task": schedule.task or "", "workspace": schedule.workspace} | options)
        pin = PinnedWorkspace.reopen(folder, f"schedule {schedule.name}")
        try:
            run = self.manager.submit(request, unattended=list(schedule.allow), pin=pin)
        except QueueFull as exc:
            return None, "skipped", [exc.line]
        if note:
            run.notice(note)
        with run.cond:
            while not run.finished:
                run.cond.wait(1.0)
        result = run.result or {}
        denied = [c["name"] for c in result.get("tool_calls", []) if c.get("error_kind") == "permission_denied"]
        status = str(result.get("stopped") or run.status)
        return run.id, status if run.status != "cancelled" else "cancelled", denied

    def _workflow(self, schedule: Schedule, folder: FolderId) -> tuple[str | None, str, list[str]]:
        from hermes_local.workflow.run import load_workflow, run_workflow

        settings = self.manager.settings
        wf = load_workflow(Path(schedule.workflow or ""), var_overrides=dict(schedule.vars))
        approver = Approver(allow=schedule.allow, deny=settings.deny_tools)  # nobody to ask
        result = run_workflow(
            wf,
            settings,
            workspace=Path(schedule.workspace),
            folder=folder,  # checked again by the front door
            db_path=Path(schedule.db) if schedule.db else None,
            approver=approver,
            llm_factory=lambda: self.manager.model,
        )
        denied = [o.tool for o in result.failed if o.error_kind == "permission_denied"]
        return result.session_id, "ok" if result.ok else "failed", denied


def recorded_folder(schedule: Schedule) -> FolderId:
    """The identity of the folder `schedule` was added with; a schedule file from before identities were kept is
    refused (one line saying how to add it again), since nobody is there to confirm the folder."""
    folder = FolderId.from_dict(schedule.folder)
    if folder is None:
        raise UserError(
            f"schedule {schedule.name} recorded no folder identity (an older version added it), so it does not run "
            f"unattended; add it again to record {schedule.workspace}: hermes-local schedule add {schedule.name} "
            f"--replace --cron '{schedule.cron}' --workspace {schedule.workspace} ..."
        )
    return folder


def _denied_note(name: str, denied: list[str]) -> str:
    if not denied:
        return ""
    tools = ", ".join(sorted(set(denied)))
    return (
        f"denied (not in the schedule's allow-list, nobody is asked): {tools}; to allow, add the schedule again "
        f"with --allow: hermes-local schedule add {name} --replace ... --allow TOOL"
    )


def _summary(schedule: Schedule) -> str:
    session = f" (session {schedule.last_session})" if schedule.last_session else ""
    note = f": {schedule.last_note}" if schedule.last_note else ""
    return terminal_safe(f"schedule {schedule.name}: {schedule.last_status}{session}{note}")


def serving_manager(
    settings: Settings, registry: ToolRegistry, workspace: Path, *, on_info: Line, kill_children: bool = True
) -> RunManager:
    """The model loaded once (its dialect checked) and a `RunManager` over it, as `serve` builds them."""
    from hermes_local.runtime import dialect_for, find_model, load_llm
    from hermes_local.service.process import SharedModel

    source = find_model(settings)
    llm: Any = load_llm(settings, on_info=on_info, source=source)
    dialect = dialect_for(settings, llm, source, check=True)
    return RunManager(
        SharedModel(llm),
        settings,
        registry=registry,
        workspace=workspace,
        approval_timeout=settings.approval_timeout,
        kill_children=kill_children,
        dialect=dialect,
    )
