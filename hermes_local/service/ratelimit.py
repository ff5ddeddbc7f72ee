"""Requests per client, limited: `hermes-local serve` answers 429 with `Retry-After` past the limit.

`RateLimit` is ASGI middleware around the whole service (outside `guard.Guard`, so refused requests count
too). A client is the peer address of the connection (loopback included: every local process shares
127.0.0.1's budget); forwarded-for headers are not trusted. Each client may make `limit` HTTP requests in
any `window` seconds (a sliding window; settings `serve_rate_limit`, default 120, and `serve_rate_window`,
default 10 s; a limit of 0 turns it off). GETs count like the rest; an event stream counts once, when it
opens; `GET /v1/health` is exempt (monitors poll it). The answer past the limit is the service's JSON
error `{"error": {"message", "type": "rate_limited"}}` with `Retry-After` in whole seconds. At most
`MAX_CLIENTS` addresses are remembered (the idlest are forgotten first). Does not route or check
credentials.
"""

from __future__ import annotations

import collections
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

EXEMPT_PATHS = frozenset({"/v1/health"})
MAX_CLIENTS = 4096


class SlidingWindow:
    """The times of each client's recent requests; `admit()` says whether one more fits, else when it will."""

    def __init__(self, limit: int, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window, self.clock = limit, window, clock
        self._seen: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def admit(self, client: str) -> float:
        """0.0 when the request is admitted (and counted); else the seconds until one would be."""
        now = self.clock()
        with self._lock:
            times = self._seen.pop(client, None) or collections.deque()
            self._seen[client] = times  # the most recently seen client goes last
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.limit:
                return max(0.001, times[0] + self.window - now)
            times.append(now)
            while len(self._seen) > MAX_CLIENTS:
                self._seen.popitem(last=False)
            return 0.0


class RateLimit:
    """ASGI middleware: `limit` requests per `window` seconds per client address, else 429 (module docstring)."""

    def __init__(self, app: Any, *, limit: int = 120, window: float = 10.0) -> None:
        self.app = app
        self.limit = limit
        self.counter = SlidingWindow(limit, window) if limit > 0 else None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.counter is None or scope["type"] != "http" or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("unknown", 0)
        wait = self.counter.admit(str(client[0]))
        if not wait:
            await self.app(scope, receive, send)
            return
        seconds = max(1, math.ceil(wait))
        message = (
            f"too many requests: at most {self.limit} every {self.counter.window:g} s from one client; "
            f"retry in {seconds} s (settings serve_rate_limit, serve_rate_window)"
        )
        body = json.dumps({"error": {"message": message, "type": "rate_limited"}}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(seconds).encode()),
        ]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})
