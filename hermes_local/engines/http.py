"""The small HTTP client the remote engines share: JSON requests and server-sent events over urllib.

Checks an engine URL against the offline rule (`sandbox.net`: loopback, or a host in `allow_hosts`), adds the optional
bearer token, applies the timeout, retries a dropped connection or a 5xx answer with bounded backoff
(`RETRIES` more tries, `BACKOFF` seconds doubling), and turns every transport failure into one
`EngineError` line that names the URL and the fix. It knows no engine's API; `llama_server.py` and
`vllm.py` do. Uses only the standard library (no new HTTP dependency).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from hermes_local.errors import EngineError
from hermes_local.sandbox.net import host_allowed

T = TypeVar("T")


RETRIES = 2  # tries after the first, for a dropped connection or a 5xx
BACKOFF = 0.5  # seconds before the first retry, doubled for each next one (0.5 s, 1 s)


def retriable(exc: BaseException) -> bool:
    """A failure worth one more try: a 5xx answer, or a connection refused, reset or dropped (not a timeout)."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
    return isinstance(exc, ConnectionError | http.client.IncompleteRead | http.client.BadStatusLine)


def with_retries(attempt: Callable[[], T], backoff: float, retries: int = RETRIES) -> T:
    """`attempt()`, tried again after a retriable `EngineError` (at most `retries` more times, waiting
    `backoff` seconds, then twice as long each time); the last error is raised as it is."""
    for n in range(retries + 1):
        try:
            return attempt()
        except EngineError as exc:
            if not exc.retriable or n == retries:
                raise
            time.sleep(backoff * 2**n)
    raise AssertionError("unreachable")


def check_engine_url(url: str | None, allow_hosts: Sequence[str] = ()) -> str:
    """The URL without a trailing slash, if it is http(s) to loopback or an allow-listed host."""
    if not url:
        raise EngineError("a remote engine needs --engine-url http://HOST:PORT (or engine_url in config.toml)")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineError(f"engine URL {url!r} is not http(s)://HOST:PORT")
    host = parts.hostname
    if not host_allowed(host, allow_hosts):
        raise EngineError(
            f"engine URL host {host} is not loopback; add it to allow_hosts (--allow-host {host}) "
            "to let hermes-local talk to it"
        )
    return url.rstrip("/")


class EngineHTTP:
    """JSON over HTTP to one engine base URL, with a bearer token and a timeout."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0, name: str = "engine"):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.name = name
        self.backoff = BACKOFF

    def _request(self, method: str, path: str, body: Any | None) -> urllib.request.Request:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)

    def _fail(self, path: str, exc: BaseException) -> EngineError:
        if isinstance(exc, urllib.error.HTTPError):
            detail = ""
            try:
                payload = json.loads(exc.read().decode("utf-8", errors="replace") or "{}")
                err = payload.get("error", payload)
                detail = err.get("message", "") if isinstance(err, dict) else str(err)
            except (ValueError, OSError, AttributeError):
                pass
            hint = "; check engine_token" if exc.code in (401, 403) else ""
            return EngineError(
                f"{self.name} at {self.base_url} answered {path} with HTTP {exc.code} {detail}{hint}",
                retriable=retriable(exc),
            )
        reason = getattr(exc, "reason", exc)
        return EngineError(
            f"{self.name} at {self.base_url} is not reachable ({reason}); start it or fix --engine-url",
            retriable=retriable(exc),
        )

    def get(self, path: str) -> Any:
        return self.post(path, None, method="GET")

    def post(self, path: str, body: Any | None, *, method: str = "POST") -> Any:
        def attempt() -> bytes:
            try:
                with urllib.request.urlopen(self._request(method, path, body), timeout=self.timeout) as resp:
                    return resp.read()
            except (TimeoutError, urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                raise self._fail(path, exc) from exc

        raw = with_retries(attempt, self.backoff)
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError as exc:
            raise EngineError(f"{self.name} at {self.base_url} sent non-JSON from {path}") from exc

    def stream(self, path: str, body: Any) -> Iterator[dict[str, Any]]:
        """POST and yield each server-sent `data:` JSON object until `[DONE]` or the end of the stream.

        Not retried here: a failure to open, or a stream that breaks, raises an `EngineError` marked
        `retriable` when the connection dropped or the server failed (5xx), and the caller decides with
        `with_retries` (it knows whether pieces were already shown)."""
        try:
            resp = urllib.request.urlopen(self._request("POST", path, body), timeout=self.timeout)
        except (TimeoutError, urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise self._fail(path, exc) from exc
        with resp:
            while True:
                try:
                    line = resp.readline()
                except (TimeoutError, OSError, http.client.HTTPException) as exc:
                    raise EngineError(
                        f"{self.name} at {self.base_url} stopped answering mid-stream ({exc}); "
                        "check the server, then resume the run",
                        retriable=retriable(exc),
                    ) from exc
                if not line:
                    return
                text = line.decode("utf-8", errors="replace").strip()
                if not text.startswith("data:"):
                    continue  # blank separators, SSE comments (pings), event names
                data = text[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError as exc:
                    raise EngineError(f"{self.name} at {self.base_url} sent a malformed stream event") from exc
                if isinstance(event, dict) and "error" in event and not event.get("choices"):
                    err = event["error"]
                    msg = err.get("message", err) if isinstance(err, dict) else err
                    raise EngineError(f"{self.name} at {self.base_url} failed: {msg}")
                yield event
