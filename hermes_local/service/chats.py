"""The chat completions of `serve`: a bounded queue with its own worker threads.

`ChatQueue` runs each `POST /v1/chat/completions` (rendering its prompt, then the model call) on its own
`workers` threads, never on the threads the other routes use (run creation, approvals, cancel, undo, the page),
so a flood of chats waits here and not in front of them. At most `capacity` requests wait; past that `submit`
raises `ChatQueueFull` (HTTP 503 with `Retry-After`: about how long the queued ones will take). What a job
produces (its prepared prompt, each generated piece, the completion or an error) reaches the event loop through
an asyncio queue, so a waiting request holds no thread. A client that goes away cancels its job: still queued,
it never runs; generating, the next token raises `ChatAbandoned` out of the model call, which ends it.
`respond()` is the route's body (the disconnect is seen by polling while a request waits, and by Starlette
cancelling a stream). `health()` is the `chats` section of `/v1/health`. Does not render prompts or format
replies (`openai_compat.py`) and knows nothing of runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from hermes_local.errors import QueueFull
from hermes_local.service import openai_compat

POLL = 0.1  # seconds between looks at whether a waiting client is still connected
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ChatQueueFull(QueueFull):
    """The chat queue holds `capacity` requests already: HTTP 503, retry after `retry_after` seconds."""

    def __init__(self, line: str, retry_after: int) -> None:
        super().__init__(line)
        self.retry_after = retry_after


class ChatAbandoned(Exception):  # noqa: N818 - control flow: unwinds the model call of a chat nobody waits for
    """Its client went away: raised from the token callback, it ends the model call."""


class ChatJob:
    """One chat request in the queue: the work to do in a worker thread, and what it produced for the loop."""

    def __init__(self, work: Callable[[ChatJob], None], loop: asyncio.AbstractEventLoop) -> None:
        self.work = work
        self.loop = loop
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.cancelled = threading.Event()

    def emit(self, kind: str, value: Any = None) -> None:
        """Hand (kind, value) to the waiting request: "ready" (the prepared prompt), "piece", "done", "error"."""
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))

    def check(self, piece: str = "") -> None:
        """The token callback of a non-streamed chat: ends the model call once the client has gone."""
        if self.cancelled.is_set():
            raise ChatAbandoned()

    def stream(self, piece: str) -> None:
        """The token callback of a streamed chat: each piece to the client, until it has gone."""
        self.check()
        self.emit("piece", piece)

    def cancel(self) -> None:
        self.cancelled.set()


class ChatQueue:
    """Chat requests waiting for, and running on, the chat worker threads (see the module docstring)."""

    def __init__(self, *, workers: int = 1, capacity: int = 32) -> None:
        self.workers, self.capacity = max(1, workers), max(1, capacity)
        self._jobs: deque[ChatJob] = deque()
        self._running: set[ChatJob] = set()
        self._cond = threading.Condition()
        self._closing = False
        self._seconds = 5.0  # a chat's recent duration (moving average): the Retry-After estimate
        self.served = self.refused = self.abandoned = 0
        self._threads = [
            threading.Thread(target=self._work, name=f"hermes-chat-{i}", daemon=True) for i in range(self.workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, work: Callable[[ChatJob], None]) -> ChatJob:
        """Queue `work` (called with its job in a worker thread); `ChatQueueFull` when `capacity` wait already."""
        job = ChatJob(work, asyncio.get_running_loop())
        with self._cond:
            waiting = self._waiting()
            if self._closing or waiting >= self.capacity:
                self.refused += 1
                after = self._retry_after()
                why = "the server is shutting down" if self._closing else f"{waiting} requests waiting"
                raise ChatQueueFull(f"the chat queue is full ({why}); retry in {after} s", after)
            self._jobs.append(job)
            self._cond.notify()
        return job

    def _waiting(self) -> int:
        return sum(not j.cancelled.is_set() for j in self._jobs)

    def _retry_after(self) -> int:
        ahead = self._waiting() + len(self._running)
        return min(120, max(1, math.ceil(self._seconds * ahead / self.workers)))

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                job = self._jobs.popleft()
                if job.cancelled.is_set():  # its client left while it waited: it never runs
                    self.abandoned += 1
                    continue
                self._running.add(job)
            started = time.monotonic()
            abandoned = False
            try:
                job.work(job)
            except ChatAbandoned:
                abandoned = True
            except Exception as exc:  # noqa: BLE001 - a user mistake (400) or a failed call: the request reports it
                job.emit("error", exc)
            with self._cond:
                self._running.discard(job)
                self.abandoned += abandoned
                self.served += not abandoned
                self._seconds = 0.7 * self._seconds + 0.3 * (time.monotonic() - started)

    def health(self) -> dict[str, Any]:
        """The `chats` section of `/v1/health`."""
        with self._cond:
            return {
                "workers": self.workers,
                "busy": len(self._running),
                "waiting": self._waiting(),
                "capacity": self.capacity,
                "served": self.served,
                "refused": self.refused,
                "abandoned": self.abandoned,
            }

    def shutdown(self, grace: float = 5.0) -> None:
        """Refuse new chats, drop the queued ones, stop the running ones at their next token."""
        with self._cond:
            self._closing = True
            for job in [*self._jobs, *self._running]:
                job.cancel()
                job.emit("error", QueueFull("the server is shutting down; retry once it is back"))
            self._jobs.clear()
            self._cond.notify_all()
        deadline = time.monotonic() + grace
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def chat_work(model: Any, body: openai_compat.ChatRequest, **prepare: Any) -> Callable[[ChatJob], None]:
    """The worker's part of one request: render its prompt (`openai_compat.prepare`), then the model call."""

    def work(job: ChatJob) -> None:
        prepared = openai_compat.prepare(body, model, **prepare)
        job.emit("ready", prepared)
        job.check()
        on_token = job.stream if body.stream else job.check
        completion = model.complete(prepared.tokens, prepared.options, on_token=on_token)
        job.emit("done", completion)

    return work


async def _next(job: ChatJob, request: Request) -> tuple[str, Any]:
    """The job's next event; ("gone", None) once the client has disconnected (and the job is cancelled)."""
    while True:
        try:
            kind, value = await asyncio.wait_for(job.events.get(), POLL)
        except TimeoutError:
            if await request.is_disconnected():
                job.cancel()
                return "gone", None
            continue
        if kind == "error":
            raise value
        return kind, value


async def _chunks(job: ChatJob, request: Request, stream: openai_compat.ChunkStream) -> AsyncIterator[str]:
    try:
        yield stream.first()
        while True:
            try:
                kind, value = await _next(job, request)
            except Exception as exc:  # noqa: BLE001 - a failed model call ends the stream with an error chunk
                for line in stream.error(exc):
                    yield line
                return
            if kind == "piece":
                for line in stream.piece(value):
                    yield line
            elif kind == "done":
                for line in stream.finish(value):
                    yield line
                return
            else:
                return
    finally:
        job.cancel()  # the stream ended or its client left: no token is generated for nobody


async def respond(
    chats: ChatQueue, request: Request, body: openai_compat.ChatRequest, model: Any, **prepare: Any
) -> Response:
    """The answer to `POST /v1/chat/completions`: queued, prepared and run by the chat workers."""
    job = chats.submit(chat_work(model, body, **prepare))
    try:
        kind, prepared = await _next(job, request)
        if kind == "gone":
            return Response(status_code=499)  # nobody reads it
        if body.stream:
            chunks = _chunks(job, request, openai_compat.ChunkStream(body, prepared, model.description))
            return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)
        kind, completion = await _next(job, request)
        if kind == "gone":
            return Response(status_code=499)
        return JSONResponse(openai_compat.chat_response(body, prepared, completion, model.description))
    except BaseException:
        job.cancel()
        raise
