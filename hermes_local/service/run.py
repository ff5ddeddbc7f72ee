"""One run started over HTTP: its request, its event list for the SSE stream, its approvals and cancel.

`Run` keeps every event of the run (the session log's events as `event.to_dict()`, plus `approval_request` /
`approval_decision`, the tools' `notice` lines and a final `status`) so late subscribers replay it from the
start; `ask()` parks a write/dangerous call in `waiting_approval` until `decide()` or the approval timeout (a
denial), showing what a terminal shows (`ApprovalRequest`: the sandbox note and the `approval_view`);
`request_cancel()` makes the run stop at its next event or token, after which no call of it can be decided;
`check_owner()` lets only the creator's credential at the run. `token()` takes the model's streamed pieces
and publishes them coalesced as `token` events (`{"text": ...}`, at most one per `TOKEN_INTERVAL` s, the first
piece at once; any other event, and `flush_tokens()` from an idle stream, publish what is pending first, so
the order holds and no piece is left behind); they sit in the same event list, so a late subscriber and a
`Last-Event-ID` reconnect get them too. `RunRequest` refuses a workspace path no
OS call could take (NUL byte, over-long names).
Does not queue or execute runs (`runs.RunManager` does), speak HTTP, or print.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hermes_local.errors import Conflict, NotYourRun
from hermes_local.tools.approval import ApprovalRequest

_log = logging.getLogger(__name__)
RunStatus = Literal["queued", "running", "waiting_approval", "done", "error", "cancelled"]
FINISHED = frozenset({"done", "error", "cancelled"})
TOKEN_INTERVAL = 0.1  # seconds: streamed pieces are coalesced into at most ~10 token events a second


class RunCancelled(Exception):  # noqa: N818 - control flow: unwinds the agent loop of a cancelled run
    """Raised inside a run's event sink (or approval wait) to stop it."""


class RunRequest(BaseModel):
    """Body of `POST /v1/runs`."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=100_000)
    workspace: str | None = None
    tools: list[str] | None = Field(None, max_length=200)
    max_steps: int | None = Field(None, ge=1, le=100)
    tool_choice: Literal["auto", "required", "none"] | None = None
    instructions: str | None = Field(None, max_length=20_000)
    plan: bool = False  # plan-only: writes and dangerous calls are proposals (`hermes-local sessions apply ID`)
    team: bool = False  # route the task to an [agents.NAME] specialist, or to the manager who delegates (issue 30)

    @field_validator("workspace")
    @classmethod
    def _plain_path(cls, value: str | None) -> str | None:
        """A path the OS can take: no NUL byte, not over PATH_MAX, no name over NAME_MAX (else HTTP 400)."""
        if value is None:
            return value
        if "\x00" in value:
            raise ValueError("a workspace path cannot contain a NUL byte")
        if len(value.encode("utf-8", "surrogatepass")) > 4095:
            raise ValueError("the workspace path is longer than 4095 bytes")
        if any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in value.split("/")):
            raise ValueError("a name in the workspace path is longer than 255 bytes")
        return value


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

    def __init__(
        self, run_id: str, request: RunRequest, workspace: Path, approval_timeout: float, owner: str = ""
    ) -> None:
        self.id = run_id
        self.owner = owner  # the creator's credential (a token digest; "" without tokens): see `check_owner`
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
        self.unattended: list[str] | None = None  # a schedule's allow-list: nobody is asked (`RunManager.submit`)
        self._calls = itertools.count(1)
        self._pieces: list[str] = []  # streamed text not yet published as a token event
        self._last_token = 0.0  # monotonic time of the last token event
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()  # streams awaiting news

    # -- state -----------------------------------------------------------------------------
    def _changed(self) -> None:  # with self.cond held: tell waiting threads and every awaiting stream
        self.cond.notify_all()
        for loop, event in self._waiters:
            with contextlib.suppress(RuntimeError):  # a stream whose event loop has closed
                loop.call_soon_threadsafe(event.set)

    def held_for(self) -> float | None:
        """Seconds until held-back pieces may go out as a token event (None: nothing is held back)."""
        with self.cond:
            if not self._pieces:
                return None
            return max(0.0, TOKEN_INTERVAL - (time.monotonic() - self._last_token))

    @contextlib.asynccontextmanager
    async def news(self) -> AsyncIterator[asyncio.Event]:
        """An event set whenever the run publishes or changes status, for a stream on the running event loop
        (it is told, it does not poll); clear it before reading `events`."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self.cond:
            self._waiters.add(waiter)
        try:
            yield event
        finally:
            with self.cond:
                self._waiters.discard(waiter)

    def publish(self, name: str, data: dict[str, Any]) -> None:
        with self.cond:
            self._publish_pieces()
            self.events.append((name, data))
            self._changed()

    def token(self, text: str) -> None:
        """A streamed piece of the model's reply: published at once when no token event went out in the last
        `TOKEN_INTERVAL` s, else kept and published with its neighbours as one `token` event."""
        if not text:
            return
        with self.cond:
            self._pieces.append(text)
            self._throttled_pieces()

    def flush_tokens(self) -> None:
        """Publish pending pieces once the interval has passed (an event stream calls it while it is idle)."""
        with self.cond:
            self._throttled_pieces()

    def _throttled_pieces(self) -> None:  # with self.cond held
        if self._pieces and time.monotonic() - self._last_token >= TOKEN_INTERVAL:
            self._publish_pieces()
            self._changed()

    def _publish_pieces(self) -> None:  # with self.cond held
        if self._pieces:
            self.events.append(("token", {"text": "".join(self._pieces)}))
            self._pieces = []
            self._last_token = time.monotonic()

    def set_status(self, status: RunStatus) -> None:
        with self.cond:
            self.status = status
            self._changed()

    def finish(self, status: RunStatus, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        with self.cond:
            if self.status in FINISHED:
                return
            self.status, self.result, self.error = status, result, error
            self.pending.clear()
            self._publish_pieces()
            self.events.append(("status", {"id": self.id, "status": status, "error": error}))
            self._changed()

    def check_owner(self, credential: str) -> None:
        """Only the run's creator (the same credentials) may see it, decide its calls or cancel it."""
        if not hmac.compare_digest(self.owner, credential):
            raise NotYourRun(f"run {self.id} was started with other credentials; use the token that started it")

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
            if self.cancel_requested:  # a cancel already won: nothing it stopped may be allowed afterwards
                raise Conflict(f"run {self.id} is cancelled; its calls can no longer be decided")
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
            self._changed()
