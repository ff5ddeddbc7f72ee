"""The request guard of `hermes-local serve`: no web page may drive the service, only its own clients.

`Guard` is ASGI middleware that checks every HTTP request before a route sees it, in this order:
  - `Host` must name this server: a loopback address or `localhost` (`*.localhost`), the bound address,
    or a `serve_hosts` name, else 403 (a DNS-rebinding page sends its own name: `evil.example:PORT`);
  - a request carrying an `Origin` other than the service's own (`http://HOST` of the request) or a
    `--cors-origin` is refused with 403, and so is one a browser marks `Sec-Fetch-Site: cross-site` /
    `same-site` without such an Origin: a cross-site "simple" request (a form, `text/plain`, no body)
    never reaches a route (a link followed from elsewhere to a `public` path, the page, still opens it);
  - with tokens configured, `Authorization: Bearer TOKEN` must carry one of them (except a GET of a
    `public` path: the web page's own files, which hold no data, so a browser can load the page that asks
    for the token) (compared with
    `hmac.compare_digest`, every token tried), else 401; the request's credential (a digest of the
    token, never the token) is put in `scope["hermes.credential"]` for the routes' owner checks;
  - a body must be JSON (`Content-Type: application/json`, else 415) and at most `max_body` bytes
    (413), also when it arrives in chunks; a body-less POST (`curl -X POST .../cancel`) passes.
The token is read only from the header, never from the URL, and never logged; `read_tokens` reads
a token file (`--token-file`, `serve_token_file`). Does not route, know
runs, or bind sockets (`cli/serve.py`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_local.errors import UserError
from hermes_local.sandbox.net import is_loopback

CREDENTIAL_KEY = "hermes.credential"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def credential_of(token: str) -> str:
    """What a run remembers of the token that created it: a digest, so the token itself is kept nowhere."""
    return hashlib.sha256(token.encode()).hexdigest()


def host_name(value: str) -> str:
    """The host part of a `Host` header: `[::1]:8321` -> `::1`, `Localhost:80` -> `localhost`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


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
    """ASGI middleware: Host, Origin, bearer token, JSON bodies and the body size limit (module docstring)."""

    def __init__(
        self,
        app: Any,
        *,
        tokens: Sequence[str] = (),
        max_body: int = 1_000_000,
        hosts: Sequence[str] = (),
        cors_origins: Sequence[str] = (),
        public: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.public = frozenset(public)  # paths a GET may fetch without a token (never without Host/Origin checks)
        self.expected = [(f"Bearer {t}".encode(), credential_of(t)) for t in tokens if t]
        self.max_body = max_body
        self.hosts = {host_name(h) for h in hosts if h and h not in ("0.0.0.0", "::")}  # noqa: S104 - names
        self.origins = {o.strip().rstrip("/").lower() for o in cors_origins}

    def host_ok(self, host: str) -> bool:
        name = host_name(host)
        return is_loopback(name) or name.endswith(".localhost") or name in self.hosts

    def refusal(self, scope: Any, headers: dict[bytes, bytes]) -> tuple[int, str, str] | None:
        """(status, message, type) when the request must not reach the routes; None when it may."""
        host = headers.get(b"host", b"").decode("latin-1")
        if host and not self.host_ok(host):
            shown = json.dumps(host[:100])
            return 403, f"Host {shown} is not this server's name; add it to serve_hosts to allow it", "forbidden"
        origin = headers.get(b"origin", b"").decode("latin-1").strip().rstrip("/").lower()
        own = {f"{scheme}://{host.lower()}" for scheme in ("http", "https")} if host else set()
        if origin and origin not in own and origin not in self.origins:
            shown = json.dumps(origin[:100])
            return 403, f"cross-origin request from {shown} refused; allow it with --cors-origin", "forbidden"
        site = headers.get(b"sec-fetch-site", b"").lower()
        if site in (b"cross-site", b"same-site") and not origin and not self.opens_page(scope, headers):
            return 403, "cross-site request refused (a browser page of another site sent it)", "forbidden"
        return None

    def opens_page(self, scope: Any, headers: dict[bytes, bytes]) -> bool:
        """A link followed to the page from elsewhere: a top-level GET of a public path (never framed: the
        page's CSP says `frame-ancestors 'none'`), which changes nothing and reads no data."""
        navigate = headers.get(b"sec-fetch-mode") == b"navigate" and headers.get(b"sec-fetch-dest") == b"document"
        return navigate and scope.get("method") == "GET" and scope.get("path") in self.public

    def credential(self, headers: dict[bytes, bytes]) -> str | None:
        """The caller's credential ("" when no token is configured); None when the token is missing or wrong."""
        if not self.expected:
            return ""
        given = headers.get(b"authorization", b"")
        found = None
        for expected, credential in self.expected:  # all compared, in constant time each
            if hmac.compare_digest(given, expected):
                found = credential
        return found

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        refused = self.refusal(scope, headers)
        if refused is not None:
            await _send_json(send, *refused)
            return
        method = scope.get("method", "GET")
        preflight = method == "OPTIONS"  # CORS preflights carry no credentials and do nothing
        public = method in ("GET", "HEAD") and scope.get("path") in self.public
        credential = self.credential(headers)
        if credential is None and not preflight and not public:
            await _send_json(send, 401, "missing or wrong Authorization: Bearer <token>", "unauthorized")
            return
        length = headers.get(b"content-length", b"0")
        if not length.isdigit() or len(length) > 15 or int(length) > self.max_body:
            await _send_json(send, 413, f"request body over {self.max_body} bytes", "too_large")
            return
        has_body = int(length) > 0 or b"transfer-encoding" in headers
        media = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
        if method in _BODY_METHODS and has_body and media != b"application/json":
            message = "request bodies must be JSON: send Content-Type: application/json"
            await _send_json(send, 415, message, "unsupported_media_type")
            return
        scope = {**scope, CREDENTIAL_KEY: credential or ""}
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


def read_tokens(path: str) -> list[str]:
    """The bearer tokens in a token file: one a line; blank lines and `#` comments are skipped."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"token file {path} cannot be read ({exc.__class__.__name__}); check serve_token_file") from exc
    tokens = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not tokens:
        raise UserError(f"token file {path} holds no token; write one token a line")
    if any(not t.isascii() or not t.isprintable() for t in tokens):
        raise UserError(f"token file {path}: a token must be printable ASCII (it is sent in a header)")
    return tokens


def world_readable(path: str) -> bool:
    """Whether other users may read the token file (a warning for the user, never a refusal)."""
    try:
        return bool(Path(path).expanduser().stat().st_mode & 0o044)
    except OSError:
        return False
