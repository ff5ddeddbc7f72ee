"""The web page of `hermes-local serve` at `/`, and the small read-only API it needs besides the run routes.

`add_routes(api, manager)` adds:
  - `GET /` (the page, `static/index.html`) and `GET /ui/app.js`, `GET /ui/app.css` (a fixed list: no path
    from the URL ever reaches the file system); these are `PUBLIC_PATHS`, which `guard.Guard` serves without
    a token (they hold no data) but still behind its Host and Origin checks;
  - `GET /v1/ui`: what the start form offers (the workspace roots, the toolsets and their tools, the modes);
  - `GET /v1/status`: the status strip (model, context use of the latest model call, queue, the prompt-cache
    state: the persistent prefix cache setting and how many prompt tokens the latest call reused);
  - `GET /v1/sessions` and `GET /v1/sessions/{id}`: the newest `MAX_SESSIONS` logs, newest first, and one
    log's events (the page's stats view reads `GET /v1/stats`, `app.py`).
    With tokens configured, only sessions of runs the caller's token started in this server are shown (the
    logs on disk carry no owner); without tokens, every log under `$HERMES_LOCAL_HOME/sessions`.
`SecurityHeaders` is ASGI middleware putting a strict Content-Security-Policy (scripts and styles from this
origin only, no inline script, nothing framed, no form posts), `nosniff`, no referrer and same-origin
isolation on every response. The page renders every model, tool and log text with `textContent` (never as
HTML). Does not run, queue or decide anything (`runs.py`, `run.py`), and does not check Host/Origin/tokens
(`guard.py`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from hermes_local.errors import RunNotFound, UserError, WorkspaceSwapped
from hermes_local.service.guard import CREDENTIAL_KEY
from hermes_local.service.runs import RunManager
from hermes_local.session import list_sessions, read_records, session_path
from hermes_local.tools.toolsets import groups

STATIC = Path(__file__).with_name("static")
ASSETS = {  # URL path -> (file under static/, media type)
    "/": ("index.html", "text/html; charset=utf-8"),
    "/ui/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/ui/app.css": ("app.css", "text/css; charset=utf-8"),
}
PUBLIC_PATHS = tuple(ASSETS)
MODES = ("auto", "required", "none")  # a run's tool_choice
MAX_SESSIONS = 100  # listed at most, newest first
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class SecurityHeaders:
    """ASGI middleware: `SECURITY_HEADERS` on every HTTP response (API answers too: JSON is never a page)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


@functools.cache
def asset(path: str) -> bytes:
    """The bytes of one shipped file of the page (read once)."""
    return (STATIC / ASSETS[path][0]).read_bytes()


def _latest_call(manager: RunManager, credential: str = "") -> dict[str, Any] | None:
    """The newest `llm_call` event of the runs this server remembers (under tokens: of the caller's runs; None
    before any model call)."""
    for run in reversed(list(manager.runs.values())):
        if credential and run.owner != credential:
            continue
        with run.cond:
            found = next((data for name, data in reversed(run.events) if name == "llm_call"), None)
        if found is not None:
            return found
    return None


def status(manager: RunManager, credential: str = "") -> dict[str, Any]:
    """The status strip: `health` plus context use and the prompt-cache state of the latest model call; under
    tokens, the caller's own runs only (another token's running ids and token use are not shown)."""
    out = manager.health()
    mine = visible(manager, credential)
    if mine is not None:
        out["running_ids"] = [i for i in out["running_ids"] if i in mine]
        out["running"] = out["running"] if out["running"] in mine else None
    call = _latest_call(manager, credential)
    n_ctx = int(out.get("n_ctx") or 0)
    used = int(call["prompt_tokens"]) + int(call["completion_tokens"]) if call else 0
    reused = int(call["prompt_tokens"]) - int(call["prompt_tokens_evaluated"]) if call else 0
    out["context"] = {"used": used, "n_ctx": n_ctx, "fraction": round(used / n_ctx, 4) if n_ctx else None}
    out["prompt_cache"] = {
        "persistent": bool(manager.settings.prompt_cache),
        "last_prompt_tokens": int(call["prompt_tokens"]) if call else None,
        "last_reused_tokens": reused if call else None,
    }
    return out


def form(manager: RunManager) -> dict[str, Any]:
    """What the start form offers: workspace roots (the server's own first), toolsets with their tools, modes."""
    toolsets = []
    # what this server can give a toolset's tools: a database (--db), an allowed host; a toolset none of whose
    # tools can work here is offered unticked, with the reason (issue 42)
    missing = {"database": None if manager.db_path else "this server has no --db"}
    missing["host"] = None if manager.settings.allow_hosts else "this server allows no host (--allow-host)"
    for name, tools in groups(manager.registry).items():
        found = [manager.registry.get(t) for t in tools]
        entries = [{"name": t, "permission": getattr(manager.registry.get(t), "permission", "read")} for t in tools]
        why = [missing.get(str(t.traits.needs)) if t is not None else None for t in found]
        unusable = bool(why) and all(why)
        toolsets.append({"name": name, "tools": entries, "usable": not unusable, "why": why[0] if unusable else None})
    roots = list(dict.fromkeys(str(r) for r in manager.roots))
    s = manager.settings
    return {"roots": roots, "toolsets": toolsets, "modes": list(MODES), "max_steps": s.max_steps}


def visible(manager: RunManager, credential: str) -> set[str] | None:
    """The session ids a caller may read: None (all) without tokens, else the runs its token started."""
    if not credential:
        return None
    return {r.id for r in list(manager.runs.values()) if r.owner == credential}


def sessions(manager: RunManager, credential: str) -> list[dict[str, Any]]:
    """`GET /v1/sessions`: the newest `MAX_SESSIONS` logs (id, goal, events, stopped, outcome, modified), newest
    first."""
    found = list_sessions(last=MAX_SESSIONS, only=visible(manager, credential))  # oldest first, by mtime
    return [
        {
            "id": s.id,
            "goal": s.goal[:300],
            "events": s.events,
            "stopped": s.stopped,
            "outcome": (s.end or {}).get("outcome"),  # from evidence (issue 42); None: unfinished or an older log
            "modified": s.modified,
        }
        for s in reversed(found)  # newest first
    ]


def session(manager: RunManager, credential: str, session_id: str) -> dict[str, Any]:
    """`GET /v1/sessions/{id}`: the log's events as dicts (404 when absent or not the caller's)."""
    allowed = visible(manager, credential)
    if allowed is not None and session_id not in allowed:
        raise RunNotFound(f"no session {session_id[:80]!r} of yours in this server; see GET /v1/sessions")
    try:
        path = session_path(session_id)
    except UserError as exc:
        raise RunNotFound(exc.line) from exc
    return {"id": session_id, "events": read_records(path), "diff": _diff(session_id)}


def _diff(session_id: str) -> str:
    """What the session changed in its workspace, as `sessions diff` shows it ("" without checkpoints)."""
    from hermes_local.tools.effects.undo import diff_text, session_diff

    try:
        return diff_text(session_diff(session_id))
    except WorkspaceSwapped as exc:  # its folder was moved away or replaced: said, never read from the new one
        return f"(not shown: {exc.line})\n"
    except UserError:  # no checkpoints (nothing written, or dropped by retention)
        return ""


def add_routes(api: FastAPI, manager: RunManager) -> None:
    """The page, its two assets and the read-only routes it uses (module docstring)."""

    def page_file(request: Request) -> Response:
        path = request.url.path
        media = ASSETS[path][1]
        return Response(asset(path), media_type=media, headers={"Cache-Control": "no-cache"})

    for path in ASSETS:
        api.add_api_route(path, page_file, methods=["GET"], include_in_schema=False)

    @api.get("/v1/ui")
    async def ui_form() -> dict[str, Any]:
        return form(manager)

    @api.get("/v1/status")
    async def ui_status(request: Request) -> dict[str, Any]:
        return status(manager, request.scope.get(CREDENTIAL_KEY, ""))

    @api.get("/v1/sessions")
    def ui_sessions(request: Request) -> dict[str, Any]:  # reads files: in the thread pool
        return {"sessions": sessions(manager, request.scope.get(CREDENTIAL_KEY, ""))}

    @api.get("/v1/sessions/{session_id}")
    def ui_session(session_id: str, request: Request) -> dict[str, Any]:
        return session(manager, request.scope.get(CREDENTIAL_KEY, ""), session_id)
