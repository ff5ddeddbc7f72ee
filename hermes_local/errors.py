"""Every error a person must act on: its class, its exit code and the one line it carries.

`HermesError` is raised anywhere in the package for a mistake the user (or their files, model, engine or
environment) must fix; the CLI's `main()` maps it once to `error: <line>` on stderr and its exit code, and
`serve` answers it as a JSON error (`service/app.py` maps the HTTP client's classes below to their statuses,
400 otherwise). The classes are grouped by who must act:

- the user, exit 2 (`UserError`): a bad flag, setting, name, file or id; a model file that is no usable GGUF
  (`GGUFError`), a tool set whose call grammar is too large (`GrammarTooLarge`), a workspace folder swapped
  after the run was accepted (`WorkspaceSwapped`);
- the HTTP client of `serve`, exit 2 when raised in a command, else the status in brackets: a workspace outside
  the roots (`WorkspaceForbidden`, 403), an unknown run (`RunNotFound`, 404), a request that does not fit the
  run's state (`Conflict`, 409), another credential's run (`NotYourRun`, 403), a full queue (`QueueFull`, 503);
- whoever recorded a replay, exit 1: `ReplayMismatch`, `ReplayExhausted`;
- whoever runs the model or its engine, exit 2: `ModelLoadError`, `EngineError` (a remote engine).

Model mistakes never raise: they go back to the model as tool results. Bugs raise ordinary exceptions. Also
holds `one_line()`, the single place that turns a pydantic `ValidationError` into a readable line.

Deliberately local, because they never reach a user as such (each is caught near where it is raised and
becomes a tool result, a status line, an HTTP answer or one of the errors above):
- `ContextTooSmall` (agent/): the fixed prompt alone does not fit n_ctx; ends the run with `stopped: error`.
- `RunCancelled` (service/): unwinds the loop of a run cancelled over HTTP.
- `ToolFailure` (tools/): a tool's failure with its kind, told to the model.
- `McpStartError`, `SchemaRefused` (tools/): one MCP server or tool left out, with its status line.
- `SandboxRefused` (sandbox/): `sandbox = bwrap` without a working bwrap; becomes an `McpStartError`.
- `OwnerStopped` (sandbox/): a command not started because its run was cancelled.
- `GrammarSyntaxError` (engines/inprocess/): the decoder's own GBNF parse of a grammar the package built.
- `TemplateRefused` (prompts.py): a template past its budget, a jinja2 error its callers turn into a line.
- `_TooLarge` (service/): a request body over the limit, answered with HTTP 413.

Imports nothing of the package and prints nothing.
"""

from __future__ import annotations

from typing import Any


class HermesError(Exception):
    """An error for a person to fix: one line of text and the process exit code."""

    exit_code: int = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def line(self) -> str:
        """The message on one line (control characters and newlines flattened)."""
        return " ".join(str(self).split())


# -- the user ---------------------------------------------------------------------------------------------------
class UserError(HermesError):
    """The user must fix a flag, setting, name, file or id: exit code 2; the line names it and the fix."""


class GGUFError(UserError):
    """The user must replace a model file that is no usable GGUF: exit code 2; the line names the file and why
    (unreadable, bad magic, truncated) and the fix (download it again)."""


class GrammarTooLarge(UserError):
    """The user must offer fewer tools or simpler schemas: exit code 2; the line names the tool count and the
    grammar's size against its limit."""


class WorkspaceSwapped(UserError):
    """The user must check the workspace folder, which is no longer the one the run was accepted with (renamed,
    replaced, a link swapped in): exit code 2; the line names the folder and what changed."""


# -- the HTTP client of `serve` ---------------------------------------------------------------------------------
class WorkspaceForbidden(UserError):
    """The HTTP client must ask for a workspace inside the server's roots (HTTP 403); the line names the roots."""


class RunNotFound(UserError):
    """The HTTP client named a run or session this server does not have for it (HTTP 404); the line names the id
    and where to list them."""


class Conflict(UserError):
    """The HTTP client's request does not fit the run's state, e.g. an approval for a call that is not waiting
    (HTTP 409); the line names the state and what to do instead."""


class NotYourRun(UserError):
    """The HTTP client must use the credentials the run was started with (HTTP 403); the line names the run."""


class QueueFull(UserError):
    """The HTTP client must retry later: the queue holds `serve_max_queue` runs already (HTTP 503); the line
    names how many wait."""


# -- whoever recorded a replay ----------------------------------------------------------------------------------
class ReplayMismatch(HermesError):
    """Whoever recorded the replay must record it again: it does not fit the run (too few or unused outputs):
    exit code 1; the line names the call and the count."""

    exit_code = 1


class ReplayExhausted(ReplayMismatch):
    """The run asked the replay model for more outputs than were recorded: exit code 1; the line names the call
    number and how many outputs were scripted."""


# -- whoever runs the model or its engine -----------------------------------------------------------------------
class ModelLoadError(HermesError):
    """Whoever runs the model must fix it or its settings: llama.cpp (or a remote engine) could not load or serve
    it: exit code 2; the line names the model and the cause."""


class EngineError(ModelLoadError):
    """Whoever runs the remote engine must start or fix it: it is unreachable, refused the request, or serves
    another model: exit code 2; the line names the URL and the fix.

    `retriable`: a dropped connection or a 5xx, which may pass if asked again (a timeout or a 4xx does not)."""

    def __init__(self, line: str, *, retriable: bool = False) -> None:
        super().__init__(line)
        self.retriable = retriable


def one_line(exc: Any, *, prefix: str = "") -> str:
    """`where: message` for the first problem of a pydantic ValidationError (or str(exc) otherwise)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, TypeError):
            return prefix + " ".join(str(exc).split())
        where = ".".join(str(p) for p in first.get("loc", ())) or "value"
        return f"{prefix}{where}: {first.get('msg', '')}"
    return prefix + " ".join(str(exc).split())
