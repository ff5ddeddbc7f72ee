"""`ToolOutcome`: one tool call and what came of it (step, name, arguments, the result, how it was approved).

The one record of a tool call: the run result, the ledger, eval checks, workflows and the session log's
`tool_result` events (`events.ToolFinished`) all hold this type. Arguments longer than `LOGGED_ARGUMENT_CHARS`
are abbreviated when logged (`abbreviate_arguments`), with a hash of the full arguments kept for resume.
Moved out of `events.py`, which re-exports it; runs nothing and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hermes_local.tools.registry import ToolResult, arguments_digest

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
