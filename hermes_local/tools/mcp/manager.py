"""MCP servers as a tool source: connections over stdio or streamable HTTP, their tools as ordinary `Tool`s.

`McpManager` starts the servers of `[mcp.servers.NAME]` once per run (all together, on first use),
turns each server tool into a `Tool` named `NAME__TOOL` (approval, timeouts, caps, loop guards and
the session log then treat it like a built-in) and stops every server in `close()`. The official
`mcp` SDK is async: it runs on one private event loop on a daemon thread (`LoopThread`) and tools
call into it synchronously. A server that fails to start is reported in one line with its stderr
tail and left out; a server that crashes mid-call gives that call a `tool_error` and is restarted
once per run. A stdio server's argv and environment, and the check of an HTTP url, are in
`launch.py`; converting results to envelopes lives in `results.py`. Does not decide
approval, does not choose which tools the model sees (see `toolsets.py`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.config import McpServerConfig
from hermes_local.outcome import ToolResult
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.sandbox.procs import TAG_VARIABLE, kill_tagged, new_tag
from hermes_local.tools.mcp.launch import McpStartError, Workspace, check_url, stdio_parameters
from hermes_local.tools.mcp.listing import listed_tools, network_warnings, quiet_sdk_logs
from hermes_local.tools.mcp.pins import PinStore, definition_hash
from hermes_local.tools.mcp.results import arguments_model, clean_schema, open_world, permission_for, to_tool_result
from hermes_local.tools.registry import Tool

STDERR_TAIL = 400  # characters of a server's stderr quoted when it fails
STOP_TIMEOUT = 8.0  # the SDK closes stdin, waits 2 s, then SIGTERM, 2 s, then SIGKILL
PING_TIMEOUT = 3.0
CTX_PARAM = "__hermes_ctx"  # never a valid JSON-schema argument name the model could send

Notice = Callable[[str], None]


class LoopThread:
    """A private asyncio event loop on a daemon thread; `call()` runs a coroutine there and waits."""

    def __init__(self, name: str = "hermes-mcp") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """The coroutine's result; on timeout it is cancelled and TimeoutError raised."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass
class McpServer:
    """One configured server: its connection on the loop thread, status and listed tools."""

    name: str
    config: McpServerConfig
    runner: LoopThread
    allow_hosts: list[str] = field(default_factory=list)
    sandbox: SandboxPolicy | None = None
    workspace: Workspace | None = None
    status: str = "not started"  # not started | running | failed | crashed | stopped
    error: str = ""
    tools: list[Any] = field(default_factory=list)  # mcp_types.Tool
    restarts: int = 0
    on_down: Callable[[str, str], None] | None = None  # (server, reason) when it is gone for the rest of the run
    _session: Any = None
    _stop: asyncio.Event | None = None
    _task: concurrent.futures.Future[Any] | None = None
    _stderr_path: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _tag: str = field(default_factory=new_tag)

    @property
    def transport(self) -> str:
        return "http" if self.config.url else "stdio"

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Connect, initialize and list tools; on failure status is "failed" and McpStartError is raised."""
        try:
            if self.config.url:
                check_url(self.name, self.config.url, self.allow_hosts)
                params = None
            else:
                params = stdio_parameters(self.name, self.config, self.sandbox, self.workspace)
                params.env = {**(params.env or {}), TAG_VARIABLE: self._tag}  # its daemons carry it: stop() kills them
            ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
            self._task = self.runner.submit(self._serve(params, ready))
            try:
                self.tools = ready.result(self.config.timeout)
            except concurrent.futures.TimeoutError:
                self._halt()
                raise McpStartError(
                    f"MCP server {self.name} did not answer within {self.config.timeout:g} s{self._tail()}"
                ) from None
            except Exception as exc:  # noqa: BLE001 - any failure to start is reported in one line
                self._halt()
                reason = _reason(exc)
                raise McpStartError(f"MCP server {self.name} failed to start: {reason}{self._tail()}") from exc
        except McpStartError as exc:
            self.status, self.error = "failed", str(exc)
            if self.on_down is not None:
                self.on_down(self.name, self.error)
            raise
        self.status, self.error = "running", ""

    async def _serve(self, params: Any, ready: concurrent.futures.Future[list[Any]]) -> None:
        """Hold the connection open in one task (anyio scopes must exit where they were entered)."""
        from mcp import ClientSession

        self._stop = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if params is not None:
                    from mcp.client.stdio import stdio_client

                    fd, path = tempfile.mkstemp(prefix=f"hermes-mcp-{self.name}-", suffix=".stderr")
                    os.close(fd)
                    self._stderr_path = Path(path)
                    errlog = stack.enter_context(open(path, "a", encoding="utf-8"))  # O_APPEND: safe to read
                    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                else:
                    import httpx2
                    from mcp.client.streamable_http import streamable_http_client

                    # trust_env=False: no proxy variables, the request goes straight to the checked host.
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(trust_env=False, timeout=httpx2.Timeout(30.0, read=300.0))
                    )
                    read, write = await stack.enter_async_context(
                        streamable_http_client(self.config.url or "", http_client=http)
                    )
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                tools: list[Any] = []
                cursor = None
                while True:
                    from mcp import types

                    page = await session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self._session = session
                ready.set_result(tools)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported through `ready` or the next call
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None

    def _halt(self) -> None:
        """Ask the connection task to finish and wait for it (it stops the server process)."""
        stop, task = self._stop, self._task
        if stop is not None and not self.runner.loop.is_closed():
            self.runner.loop.call_soon_threadsafe(stop.set)
        if task is not None:
            try:
                task.result(STOP_TIMEOUT)
            except Exception:  # noqa: BLE001 - already reported, or a crash being cleaned up
                task.cancel()
        self._session, self._task, self._stop = None, None, None

    def stop(self) -> None:
        self._halt()
        kill_tagged(self._tag)  # descendants that left the server's process group (a daemon), sandbox or not
        if self.status == "running":
            self.status = "stopped"
        if self._stderr_path is not None:
            self._stderr_path.unlink(missing_ok=True)
            self._stderr_path = None

    def stderr_tail(self) -> str:
        if self._stderr_path is None or not self._stderr_path.exists():
            return ""
        text = self._stderr_path.read_text(encoding="utf-8", errors="replace")
        return " ".join(text[-STDERR_TAIL:].split())

    def _tail(self) -> str:
        tail = self.stderr_tail()
        return f" (stderr: {tail})" if tail else ""

    def _alive(self) -> bool:
        session = self._session
        if session is None:
            return False
        try:
            self.runner.call(session.send_ping(), PING_TIMEOUT)
            return True
        except Exception:  # noqa: BLE001 - any failure to answer a ping means the connection is gone
            return False

    # -- calls -----------------------------------------------------------------------------
    def call(self, tool_name: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        """Call one server tool; a dead server gives tool_error and is restarted once per run."""
        session = self._session
        if session is None or self.status != "running":
            return ToolResult.failure(
                "tool_error", f"MCP server {self.name} is not running ({self.error or self.status})."
            )
        try:
            # Our own deadline (not the SDK's read timeout): on expiry the request is cancelled and the
            # call reported as a timeout, within the executor's limit for the tool.
            result = self.runner.call(session.call_tool(tool_name, arguments), timeout)
        except TimeoutError:
            return ToolResult.failure(
                "timeout", f"{self.name}__{tool_name} did not answer within {timeout:g} s. Try a smaller request."
            )
        except Exception as exc:  # noqa: BLE001 - a protocol error or a dead server
            if self._alive():
                return ToolResult.failure("tool_error", f"{self.name}__{tool_name} failed: {_reason(exc)}")
            return self._crashed(tool_name, exc)
        return to_tool_result(f"{self.name}__{tool_name}", result)

    def _crashed(self, tool_name: str, exc: BaseException) -> ToolResult:
        with self._lock:
            tail = self._tail()
            crashed = f"MCP server {self.name} stopped during {tool_name} ({_reason(exc)}){tail}"
            if self.status == "running" and self.restarts < 1:
                self.restarts += 1
                self._halt()
                try:
                    self.start()
                    note = "It was restarted; the call was not repeated, check its effect before retrying."
                except McpStartError as start_error:
                    note = f"Restarting it failed ({start_error}); its tools are unavailable for the rest of this run."
            else:
                self._halt()
                self.status, self.error = "crashed", crashed
                if self.on_down is not None:
                    self.on_down(self.name, crashed)
                note = "It was already restarted once; its tools are unavailable for the rest of this run."
            return ToolResult.failure("tool_error", f"{crashed}. {note}", summary=f"MCP server {self.name} crashed")

    def as_tools(self, notice: Notice | None = None) -> list[Tool]:
        """The allowed tools, one per name, those with a schema we can apply (see `listing.listed_tools`)."""
        specs = listed_tools(self.name, self.tools, self.config.tools, notice or (lambda line: None))
        return [self._tool(spec) for spec in specs]

    def _tool(self, spec: Any) -> Tool:
        server, remote = self, spec.name
        schema = clean_schema(spec.input_schema)

        def call(**kwargs: Any) -> ToolResult:
            ctx = kwargs.pop(CTX_PARAM, None)
            timeout = ctx.timeout if ctx is not None else server.config.timeout
            return server.call(remote, kwargs, timeout)

        description = " ".join((spec.description or spec.title or remote).split())
        return Tool(
            name=f"{self.name}__{remote}",
            description=description[:400],
            function=call,
            arguments_model=arguments_model(f"{self.name}__{remote}", schema),
            permission=permission_for(spec.annotations, self.config),  # annotations may raise it, never lower it
            fresh_after_untrusted=open_world(spec.annotations),
            pin=definition_hash(spec),
            timeout=self.config.timeout,
            context_param=CTX_PARAM,
            input_schema=schema,
            cacheable=self.config.cache,
        )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in exc.exceptions[:3])
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpManager:
    """The MCP servers of one run: started together once, their tools, and `close()` to stop them."""

    def __init__(
        self,
        servers: dict[str, McpServerConfig],
        *,
        allow_hosts: list[str] | None = None,
        on_notice: Notice | None = None,
        sandbox: SandboxPolicy | None = None,
        workspace: Workspace | None = None,
        on_down: Callable[[str, str], None] | None = None,
        pins: PinStore | None = None,
    ) -> None:
        """`on_down(server, reason)`: a server failed to start, failed its restart after a crash, or
        crashed again; its tools are gone for the rest of the run. `pins`: the accepted tool definitions."""
        self.runner = LoopThread()
        self.servers = {
            name: McpServer(name, config, self.runner, list(allow_hosts or []), sandbox, workspace, on_down=on_down)
            for name, config in servers.items()
        }
        self.on_notice = on_notice or (lambda line: None)
        self.pins = pins or PinStore()
        self._release_logs = quiet_sdk_logs(self.on_notice)  # SDK log lines are notices, never tracebacks
        self._started = False

    def start(self) -> None:
        """Start every server (in parallel threads); a failure is one notice and that server is left out."""
        if self._started:
            return
        self._started = True
        for line in network_warnings({name: s.config for name, s in self.servers.items()}):
            self.on_notice(line)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.servers))) as pool:
            futures = {pool.submit(s.start): s for s in self.servers.values()}
        for future, server in futures.items():
            if future.exception() is not None:
                self.on_notice(f"{server.error}; continuing without its tools")

    def tools(self) -> list[tuple[Tool, str]]:
        """(tool, source) for every running server's allowed tools whose definition matches its pin (pins.py)."""
        self.start()
        running = [s for s in self.servers.values() if s.status == "running"]
        found = [(t, f"mcp:{s.name}") for s in running for t in s.as_tools(self.on_notice)]
        return self.pins.admit(found, self.on_notice)

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.runner.stop()
        self._release_logs()
