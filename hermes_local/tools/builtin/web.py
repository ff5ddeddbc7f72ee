"""`http_get`: fetch a URL, but only from hosts the user allow-listed (`--allow-host`, `allow_hosts`).

Offline by default: with no allow-listed host every call is refused before any socket or DNS
lookup. The host is taken from the parsed URL (so `http://allowed@evil/` is `evil`), every
redirect is checked against the same list, and proxies from the environment are ignored. The body
is read only up to a cap and decoded with its declared charset only when that is an ordinary text
encoding (never `unicode_escape`, `utf-7` and the like, which can produce lone surrogates or control
characters); `[::1]` in `allow_hosts` matches the IPv6 loopback. Its traits (the `web` toolset; it needs an
allowed host; the goal words that call for it) are on its `@tool`. Does not send cookies, credentials or anything
but a plain GET.
"""

from __future__ import annotations

import codecs
import re
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from hermes_local.outcome import ToolResult
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool
from hermes_local.tools.traits import Cue, Toolset, Traits

USER_AGENT = "hermes-local"
WEB = Toolset("web", "fetch a URL from an allow-listed host")
GOAL_WORDS = re.compile(r"https?://|\b(web ?page|website|url|download|fetch)\b|网页|网站|链接")  # call for it


def _host_allowed(url: str, allow_hosts: list[str]) -> tuple[bool, str]:
    """(allowed, host) for an http(s) URL; `allow_hosts` entries are "host" or "host:port"."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ToolFailure("invalid_arguments", f"only http:// and https:// URLs are supported, not {parts.scheme!r}.")
    try:
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError as exc:
        raise ToolFailure("invalid_arguments", f"the URL is malformed: {exc}.") from exc
    if not host:
        raise ToolFailure("invalid_arguments", "the URL has no host; give a full URL like http://host/path.")
    allowed = {_allow_entry(h) for h in allow_hosts if h.strip()}
    with_port = f"[{host}]:{port}" if ":" in host else f"{host}:{port}" if port is not None else None
    return host in allowed or (with_port is not None and with_port in allowed), host


def _allow_entry(entry: str) -> str:
    """An `allow_hosts` entry as compared: lower case, no trailing dot, `[::1]` -> `::1` (a port is kept)."""
    entry = entry.strip().lower().rstrip(".")
    if entry.startswith("[") and entry.endswith("]"):
        return entry[1:-1]
    return entry


# Codecs that turn escape sequences or shifts in the body into arbitrary code points (lone surrogates,
# controls): a server may not choose them. Anything else unknown or non-text falls back to UTF-8.
_UNSAFE_CHARSETS = frozenset({"unicode_escape", "raw_unicode_escape", "utf_7", "punycode", "idna", "undefined"})


def _decode_body(body: bytes, charset: str) -> str:
    try:
        info = codecs.lookup(charset)
        safe = getattr(info, "_is_text_encoding", True) and info.name.replace("-", "_") not in _UNSAFE_CHARSETS
    except LookupError:
        safe = False
    text = body.decode(info.name if safe else "utf-8", errors="replace")
    return text.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates survive


def _refusal(host: str, allow_hosts: list[str]) -> ToolFailure:
    listed = ", ".join(allow_hosts) if allow_hosts else "none (offline)"
    return ToolFailure(
        "permission_denied",
        f"http_get may not contact {host}: only allow-listed hosts are reachable (now: {listed}). "
        f"Do not retry; the user can allow it with --allow-host {host}.",
    )


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    def __init__(self, allow_hosts: list[str]) -> None:
        self.allow_hosts = allow_hosts

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        allowed, host = _host_allowed(newurl, self.allow_hosts)
        if not allowed:
            raise _refusal(host, self.allow_hosts)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def reached_host(arguments: dict) -> str | None:
    """The host an http_get call contacts (None when the URL has none): approval's `Tool.reaches`."""
    try:
        return (urlsplit(str(arguments.get("url", "")).strip()).hostname or "").lower().rstrip(".") or None
    except ValueError:
        return None


@tool(
    permission="dangerous",
    repeatable=True,
    reaches=reached_host,
    traits=Traits(
        toolset=WEB,
        needs="host",
        cues=(Cue(20, GOAL_WORDS.search),),
        call_hint="call http_get with the URL",
        checkpoints_itself=True,  # it changes no workspace file
    ),
)
def http_get(url: str, ctx: ToolContext) -> ToolResult:
    """HTTP GET a URL (only hosts the user allowed).

    Args:
        url: Full http(s) URL.
    """
    allowed, host = _host_allowed(url.strip(), ctx.allow_hosts)
    if not allowed:
        raise _refusal(host, ctx.allow_hosts)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _CheckedRedirects(ctx.allow_hosts))
    request = urllib.request.Request(url.strip(), headers={"User-Agent": USER_AGENT}, method="GET")
    cap = max(500, ctx.output_cap - 500)
    seconds = max(0.1, ctx.timeout - min(0.5, ctx.timeout * 0.1))
    try:
        with opener.open(request, timeout=seconds) as response:
            body = response.read(cap * 4 + 1)
            status = response.status
            content_type = response.headers.get("Content-Type", "")
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        snippet = exc.read(300).decode("utf-8", errors="replace") if exc.fp else ""
        raise ToolFailure("tool_error", f"HTTP {exc.code} {exc.reason} from {url}. {snippet}".strip()) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ToolFailure):
            raise exc.reason from exc
        raise ToolFailure("tool_error", f"could not fetch {url}: {exc.reason}.") from exc
    except TimeoutError as exc:
        raise ToolFailure("timeout", f"{host} did not answer within {seconds:g} s.") from exc
    text = _decode_body(body, charset)
    truncated = len(body) > cap * 4 or len(text) > cap
    if truncated:
        text = text[:cap] + f"\n[... body truncated after {cap} characters ...]"
    data = {"url": url, "status": status, "content_type": content_type, "body": text, "truncated": truncated}
    summary = f"http_get {host}: HTTP {status}, {len(body)} bytes" + (" (truncated)" if truncated else "")
    return ToolResult.success(data, summary)


TOOLS: list[Tool] = [http_get]  # the family's tools, in the registry's order
