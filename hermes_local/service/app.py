"""The FastAPI routes of `hermes-local serve` and its request guard (bearer token, body size, CORS).

Routes: `POST /v1/runs`, `GET /v1/runs`, `GET /v1/runs/{id}`,
`GET /v1/runs/{id}/events` (SSE, resumable with `Last-Event-ID`), `POST /v1/runs/{id}/approvals`,
`POST /v1/runs/{id}/cancel`, `GET /v1/health`,
`POST /v1/chat/completions`, `GET /v1/models`. Every route is a thin call into `runs.RunManager` or
`openai_compat`; user mistakes (`HermesError`) become JSON errors `{"error": {"message", "type"}}`
with 400, 403 (workspace outside the roots), 404 (unknown run) or 409 (wrong state). `Guard` checks
`Authorization: Bearer <token>` on every request when a token is set (compared in constant time) and
refuses bodies over `max_body` bytes with 413. CORS is off unless origins are configured. Does not
bind sockets (see `command.py`) and holds no agent logic.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict

from hermes_local.errors import HermesError
from hermes_local.service import openai_compat
from hermes_local.service.run import Conflict, RunNotFound, RunRequest, WorkspaceForbidden
from hermes_local.service.runs import RunManager

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ApprovalDecision(BaseModel):
    """Body of `POST /v1/runs/{id}/approvals`."""

    model_config = ConfigDict(extra="forbid")

    call: str
    decision: Literal["allow", "deny"]


class _TooLarge(Exception):
    """The request body passed the size limit while it was being read."""


async def _send_json(send: Any, status: int, message: str, kind: str) -> None:
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: bearer token on every request (when set) and a request body size limit."""

    def __init__(self, app: Any, token: str | None, max_body: int) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        preflight = scope.get("method") == "OPTIONS"  # CORS preflights carry no credentials and do nothing
        authorized = self.expected is None or secrets.compare_digest(headers.get(b"authorization", b""), self.expected)
        if not authorized and not preflight:
            await _send_json(send, 401, "missing or wrong Authorization: Bearer <token>", "unauthorized")
            return
        length = headers.get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.max_body:
            await _send_json(send, 413, f"request body over {self.max_body} bytes", "too_large")
            return
        received = 0
        started = False

        async def limited_receive() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise _TooLarge()
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _send_json(send, 413, f"request body over {self.max_body} bytes", "too_large")


def _error_status(exc: HermesError) -> int:
    if isinstance(exc, WorkspaceForbidden):
        return 403
    if isinstance(exc, RunNotFound):
        return 404
    if isinstance(exc, Conflict):
        return 409
    return 400


def _sse(run_events: Iterator[tuple[str, dict[str, Any]] | None], first: int) -> Iterator[str]:
    """SSE text: `id` is the event's number, so a reconnecting client resumes with `Last-Event-ID`."""
    number = first
    for item in run_events:
        if item is None:
            yield ": keep-alive\n\n"
            continue
        name, data = item
        yield f"id: {number}\nevent: {name}\ndata: {json.dumps(data, ensure_ascii=True, default=str)}\n\n"
        number += 1


def create_app(
    manager: RunManager,
    *,
    token: str | None = None,
    max_body: int = 1_000_000,
    cors_origins: list[str] | None = None,
    use_grammar: bool = True,
    dialect: Any = None,
) -> Any:
    """The ASGI application: FastAPI routes wrapped in `Guard`."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
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
        kind = {403: "forbidden", 404: "not_found", 409: "conflict"}.get(status, "invalid_request_error")
        return JSONResponse({"error": {"message": exc.line, "type": kind}}, status_code=status)

    @api.post("/v1/runs", status_code=202)
    def create_run(body: RunRequest) -> dict[str, Any]:
        run = manager.submit(body)
        return {"id": run.id, "status": run.status}

    @api.get("/v1/runs")
    def list_runs() -> dict[str, Any]:
        return {"runs": manager.recent()}

    @api.get("/v1/runs/{run_id}")
    def get_run(run_id: str) -> dict[str, Any]:
        return manager.get(run_id).view()

    @api.get("/v1/runs/{run_id}/events")
    def run_events(run_id: str, request: Request) -> StreamingResponse:
        run = manager.get(run_id)
        last = request.headers.get("last-event-id", "")
        first = int(last) + 1 if last.isdigit() else 0
        return StreamingResponse(_sse(run.follow(first), first), media_type="text/event-stream", headers=SSE_HEADERS)

    @api.post("/v1/runs/{run_id}/approvals")
    def decide(run_id: str, body: ApprovalDecision) -> dict[str, Any]:
        run = manager.get(run_id)
        run.decide(body.call, body.decision)
        return {"id": run.id, "call": body.call, "decision": body.decision}

    @api.post("/v1/runs/{run_id}/cancel")
    def cancel(run_id: str) -> dict[str, Any]:
        run = manager.cancel(run_id)
        return {"id": run.id, "status": run.status, "cancel_requested": True}

    @api.get("/v1/health")
    def health() -> dict[str, Any]:
        return manager.health()

    @api.get("/v1/models")
    def models() -> dict[str, Any]:
        entry = {"id": manager.model.description, "object": "model", "created": 0, "owned_by": "hermes-local"}
        return {"object": "list", "data": [entry]}

    @api.post("/v1/chat/completions", response_model=None)
    def chat_completions(body: openai_compat.ChatRequest) -> dict[str, Any] | StreamingResponse:
        s = manager.settings
        prepared = openai_compat.prepare(
            body,
            manager.model,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            use_grammar=use_grammar,
            dialect=dialect or openai_compat.DIALECT,
        )
        if body.stream:
            stream = openai_compat.stream_chat(manager.model, body, prepared)
            return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)
        return openai_compat.complete_chat(manager.model, body, prepared)

    return Guard(api, token, max_body)
