"""A stand-in Hugging Face hub on 127.0.0.1 for download tests (no internet needed).

Implements what huggingface-hub 2.4's `hf_hub_download` / `get_hf_file_metadata` call:
HEAD and GET `/{owner}/{repo}/resolve/{revision}/{filename}`. HEAD answers with `X-Repo-Commit`,
`ETag` and `Content-Length` (a plain git file) or, in `lfs_redirect` mode like the real hub for LFS
files, a 302 to a "CDN" origin (`localhost` instead of `127.0.0.1`, so the client treats it as
another host) carrying `X-Linked-Etag` (the sha256) and `X-Linked-Size`. GET honours `Range: bytes=N-`
(206 + Content-Range) so interrupted transfers can resume. Errors use the hub's `X-Error-Code` header.

Knobs for tests: `drop_first_get_after` sends that many body bytes of the first GET and then closes
the connection; `etag_override` advertises a wrong sha256. Every request is recorded in `requests`.
Run directly (`python tests/hub_server.py FILE.gguf`) to serve one file as `test-org/Tiny-GGUF`.
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HostedFile:
    data: bytes
    drop_first_get_after: int | None = None
    etag_override: str | None = None
    gets: int = 0

    @property
    def sha256(self) -> str:
        return self.etag_override or hashlib.sha256(self.data).hexdigest()


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None


@dataclass
class HubServer:
    lfs_redirect: bool = True
    files: dict[tuple[str, str], HostedFile] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def add(self, repo: str, filename: str, data: bytes, **knobs: object) -> HostedFile:
        hosted = HostedFile(data, **knobs)  # type: ignore[arg-type]
        self.files[(repo, filename)] = hosted
        return hosted

    def start(self) -> HubServer:
        hub = self

        class Handler(_Handler):
            server_hub = hub

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_hub: HubServer

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _error(self, status: int, code: str | None = None) -> None:
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", code)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _serve(self, head: bool) -> None:
        hub = self.server_hub
        path = unquote(urlsplit(self.path).path)
        hub.requests.append(Request(self.command, path, self.headers.get("Range"), self.headers.get("Authorization")))
        cdn = re.fullmatch(r"/cdn/([^/]+/[^/]+)/(.+)", path)
        if cdn:
            hosted = hub.files.get((cdn.group(1), cdn.group(2)))
            return self._send_body(hosted, head) if hosted else self._error(404)
        match = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if not match:
            return self._error(404, "RepoNotFound")
        repo, revision, filename = match.groups()
        if not any(r == repo for r, _ in hub.files):
            return self._error(404, "RepoNotFound")
        if revision not in ("main", COMMIT):
            return self._error(404, "RevisionNotFound")
        hosted = hub.files.get((repo, filename))
        if hosted is None:
            return self._error(404, "EntryNotFound")
        if head and hub.lfs_redirect:
            host, port = self.server.server_address[:2]
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{port}/cdn/{repo}/{filename}")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{hosted.sha256}"')
            self.send_header("X-Linked-Size", str(len(hosted.data)))
            self.send_header("ETag", '"git-pointer-etag"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return self._send_body(hosted, head)

    def _send_body(self, hosted: HostedFile, head: bool) -> None:
        data, total, start = hosted.data, len(hosted.data), 0
        wanted = self.headers.get("Range")
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted or "")
        if match and not head:
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else total - 1
            if start >= total:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{total}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{start + len(body) - 1}/{total}")
        else:
            body = data
            self.send_response(200)
        self.send_header("ETag", f'"{hosted.sha256}"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return
        hosted.gets += 1
        if hosted.gets == 1 and hosted.drop_first_get_after is not None:
            self.wfile.write(body[: hosted.drop_first_get_after])
            self.wfile.flush()
            self.close_connection = True  # the client sees the body end early
            return
        self.wfile.write(body)


if __name__ == "__main__":
    source = Path(sys.argv[1])
    server = HubServer().start()
    server.add("test-org/Tiny-GGUF", source.name, source.read_bytes())
    print(f"serving {source.name} as test-org/Tiny-GGUF at {server.url} (HF_ENDPOINT={server.url}); Ctrl-C stops")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
