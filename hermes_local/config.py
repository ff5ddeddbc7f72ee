"""Settings and where things live.

Precedence is CLI > environment (`HERMES_LOCAL_*`) > config file (`$HERMES_LOCAL_HOME/config.toml`)
> defaults. Also locates the data shipped with the package (`prompts/`, `models.toml`) both in a
source checkout and in an installed wheel. Does not import llama_cpp or load models.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hermes_local.errors import UserError, one_line

ENV_PREFIX = "HERMES_LOCAL_"
_PACKAGE_DIR = Path(__file__).resolve().parent


def home_dir() -> Path:
    """`HERMES_LOCAL_HOME`, default `~/.hermes-local`."""
    return Path(os.environ.get("HERMES_LOCAL_HOME") or Path.home() / ".hermes-local").expanduser()


def data_path(name: str) -> Path:
    """A file or folder shipped with hermes-local: inside the wheel, or at the top of a checkout."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"hermes-local data file {name!r} is missing from this installation")


class Settings(BaseModel):
    """Everything a run can be configured with. Unknown keys in the config file are rejected."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    n_ctx: int = Field(4096, ge=256)
    n_gpu_layers: int = -1
    n_threads: int | None = None
    n_batch: int = Field(512, ge=1)
    seed: int = 0
    flash_attn: bool = False
    main_gpu: int = 0
    tensor_split: list[float] | None = None
    rpc_servers: str | None = None
    parallel: int = Field(1, ge=1, le=64)  # concurrent runs decoded together on one loaded model (batching.py)
    prompt_cache: bool = True  # save/load the fixed prompt prefix's KV state ($HERMES_LOCAL_HOME/cache/kv)
    temperature: float = Field(0.2, ge=0.0)
    max_tokens: int = Field(512, ge=1)
    max_steps: int = Field(8, ge=1)
    reminder_every: int = Field(3, ge=0)  # goal reminder every N steps; 0 = never
    tool_choice: str = Field("auto", pattern="^(auto|required|none)$")
    grammar: bool = True
    tool_timeout: float = Field(30.0, gt=0)
    # Pre-approved: append_to_memo only appends a line to memo.md in the workspace, and remember only
    # adds a fact to hermes-local's own store (`hermes-local memory forget ID` undoes it).
    allow_tools: list[str] = Field(default_factory=lambda: ["append_to_memo", "remember"])
    deny_tools: list[str] = Field(default_factory=list)
    allow_hosts: list[str] = Field(default_factory=list)


def config_file() -> Path:
    return home_dir() / "config.toml"


def _env_overrides() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is None:
            continue
        if field.annotation in (list[str], list[str] | None, list[float] | None):
            out[name] = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            out[name] = raw
    return out


def load_settings(cli_overrides: dict[str, Any] | None = None) -> Settings:
    """Merge defaults, the config file, the environment and CLI values (None means "not given")."""
    merged: dict[str, Any] = {}
    path = config_file()
    if path.is_file():
        try:
            merged.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"config file {path} is not valid TOML ({exc}); fix or delete it") from exc
    merged.update(_env_overrides())
    merged.update({k: v for k, v in (cli_overrides or {}).items() if v is not None})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise UserError(f"invalid setting {one_line(exc)} (check {path}, {ENV_PREFIX}* variables and flags)") from exc
