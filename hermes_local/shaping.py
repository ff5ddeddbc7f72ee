"""The user's shaping of the agent in config.toml, as data: `[permissions]` rules and `[[hooks]]` commands.

`PermissionsConfig` holds the allow / ask / deny lists of `TOOL` or `TOOL:GLOB` rules (`tools/permissions.py` reads
and applies them); `HookConfig` is one `[[hooks]]` table: the event (`pre_tool`, `post_tool`, `stop`,
`session_end`), the tools it matches (names or globs; empty: every tool), the command (run by `/bin/sh -c` in the
command sandbox, the workspace read-only), its timeout and the paths it may write besides (`tools/hooks.py` runs
them). Ground: imports no district and runs nothing; `config.Settings` holds both.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

HookEvent = Literal["pre_tool", "post_tool", "stop", "session_end"]
MAX_HOOK_TIMEOUT = 600.0


RULE_TOOL = re.compile(r"[A-Za-z0-9_*?\[\]-]+")


def split_rule(text: str) -> tuple[str, str | None]:
    """`write_file:src/**` -> ("write_file", "src/**"), `run_shell` -> ("run_shell", None); ValueError naming the
    fix for a malformed rule."""
    tool, sep, pattern = text.partition(":")
    tool = tool.strip()
    if not RULE_TOOL.fullmatch(tool):
        raise ValueError(f"permission rule {text!r}: write TOOL or TOOL:PATTERN, e.g. write_file:src/**")
    if sep and not pattern.strip():
        raise ValueError(f"permission rule {text!r} has an empty pattern after ':'; drop the ':' or add a glob")
    return tool, pattern.strip() if sep else None


class PermissionsConfig(BaseModel):
    """The `[permissions]` table: `TOOL` or `TOOL:GLOB` rules; deny beats ask beats allow."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @field_validator("allow", "ask", "deny")
    @classmethod
    def _rules(cls, value: list[str]) -> list[str]:
        for text in value:
            split_rule(text)  # a malformed rule is refused when the settings load, before any model
        return value


class HookConfig(BaseModel):
    """One `[[hooks]]` table: a command run on an event, given one JSON object on stdin (see `tools/hooks.py`)."""

    model_config = ConfigDict(extra="forbid")

    event: HookEvent
    command: str = Field(min_length=1)
    match: list[str] = Field(default_factory=list)  # tool names or globs (pre_tool / post_tool); empty: all
    timeout: float = Field(10.0, gt=0, le=MAX_HOOK_TIMEOUT, allow_inf_nan=False)
    writable: list[str] = Field(default_factory=list)  # paths it may write besides (an audit log, say)
    name: str = ""  # how its decisions are logged (default: the command's first word)

    @field_validator("match", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @property
    def label(self) -> str:
        return self.name or (self.command.split() or ["hook"])[0].rsplit("/", 1)[-1]


def shaping_of(raw: dict[str, Any]) -> dict[str, Any]:
    """The `[permissions]` lists and `[[hooks]]` of a config file's raw TOML, as compared between two reads."""
    rules, hooks = raw.get("permissions"), raw.get("hooks")
    rules = rules if isinstance(rules, dict) else {}
    hooks = hooks if isinstance(hooks, list) else []
    return {
        "permissions": {k: [str(x) for x in v] for k, v in rules.items() if isinstance(v, list)},
        "hooks": [repr(h) for h in hooks],
    }


def shaping_lowered(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Which of the two lower safety from `before` to `now`: an allow rule added, an ask or deny rule or a hook
    removed (or changed)."""
    was, rules = before.get("permissions") or {}, now.get("permissions") or {}
    added = set(rules.get("allow", [])) - set(was.get("allow", []))
    removed = any(set(was.get(k, [])) - set(rules.get(k, [])) for k in ("ask", "deny"))
    hooks_gone = set(before.get("hooks") or []) - set(now.get("hooks") or [])
    return [key for key, lower in (("permissions", added or removed), ("hooks", hooks_gone)) if lower]
