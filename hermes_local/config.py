"""Settings and where things live.

Precedence is CLI > environment (`HERMES_LOCAL_*`) > config file (`$HERMES_LOCAL_HOME/config.toml`) > defaults. A
setting that lowers safety (`sandbox`, `allow_tools`, `allow_hosts`, `deny_tools`, an MCP server) changed in the config
file during a run is refused until a person confirms it once (`RunWatch`, `check_config_changes`). Also locates the data
shipped with the package (`prompts/`, `models.toml`) in a checkout and a wheel. Loads no model, imports no llama_cpp.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hermes_local.errors import UserError, one_line
from hermes_local.profiles import MAX_DEPTH, Profiles
from hermes_local.safety import DEFAULT_ENV, EXECUTE_LATER_FILES, agent_home
from hermes_local.shaping import HookConfig, PermissionsConfig, shaping_lowered, shaping_of

ENV_PREFIX = "HERMES_LOCAL_"
TABLES = ("mcp", "agents", "permissions", "hooks")  # settings only the config file sets
T = TypeVar("T")
MAX_TOOL_TIMEOUT = 86_400.0  # one day: larger values (inf, 1e308) overflow timers and would never fire
MAX_TIMEOUT = MAX_TOOL_TIMEOUT  # the same bound for engine, approval and MCP timeouts (`inf` is refused at load)
_PACKAGE_DIR = Path(__file__).resolve().parent


def home_dir() -> Path:
    """`HERMES_LOCAL_HOME`, default `~/.hermes-local` (the same rule the sandbox masks by)."""
    return agent_home()


def data_path(name: str) -> Path:
    """A file or folder shipped with hermes-local: inside the wheel, or at the top of a checkout."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"hermes-local data file {name!r} is missing from this installation")


class SandboxLimits(BaseModel):
    """Resource limits for commands (`run_shell`, tool servers); 0 turns one off. Applied with or without bwrap."""

    model_config = ConfigDict(extra="forbid")

    processes: int = Field(default=256, ge=0)
    memory_mb: int = Field(default=4096, ge=0)
    cpu_seconds: int = Field(default=120, ge=0)
    file_size_mb: int = Field(default=1024, ge=0)
    tmp_mb: int = Field(default=4096, ge=0)  # size of the sandbox's /tmp and /var/tmp (0: half the RAM)


class McpServerConfig(BaseModel):
    """One `[mcp.servers.NAME]` table: a stdio command or a streamable-HTTP url, and how its tools are offered."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    permission: Literal["read", "write", "dangerous"] | None = None  # default: from the tools' annotations
    tools: list[str] | None = None  # allow-list of the server's own tool names; None = all
    timeout: float = Field(30.0, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)  # per call, and for starting the server
    cache: bool = False  # results may be served from a read cache (never unless set)
    sandbox: bool = True  # stdio servers run in the command sandbox (bwrap) unless set false
    allow_hosts: list[str] = Field(default_factory=list)  # what it is meant for; refused without full_network
    full_network: bool = False  # a sandboxed stdio server's network: none, or (true) all of it, 127.0.0.1 too
    trusted: bool = False  # believe readOnlyHint (may make a tool `read`); untrusted, annotations only raise it

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        if self.command and self.sandbox and self.allow_hosts and not self.full_network:  # bwrap: all hosts or none
            raise ValueError("allow_hosts would give this stdio server the whole network (host 127.0.0.1 included): "
                             "add full_network = true to accept that, or remove allow_hosts")  # fmt: skip
        return self


class McpConfig(BaseModel):
    """The `[mcp]` table: `servers.NAME` entries (NAME becomes the tool prefix `NAME__` and the toolset name)."""

    model_config = ConfigDict(extra="forbid")

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> McpConfig:
        for name in self.servers:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,31}", name) or "__" in name:
                raise ValueError(f"server name {name!r}: use letters, digits, - or _ (no double underscore)")
        return self


class Settings(BaseModel):
    """Everything a run can be configured with. Unknown keys in the config file are rejected."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    n_ctx: Annotated[int, Field(ge=256)] | Literal["auto"] = 4096  # "auto": largest that fits (models/fit.py)
    n_gpu_layers: int | Literal["auto"] = -1  # "auto": the most layers that fit free device memory (models/fit.py)
    draft_model: str | None = None  # a small model of the same vocabulary drafting for the chat model (name or GGUF)
    n_threads: int | None = None
    n_batch: int = Field(512, ge=1)
    seed: int = 0
    flash_attn: bool = False
    # flash attention + q8_0 KV cache, so batched verification (fast-forward, drafting, parallel runs) gives exactly
    # the tokens one-at-a-time decoding gives (engines/inprocess/load.py); off by default: costs prompt/decode speed
    batch_invariant: bool = False
    # prompt-lookup drafting, verified in one batch (exact at temperature 0): pays on tool calls and copies (README)
    prompt_lookup: bool = True
    main_gpu: int = 0
    tensor_split: list[float] | None = None
    rpc_servers: str | None = None
    parallel: int = Field(1, ge=1, le=64)  # concurrent runs decoded together on one loaded model (batching.py)
    prompt_cache: bool = True  # save/load the fixed prompt prefix's KV state ($HERMES_LOCAL_HOME/cache/kv)
    # Where completions run: in-process llama.cpp, or a llama-server / vLLM at engine_url (loopback or an
    # allow_hosts host; the agent, tools and logs stay here). engine_token is sent as a bearer token.
    engine: str = Field("llama-cpp", pattern="^(llama-cpp|llama-server|vllm)$")
    engine_url: str | None = None
    engine_token: str | None = None
    engine_timeout: float = Field(120.0, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    temperature: float = Field(0.2, ge=0.0, allow_inf_nan=False)  # tool-call steps
    answer_temperature: float = Field(0.7, ge=0.0, allow_inf_nan=False)  # final answers, workflow summaries
    answer_guard: bool = True  # send back once an answer given without any tool call when the goal needs a tool
    redecode: bool = True  # in-process: a call that does not parse is decoded again under the grammar, same step
    instructions: str = ""  # the user's standing rules, added to the system prompt
    # long-term memory: recall at a run's start, its episode at the end (`run --no-memory`, `memory off`); a failed
    # run's episode is "skip"ped or kept "mark"ed failed; embeddings from a models.toml `kind = "embedding"` model
    # on disk (or this name/path), else the embedded chat model; "none": words only
    memory: bool = True
    memory_failed: str = Field("skip", pattern="^(skip|mark)$")
    memory_scope: str = Field("workspace", pattern="^(workspace|user)$")  # README: "Whose memory"
    embedding_model: str | None = None
    cache_ttl: dict[str, float] = Field(default_factory=dict)  # tool name -> seconds its read results are reused
    # MB kept of what writes change ($HERMES_LOCAL_HOME/checkpoints; oldest dropped first; 0: off); sessions diff/undo
    checkpoint_max_mb: int = Field(2048, ge=0)
    max_tokens: int = Field(512, ge=1)
    # most tokens one thought may take before its closing marker is forced (0: half of the reply's max_tokens)
    max_reasoning_tokens: int = Field(0, ge=0)
    max_steps: int = Field(8, ge=1)
    # token budgets (evaluated prompt + generated tokens), off by default: one run, and all runs of a day
    # (counted in $HERMES_LOCAL_HOME/usage); a run that reaches one ends with stopped "budget" (exit 5)
    max_run_tokens: int | None = Field(None, ge=1)
    max_day_tokens: int | None = Field(None, ge=1)
    reminder_every: int = Field(3, ge=0)  # goal reminder every N steps; 0 = never
    tool_choice: str = Field("auto", pattern="^(auto|required|none)$")
    dialect: str | None = None  # prompt format (hermes, qwen, mistral, llama3, gguf...); default: from the model
    grammar: bool = True
    tool_timeout: float = Field(30.0, gt=0, le=MAX_TOOL_TIMEOUT, allow_inf_nan=False)
    # `hermes-local serve`: extra folders runs may use as workspace (besides --workspace), the bearer
    # token (required to bind anything but loopback) or a file of tokens (one a line), the Host names
    # it answers besides loopback, how many runs may wait, how long a call waits for approval, CORS origins.
    workspace_roots: list[str] = Field(default_factory=list)
    serve_token: str | None = None
    serve_token_file: str | None = None
    serve_hosts: list[str] = Field(default_factory=list)
    serve_max_queue: int = Field(32, ge=1, le=500)
    serve_rate_limit: int = Field(120, ge=0, le=1_000_000)  # requests per client per window (0: off); health exempt
    serve_rate_window: float = Field(10.0, gt=0, le=3600, allow_inf_nan=False)
    approval_timeout: float = Field(300.0, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    cors_origins: list[str] = Field(default_factory=list)
    # Pre-approved: append_to_memo only appends a line to memo.md in the workspace, and remember only
    # adds a fact to hermes-local's own store (`hermes-local memory forget ID` undoes it).
    allow_tools: list[str] = Field(default_factory=lambda: ["append_to_memo", "remember"])
    deny_tools: list[str] = Field(default_factory=list)
    allow_hosts: list[str] = Field(default_factory=list)
    # After a run has read untrusted content (files, web pages, command output, MCP results), dangerous calls,
    # `remember` and open-world MCP tools need a fresh approval even when allowed; true trusts all content
    # instead (a file or page can then make the agent run what --allow allows, unasked).
    trust_content: bool = False
    execute_later_files: list[str] = Field(default_factory=lambda: list(EXECUTE_LATER_FILES))
    # Commands run in bubblewrap: auto = when it works (else unsandboxed, with a warning), bwrap = required.
    sandbox: str = Field("auto", pattern="^(auto|bwrap|off)$")
    sandbox_env: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV))  # variables commands may see
    sandbox_limits: SandboxLimits = Field(default_factory=lambda: SandboxLimits())

    @field_validator("sandbox_limits", mode="before")
    @classmethod
    def _limits_from_text(cls, value: Any) -> Any:
        """`HERMES_LOCAL_SANDBOX_LIMITS="processes=64,memory_mb=512"` as well as a TOML table."""
        if isinstance(value, str):
            pairs = [part.split("=", 1) for part in value.split(",") if part.strip()]
            if any(len(p) != 2 for p in pairs):
                raise ValueError("write sandbox_limits as name=value pairs, e.g. processes=64,memory_mb=512")
            return {k.strip(): v.strip() for k, v in pairs}
        return value

    tools: list[str] = Field(default_factory=list)  # toolsets/tool names offered; empty = all
    max_tools_in_prompt: int = Field(8, ge=1)  # more enabled tools than this: route through open_toolset
    mcp: McpConfig = Field(default_factory=McpConfig)
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)  # path-scoped allow/ask/deny rules
    hooks: list[HookConfig] = Field(default_factory=list)  # [[hooks]]: commands run on pre_tool, post_tool, ...
    agents: Profiles = Field(default_factory=dict)  # [agents.NAME] specialists offered through `delegate` (issue 30)
    router: str = Field("rules", pattern="^(rules|model)$")  # who takes a --team task: keywords, or one model call
    router_model: str | None = None  # a second, small model (name or GGUF) picking who and which toolsets
    max_depth: int = Field(MAX_DEPTH, ge=1, le=4)  # how deep delegations may nest


def config_file() -> Path:
    return home_dir() / "config.toml"


def _env_overrides() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is None or name in TABLES:  # nested tables come from the config file only
            continue
        if field.annotation in (list[str], list[str] | None, list[float] | None):
            out[name] = [part.strip() for part in raw.split(",") if part.strip()]
        elif field.annotation == dict[str, float]:  # NAME=SECONDS,NAME=SECONDS
            pairs = (part.partition("=") for part in raw.split(",") if part.strip())
            out[name] = {k.strip(): v.strip() for k, _, v in pairs}
        else:
            out[name] = raw
    return out


def load_settings(
    cli_overrides: dict[str, Any] | None = None, confirm: Callable[[ConfigChange], bool] | None = None
) -> Settings:
    """Merge defaults, the config file, the environment and CLI values (None means "not given").

    A setting that lowers safety changed in the config file during a run (`RunWatch`) is used only once
    `confirm(change)` (a person at a terminal) says yes; otherwise UserError names the file."""
    check_config_changes(confirm)
    merged: dict[str, Any] = {}
    path = config_file()
    if path.is_file():
        try:
            merged.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"config file {path} is not valid TOML ({exc}); fix or delete it") from exc
        except OSError as exc:
            raise UserError(f"config file {path} cannot be read ({exc.strerror}); fix its permissions") from exc
    merged.update(_env_overrides())
    merged.update({k: v for k, v in (cli_overrides or {}).items() if v is not None})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise UserError(f"invalid setting {one_line(exc)} (check {path}, {ENV_PREFIX}* variables and flags)") from exc


def settings_for(cls: type[T], settings: Settings, **overrides: Any) -> T:
    """An instance of dataclass `cls` from the settings of the same names (the others keep their defaults): how
    `LlamaParams` and `AgentConfig` are built, so a field added to both is wired without code."""
    names = {f.name for f in dataclasses.fields(cls)} & set(Settings.model_fields)  # type: ignore[arg-type]
    return cls(**{name: getattr(settings, name) for name in names if name not in overrides}, **overrides)


# -- settings that lower safety, changed on disk during a run: a run records those of config.toml when it starts;
# lower ones when it ends (or when a later start finds it died) wait for a person's yes (`check_config_changes`).
SANDBOX_RANK = {"bwrap": 0, "auto": 1, "off": 2}
_SAFETY_KEYS = ("sandbox", "allow_tools", "allow_hosts", "deny_tools")


@dataclasses.dataclass(frozen=True)
class ConfigChange:
    """Settings of `file` that lower safety, changed during a run: what they were and which changed."""

    file: str
    keys: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.file} changed during a run ({', '.join(self.keys)} now lower safety)"


def _safety(path: Path) -> dict[str, Any]:
    """The file's safety settings as written (absent keys: the defaults), {} when unreadable."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    defaults = Settings.model_fields
    out = {k: raw.get(k, defaults[k].get_default(call_default_factory=True)) for k in _SAFETY_KEYS}
    servers = raw.get("mcp", {}).get("servers", {}) if isinstance(raw.get("mcp"), dict) else {}
    out["mcp"] = {str(k): repr(v) for k, v in servers.items()} if isinstance(servers, dict) else {}
    return out | shaping_of(raw)


def lowered(before: dict[str, Any], now: dict[str, Any]) -> tuple[str, ...]:
    """The safety settings that are lower in `now` than in `before` (an MCP server added or changed counts)."""
    if not before or not now:
        return ()

    def names(d: dict[str, Any], key: str) -> set[str]:
        value = d.get(key)
        return {str(v) for v in value} if isinstance(value, list) else set()

    keys = []
    if SANDBOX_RANK.get(str(now.get("sandbox")), 2) > SANDBOX_RANK.get(str(before.get("sandbox")), 2):
        keys.append("sandbox")
    keys += [k for k in ("allow_tools", "allow_hosts") if names(now, k) - names(before, k)]
    keys += shaping_lowered(before, now)
    if names(before, "deny_tools") - names(now, "deny_tools"):
        keys.append("deny_tools")
    servers_before, servers_now = before.get("mcp") or {}, now.get("mcp") or {}
    keys += [f"mcp.servers.{n}" for n, v in servers_now.items() if servers_before.get(n) != v]
    return tuple(keys)


def _watch_dir() -> Path:
    return home_dir() / "state" / "runs"


def _pending_file() -> Path:
    return home_dir() / "state" / "config-change.json"


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def _proc_start(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


class RunWatch:
    """One run's record of the safety settings it started with; `end()` flags a lowering made meanwhile."""

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.record = _watch_dir() / f"{os.getpid()}-{next(self._ids)}.json"
        data = {"pid": os.getpid(), "start": _proc_start(os.getpid()), "safety": _safety(config_file())}
        with contextlib.suppress(OSError):
            _write_json(self.record, data)

    def end(self) -> None:
        _settle(self.record)


def _settle(record: Path) -> None:
    """Compare a run's record with the file now, flag a lowering, and remove the record."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    keys = lowered(data.get("safety") or {}, _safety(config_file()))
    with contextlib.suppress(OSError):
        if keys:
            old = _read_pending()
            before = old["before"] if old else data.get("safety")
            _write_json(_pending_file(), {"file": str(config_file()), "before": before})
        record.unlink()


def _read_pending() -> dict[str, Any] | None:
    try:
        data = json.loads(_pending_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_config_changes(confirm: Callable[[ConfigChange], bool] | None = None) -> None:
    """Refuse (UserError, one line) a safety-lowering change made during a run until `confirm` says yes.

    Records of runs that died without ending are settled first. A change since undone is forgotten; an
    accepted one is not asked again."""
    with contextlib.suppress(OSError):
        for record in _watch_dir().glob("*.json"):
            pid, _, _ = record.name.partition("-")
            try:
                data = json.loads(record.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not pid.isdigit() or _proc_start(int(pid)) != data.get("start"):
                _settle(record)  # its process is gone
    pending = _read_pending()
    if pending is None:
        return
    keys = lowered(pending.get("before") or {}, _safety(config_file()))
    if keys:
        change = ConfigChange(str(pending.get("file") or config_file()), keys)
        if confirm is None or not confirm(change):
            raise UserError(
                f"{change.describe()}; it is not used until you confirm it on a terminal (run any hermes-local "
                "command there), or restore the file"
            )
    _pending_file().unlink(missing_ok=True)
