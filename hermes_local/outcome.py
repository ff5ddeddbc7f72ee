"""The vocabulary of a tool call's result: `ToolResult` (the envelope), `ToolOutcome` (a call and its result).

`ToolResult` is what every tool call comes to: `{"ok", "data" | "error", "error_kind", "summary"}` with how it was
approved and its `provenance` ("trusted": the user's own words, the agent's own values; "untrusted": anything read
from outside). `ToolOutcome` is the one record of a call (step, name, arguments, result): the run result, the
ledger, eval checks, workflows and the session log's `tool_result` events (`events.ToolFinished`) all hold this
type. Arguments longer than `LOGGED_ARGUMENT_CHARS` are abbreviated when logged (`abbreviate_arguments`), with
`arguments_digest`, a hash of the full arguments, kept for resume. Ground: imports nothing of the package, runs
nothing and writes nothing (the tools themselves, their registry and execution are in `tools/`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

# Where a result's content came from: "trusted" (the user, the agent itself) or "untrusted" (data from outside
# that may carry instructions: files, rows, command output, web pages, MCP servers). See tools/approval.py.
Provenance = Literal["trusted", "untrusted"]
ErrorKind = Literal[
    "invalid_arguments", "permission_denied", "timeout", "not_found", "tool_error", "loop", "truncated", "guarded"
]


def arguments_digest(name: str, arguments: dict[str, Any]) -> str:
    """A stable hash of a call (tool name + arguments): identifies a finished write across a resume."""
    blob = json.dumps([name, arguments], sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()[:32]


@dataclass
class ToolResult:
    """The envelope of one tool call's outcome; `approval` says how it was allowed (not shown to the model)."""

    ok: bool
    summary: str
    data: Any = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    approval: str = ""
    cached: bool = False  # an earlier identical call's result, returned without running the tool again
    # Unknown origin counts as untrusted; the executor stamps the tool's own `provenance` on what it returns,
    # and its own refusals (`failure`: not found, invalid arguments, denied) are trusted text.
    provenance: Provenance = "untrusted"
    rule: str = ""  # the permission rule that decided or made it ask (`allow write_file:src/**`), "" when none

    @classmethod
    def success(cls, data: Any, summary: str) -> ToolResult:
        return cls(ok=True, data=data, summary=summary)

    @classmethod
    def failure(cls, kind: ErrorKind, error: str, summary: str | None = None) -> ToolResult:
        return cls(ok=False, error=error, error_kind=kind, summary=summary or f"{kind}: {error}", provenance="trusted")

    @classmethod
    def from_envelope(cls, d: dict[str, Any]) -> ToolResult:
        """The result from its envelope (as logged); extra keys are ignored; no `provenance` reads as untrusted."""
        return cls(
            bool(d.get("ok")),
            str(d.get("summary", "")),
            d.get("data"),
            d.get("error"),
            d.get("error_kind"),
            str(d.get("approval") or ""),
            bool(d.get("cached")),
            "trusted" if d.get("provenance") == "trusted" else "untrusted",
            str(d.get("rule") or ""),
        )

    def envelope(self) -> dict[str, Any]:
        if self.ok:
            return {"ok": True, "data": self.data, "summary": self.summary}
        return {"ok": False, "error": self.error, "error_kind": self.error_kind, "summary": self.summary}

    def to_json(self) -> str:
        return json.dumps(self.envelope(), ensure_ascii=False, default=str)


LOGGED_ARGUMENT_CHARS = 4000


def abbreviate_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments with any string value over `LOGGED_ARGUMENT_CHARS` replaced by a short description."""
    long = {k for k, v in arguments.items() if isinstance(v, str) and len(v) > LOGGED_ARGUMENT_CHARS}
    note = "characters; full text in this step's assistant event"
    return {k: f"{v[:200]}…[{len(v)} {note}]" if k in long else v for k, v in arguments.items()}


@dataclass
class ToolOutcome:
    """One tool call and what came of it: step, name, arguments, the result and how it was approved."""

    step: int
    name: str
    arguments: dict[str, Any]
    result: ToolResult
    digest: str = ""
    truncated: bool = False  # closing mode ended the call before the model did (issue 18)

    def __post_init__(self) -> None:
        if not self.digest:
            self.digest = arguments_digest(self.name, self.arguments)

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def error_kind(self) -> str | None:
        return self.result.error_kind

    @property
    def error(self) -> str | None:
        return self.result.error

    @property
    def summary(self) -> str:
        return self.result.summary

    @property
    def data(self) -> Any:
        return self.result.data

    @property
    def approval(self) -> str:
        return self.result.approval

    @property
    def valid(self) -> bool:
        """The call parsed and named a real tool with acceptable arguments (whatever happened next)."""
        return self.name != "invalid_tool_call" and self.error_kind not in ("invalid_arguments", "not_found")

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "name": self.name,
            "arguments": abbreviate_arguments(self.arguments),
            "digest": self.digest,
            "approval": self.result.approval,
            "provenance": self.result.provenance,  # trusted / untrusted: where the result's content came from
            **({"rule": self.result.rule} if self.result.rule else {}),  # the permission rule that decided
            **({"truncated": True} if self.truncated else {}),
            **self.result.envelope(),
            **({"cached": True} if self.result.cached else {}),
        }

    def brief(self) -> dict[str, Any]:
        """The `--json` view: name, arguments, ok, error_kind, cached (and truncated when the call was cut)."""
        brief = {"name": self.name, "arguments": self.arguments, "ok": self.ok, "error_kind": self.error_kind}
        return brief | {"cached": self.result.cached} | ({"truncated": True} if self.truncated else {})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolOutcome:
        arguments = d.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ValueError("tool arguments must be an object")
        step, name, digest = int(d.get("step") or 0), str(d["name"]), d.get("digest", "")
        return cls(step, name, arguments, ToolResult.from_envelope(d), digest, bool(d.get("truncated")))
