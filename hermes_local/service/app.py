"""The FastAPI routes of `hermes-local serve`, wrapped in the request guard (`guard.py`).

Routes: `POST /v1/runs` (`"plan": true`: plan-only), `POST /v1/runs/{id}/rating` (the user's verdict),
`GET /v1/runs`, `GET /v1/runs/{id}`,
`GET /v1/runs/{id}/events` (SSE, resumable with `Last-Event-ID`; the model's streamed text comes as `token`
events), `POST /v1/runs/{id}/approvals`, `POST /v1/runs/{id}/cancel`, `GET /v1/runs/{id}/diff` (`?step=N`),
`POST /v1/runs/{id}/undo` (checkpoints, `tools/effects/undo.py`; refused with 409 while the run is queued or running),
`GET /v1/health`, `POST /v1/chat/completions`, `GET /v1/models`, and the web page at `/` with the read-only routes
it uses (`GET /v1/ui`, `/v1/status`, `/v1/sessions[/{id}]`: `page.py`). Every route is a thin call into
`runs.RunManager`, `openai_compat` or `page`; user mistakes (`HermesError`, and bodies that fail validation)
become JSON errors (a run whose recorded folder was moved away or replaced since: 409)
`{"error": {"message", "type"}}` with 400, 403 (workspace outside the roots; a run started with other
credentials), 404 (unknown run), 409 (wrong state) or 503 (the run queue or the chat queue is full; the chat
one says when to retry in `Retry-After`). Chat completions wait in their own bounded queue and run on their
own threads (`chats.py`), so a flood of them never delays the run routes; `/v1/health` has a `chats` section.
A run's routes answer only the credentials that started it (`Run.check_owner`). Event streams and the cheap
reads run on the event loop, so idle streams never starve `/v1/health`. CORS is off unless origins are configured.
`GET /v1/stats?since=7d` is `hermes-local stats --json` (`evals/stats.py`); requests past the per-client rate
limit get 429 (`ratelimit.py`, outermost). Does
not bind sockets (see `cli/serve.py`) and holds no agent logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from hermes_local.errors import (
    Conflict,
    HermesError,
    NotYourRun,
    QueueFull,
    RunNotFound,
    UserError,
    WorkspaceForbidden,
    WorkspaceSwapped,
)
from hermes_local.service import chats, openai_compat, page
from hermes_local.service.guard import CREDENTIAL_KEY, Guard
from hermes_local.service.ratelimit import RateLimit
from hermes_local.service.run import FINISHED, Run, RunRequest
from hermes_local.service.runs import RunManager

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_EVENT_ID = re.compile(r"[0-9]{1,12}")
_KINDS = {403: "forbidden", 404: "not_found", 409: "conflict", 503: "queue_full"}


class RatingRequest(BaseModel):
    """Body of `POST /v1/runs/{id}/rating`: the user's verdict on a finished run."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["good", "bad"]
    note: str = Field("", max_length=2000)


class ApprovalDecision(BaseModel):
    """Body of `POST /v1/runs/{id}/approvals`."""

    model_config = ConfigDict(extra="forbid")

    call: str
    decision: Literal["allow", "deny"]


class UndoRequest(BaseModel):
    """Body of `POST /v1/runs/{id}/undo` (all optional: undo the whole run, refusing files changed since)."""

    model_config = ConfigDict(extra="forbid")

    to_step: int | None = None
    force: bool = False
    redo: bool = False


def _error_status(exc: HermesError) -> int:
    if isinstance(exc, (WorkspaceForbidden, NotYourRun)):
        return 403
    if isinstance(exc, RunNotFound):
        return 404
    if isinstance(exc, Conflict | WorkspaceSwapped):  # a run's folder moved away or replaced since it recorded it
        return 409
    if isinstance(exc, QueueFull):
        return 503
    return 400


def _first_event(request: Request) -> int:
    """The event number to stream from: 0, or one past `Last-Event-ID` (an event number, else HTTP 400)."""
    last = request.headers.get("last-event-id", "").strip()
    if not last:
        return 0
    if not _EVENT_ID.fullmatch(last):
        raise UserError("Last-Event-ID must be the number of an event of this stream (its `id:` line)")
    return int(last) + 1


async def _sse(run: Run, first: int, keepalive: float = 10.0) -> AsyncIterator[str]:
    """SSE text: `id` is the event's number, so a reconnecting client resumes with `Last-Event-ID`.

    Awaits the run's news on the event loop (`Run.news`: set by the worker thread whenever it publishes), so an
    idle stream costs nothing and takes no thread; it wakes on a timer only to send a keep-alive, or to let a
    held-back piece of the reply out once the token interval has passed while the model is quiet."""
    number = first
    async with run.news() as news:
        while True:
            news.clear()
            run.flush_tokens()  # a reply's last piece is not held back while the model is quiet
            with run.cond:
                batch = run.events[number:]
                done = run.finished
            for name, data in batch:
                yield f"id: {number}\nevent: {name}\ndata: {json.dumps(data, ensure_ascii=True, default=str)}\n\n"
                number += 1
            if done:
                return
            if batch:
                continue
            held = run.held_for()
            try:
                await asyncio.wait_for(news.wait(), keepalive if held is None else held)
            except TimeoutError:
                if held is None:
                    yield ": keep-alive\n\n"


def _validation_line(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(problems)[:500]


def create_app(
    manager: RunManager,
    *,
    token: str | None = None,
    tokens: Sequence[str] = (),
    hosts: Sequence[str] | None = None,
    max_body: int = 1_000_000,
    cors_origins: list[str] | None = None,
    use_grammar: bool = True,
    dialect: Any = None,
) -> Any:
    """The ASGI application: FastAPI routes wrapped in `guard.Guard`.

    `token` and `tokens` are the accepted bearer tokens (none: no token needed); `hosts` the Host names
    answered besides loopback (default: the settings' `serve_hosts`)."""

    workers = manager.parallel if getattr(manager.model, "concurrent", False) else 1
    chat_queue = chats.ChatQueue(workers=workers, capacity=manager.settings.serve_max_queue)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        chat_queue.shutdown()
        manager.shutdown()

    api = FastAPI(title="hermes-local", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        api.add_middleware(
            CORSMiddleware, allow_origins=cors_origins, allow_methods=["GET", "POST"], allow_headers=["*"]
        )

    @api.exception_handler(HermesError)
    async def hermes_error(request: Request, exc: HermesError) -> JSONResponse:
        status = _error_status(exc)
        kind = _KINDS.get(status, "invalid_request_error")
        retry = getattr(exc, "retry_after", None)  # a full chat queue says when to come back
        headers = {"Retry-After": str(retry)} if retry else None
        return JSONResponse({"error": {"message": exc.line, "type": kind}}, status_code=status, headers=headers)

    @api.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        body = {"error": {"message": _validation_line(exc), "type": "invalid_request_error"}}
        return JSONResponse(body, status_code=400)

    def own_run(run_id: str, request: Request) -> Run:
        run = manager.get(run_id)
        run.check_owner(request.scope.get(CREDENTIAL_KEY, ""))
        return run

    @api.post("/v1/runs", status_code=202)
    def create_run(body: RunRequest, request: Request) -> dict[str, Any]:
        run = manager.submit(body, owner=request.scope.get(CREDENTIAL_KEY, ""))
        return {"id": run.id, "status": run.status}

    @api.get("/v1/runs")
    async def list_runs(request: Request) -> dict[str, Any]:
        return {"runs": manager.recent(owner=request.scope.get(CREDENTIAL_KEY, ""))}

    @api.get("/v1/runs/{run_id}")
    async def get_run(run_id: str, request: Request) -> dict[str, Any]:
        return own_run(run_id, request).view()

    @api.get("/v1/runs/{run_id}/events")
    async def run_events(run_id: str, request: Request) -> StreamingResponse:
        run = own_run(run_id, request)
        first = _first_event(request)
        return StreamingResponse(_sse(run, first), media_type="text/event-stream", headers=SSE_HEADERS)

    @api.post("/v1/runs/{run_id}/approvals")
    def decide(run_id: str, body: ApprovalDecision, request: Request) -> dict[str, Any]:
        run = own_run(run_id, request)
        run.decide(body.call, body.decision)
        return {"id": run.id, "call": body.call, "decision": body.decision}

    @api.post("/v1/runs/{run_id}/rating")
    def rate(run_id: str, body: RatingRequest, request: Request) -> dict[str, Any]:
        return manager.rate(own_run(run_id, request), body.verdict, body.note)

    @api.post("/v1/runs/{run_id}/cancel")
    def cancel(run_id: str, request: Request) -> dict[str, Any]:
        run = manager.cancel(own_run(run_id, request).id)
        return {"id": run.id, "status": run.status, "cancel_requested": True}

    @api.get("/v1/runs/{run_id}/diff")
    def run_diff(run_id: str, request: Request, step: int | None = None) -> dict[str, Any]:
        from hermes_local.tools.effects.undo import diff_text, session_diff

        run = own_run(run_id, request)
        diffs = session_diff(run.id, step)
        return {"id": run.id, "files": [d.to_json() for d in diffs], "diff": diff_text(diffs)}

    @api.post("/v1/runs/{run_id}/undo")
    def run_undo(run_id: str, body: UndoRequest, request: Request) -> dict[str, Any]:
        from hermes_local.tools.effects.undo import undo_session

        run = own_run(run_id, request)
        if run.status not in FINISHED:
            raise Conflict(f"run {run.id} is {run.status}; undo it once it has finished (or cancel it first)")
        return undo_session(run.id, body.to_step, force=body.force, redo=body.redo).to_json()

    @api.get("/v1/health")
    async def health() -> dict[str, Any]:  # on the event loop: answers while every worker thread is busy
        return manager.health() | {"chats": chat_queue.health()}

    @api.get("/v1/stats")
    def stats(request: Request, since: str | None = None) -> dict[str, Any]:  # `stats --json`, from the logs
        from hermes_local.evals.stats import gather, parse_since

        # under tokens, only the caller's own runs (the logs carry no owner: the runs its token started here)
        only = page.visible(manager, request.scope.get(CREDENTIAL_KEY, ""))
        return gather(parse_since(since) if since else None, only=only)

    @api.get("/v1/models")
    async def models() -> dict[str, Any]:
        entry = {"id": manager.model.description, "object": "model", "created": 0, "owned_by": "hermes-local"}
        return {"object": "list", "data": [entry]}

    @api.post("/v1/chat/completions", response_model=None)
    async def chat_completions(body: openai_compat.ChatRequest, request: Request) -> Response:
        s = manager.settings  # queued for the chat workers (chats.py): never on the threads the run routes use
        return await chats.respond(
            chat_queue, request, body, manager.model, temperature=s.temperature, max_tokens=s.max_tokens,
            use_grammar=use_grammar, dialect=dialect or openai_compat.DIALECT,
        )  # fmt: skip

    page.add_routes(api, manager)  # the web page at `/` and the read-only routes it uses (page.py)
    accepted = [t for t in (token, *tokens) if t]
    names = manager.settings.serve_hosts if hosts is None else hosts
    origins = cors_origins or ()
    guard = Guard(
        page.SecurityHeaders(api), tokens=accepted, max_body=max_body, hosts=names, cors_origins=origins,
        public=page.PUBLIC_PATHS,
    )  # fmt: skip
    return RateLimit(guard, limit=manager.settings.serve_rate_limit, window=manager.settings.serve_rate_window)
