"""`http_get` against a hostile server on loopback: odd charsets, and `[::1]` allow-listed as written.

Real HTTP servers on 127.0.0.1 / ::1 (no mocks of HTTP); the tool is called through the executor.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hermes_local.outcome import ToolResult
from hermes_local.tools import Approver, Executor, ToolContext, default_registry
from tests.conftest import loopback_http_server

BODY = b"caf\\xe9 \\ud800 \\u202e done \xe9"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        charset = self.path.strip("/")
        self.send_response(200)
        self.send_header("Content-Type", f"text/plain; charset={charset}")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


def fetch(url: str, allow: list[str], tmp_path: Path) -> ToolResult:
    ctx = ToolContext(workspace=tmp_path, allow_hosts=allow, timeout=10.0)
    return Executor(default_registry(), ctx, Approver(allow=["http_get"])).execute("http_get", {"url": url})


@pytest.mark.parametrize("charset", ["unicode_escape", "raw_unicode_escape", "utf-7", "rot13", "base64", "nope"])
def test_hostile_charsets_cannot_produce_lone_surrogates(charset: str, tmp_path: Path) -> None:
    with loopback_http_server(_Handler) as url:
        result = fetch(f"{url}/{charset}", ["127.0.0.1"], tmp_path)
    assert result.ok, result
    body = result.data["body"]
    body.encode("utf-8")  # would raise on a lone surrogate
    assert "\u202e" not in body and body.startswith("caf\\xe9 \\ud800")  # the escapes stay literal text
    result.to_json().encode("utf-8")


def test_an_ordinary_charset_is_still_used(tmp_path: Path) -> None:
    with loopback_http_server(_Handler) as url:
        result = fetch(f"{url}/latin-1", ["127.0.0.1"], tmp_path)
    assert result.ok and result.data["body"].endswith("done é")


@contextlib.contextmanager
def _ipv6_server() -> Iterator[int]:
    class V6(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    try:
        server = V6(("::1", 0), _Handler)
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("entry", ["[::1]", "::1", "[::1]:{port}"])
def test_ipv6_loopback_allowed_as_written(entry: str, tmp_path: Path) -> None:
    with _ipv6_server() as port:
        result = fetch(f"http://[::1]:{port}/utf-8", [entry.format(port=port)], tmp_path)
    assert result.ok, result


def test_ipv6_wrong_port_is_still_refused(tmp_path: Path) -> None:
    with _ipv6_server() as port:
        result = fetch(f"http://[::1]:{port}/utf-8", [f"[::1]:{port + 1}"], tmp_path)
    assert result.error_kind == "permission_denied"
