"""Agent profiles: the `[agents.NAME]` tables of config.toml, each a specialist of a team (issue 30).

A profile is data: what the specialist is for (`description`, and `keywords` for the rules router), its standing
`instructions`, the tools it may call (tool or toolset names, as `--tools` takes them; `delegate` lets it delegate
further), its own `max_steps`, and optionally `tool_choice`, `model` (the specialist runs on it, loaded beside the
run's; `agent/team.py`) and `dialect`. Fields left out inherit the run's settings. Names are checked against the
tools and models by `runtime.check_team`; this module only holds the shape (ground: no district is imported).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

MANAGER = "manager"  # the router's choice for a multi-part task: the main agent, which delegates
DELEGATE = "delegate"  # the tool's name, allowed in a profile's `tools` (nested delegation)
MAX_DEPTH = 2  # default nesting: the manager's specialists may delegate once more


class AgentProfile(BaseModel):
    """One `[agents.NAME]` table; unset fields inherit the run's settings."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1, max_length=500)
    instructions: str = ""
    tools: list[str] = Field(default_factory=list)  # tool or toolset names; empty: every tool of the run
    keywords: list[str] = Field(default_factory=list)  # words that send a --team task here (router = "rules")
    max_steps: int | None = Field(None, ge=1)
    tool_choice: str | None = Field(None, pattern="^(auto|required|none)$")
    model: str | None = None
    dialect: str | None = None


def check_profile_names(agents: dict[str, AgentProfile]) -> dict[str, AgentProfile]:
    """Profile names are what the model writes in `delegate(agent=...)`: plain names, never `manager`."""
    for name in agents:
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name) or name == MANAGER:
            raise ValueError(f"agent name {name!r}: use lower-case letters, digits, - or _ (and not {MANAGER!r})")
    return agents


Profiles = Annotated[dict[str, AgentProfile], AfterValidator(check_profile_names)]  # the `agents` setting

__all__ = ["DELEGATE", "MANAGER", "MAX_DEPTH", "AgentProfile", "Profiles", "check_profile_names"]
