"""What `models qualify` found for a model file on this machine, and the run defaults it recommends.

`$HERMES_LOCAL_HOME/qualified.toml` (beside the user's models.toml) holds one table per qualified GGUF,
keyed by its absolute path and checked against its size (a replaced file is not qualified any more): when,
the probe pass rates per mode, the measured speed, and `defaults` — `tool_choice`, `max_tools_in_prompt`
(tools offered before routing), `n_ctx` and `n_gpu_layers` (as `models/fit.py` fitted them); `recommend` turns
probe results into defaults. Runs use the defaults for a setting the user did not set (flag, environment or
config file): `qualified_defaults`.
Reads headers and files only; never loads or runs a model.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from hermes_local.config import home_dir
from hermes_local.errors import UserError

DEFAULT_KEYS = ("tool_choice", "max_tools_in_prompt", "n_ctx", "n_gpu_layers")


def qualified_file() -> Path:
    return home_dir() / "qualified.toml"


def recommend(passes: dict[str, float], fit: dict[str, Any]) -> dict[str, Any]:
    """Defaults from the probe pass rates per mode (0..1): auto when it does as well as required (fewer forced
    calls), else required; fewer tools offered before routing for a model that passes under 2/3 in auto."""
    auto, required = passes.get("auto", 0.0), passes.get("required", 0.0)
    choice = "auto" if auto >= required else "required"
    tools = 8 if max(auto, required) >= 2 / 3 else 4
    memory = {"n_ctx": fit["n_ctx"], "n_gpu_layers": fit["n_gpu_layers"]}
    return {"tool_choice": choice, "max_tools_in_prompt": tools, **memory}


def _load() -> dict[str, Any]:
    path = qualified_file()
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise UserError(f"{path} is not valid TOML ({exc}); delete it and run `models qualify` again") from None
    models = data.get("models")
    return models if isinstance(models, dict) else {}


def qualification(model_path: str | Path | None) -> dict[str, Any] | None:
    """The record for this GGUF (None when not qualified, or the file changed size since)."""
    if model_path is None:
        return None
    path = Path(model_path).expanduser().resolve()
    record = _load().get(str(path))
    try:
        same = isinstance(record, dict) and record.get("size") == path.stat().st_size
    except OSError:
        return None
    return record if same else None


def qualified_defaults(model_path: str | Path | None) -> dict[str, Any]:
    """The run defaults recorded for this GGUF ({} when none)."""
    record = qualification(model_path)
    defaults = record.get("defaults") if record else None
    return {k: v for k, v in (defaults or {}).items() if k in DEFAULT_KEYS}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def save_qualification(model_path: Path, record: dict[str, Any]) -> Path:
    """Write (or replace) this GGUF's record; tables of scalars only (`defaults`, `probes`, `speed`)."""
    path = Path(model_path).expanduser().resolve()
    models = _load()
    models[str(path)] = {**record, "size": path.stat().st_size}
    lines = ["# written by `hermes-local models qualify`; runs use `defaults` unless a setting is given", ""]
    for key, rec in models.items():
        name = json.dumps(key, ensure_ascii=False)
        lines.append(f"[models.{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in rec.items() if not isinstance(v, dict)]
        for table, values in ((k, v) for k, v in rec.items() if isinstance(v, dict)):
            lines += ["", f"[models.{name}.{table}]"]
            lines += [f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in values.items() if not isinstance(v, dict)]
        lines.append("")
    out = qualified_file()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    return out
