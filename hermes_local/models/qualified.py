"""What `models qualify` found for a model file on this machine, and the run defaults it recommends.

`$HERMES_LOCAL_HOME/qualified.toml` (beside the user's models.toml) holds one table per qualified GGUF,
keyed by its absolute path and checked against its size (a replaced file is not qualified any more): when,
the probe pass rates per mode, the measured speed, decode tok/s per thread count (`threads`), and `defaults` —
`tool_choice`, `max_tools_in_prompt` (tools offered before routing), `n_ctx` and `n_gpu_layers` (as
`models/fit.py` fitted them) and `n_threads` (a count, or "auto": the adaptive choice of `engines/threads.py`,
left unset); `recommend` turns probe results and speeds into defaults, `fitness` into a verdict in words.
Runs use the defaults for a setting the user did not set (flag, environment or config file):
`qualified_defaults`. `qualification_lines` and `threads_line` are the words `models list`, `models info` and
`models qualify` show; `qualified_files` lists every record.
Reads headers and files only; never loads or runs a model.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hermes_local.config import home_dir
from hermes_local.errors import UserError

DEFAULT_KEYS = ("tool_choice", "max_tools_in_prompt", "n_ctx", "n_gpu_layers", "n_threads")
CLEARLY_FASTER = 1.10  # a fixed thread count must decode this much faster than all the cores to replace `auto`
BUSY_CORE = 0.5  # others using more than half a core while measuring: the figures are not the machine's own


def qualified_file() -> Path:
    return home_dir() / "qualified.toml"


def thread_candidates(cores: int) -> list[int]:
    """The thread counts `models qualify` measures on `cores` usable cores: 1, half, all but one, all."""
    return sorted({max(1, n) for n in (1, cores // 2, cores - 1, cores)})


def recommend(
    passes: dict[str, float],
    fit: dict[str, Any],
    threads: Mapping[Any, float] | None = None,
    busy_others: float = 0.0,
) -> dict[str, Any]:
    """Defaults from the probe pass rates per mode (0..1): auto when it does as well as required (fewer forced
    calls), else required; fewer tools offered before routing for a model that passes under 2/3 in auto.
    `threads` (count -> decode tok/s, the largest count being all usable cores) gives `n_threads`: see
    `recommend_threads`."""
    auto, required = passes.get("auto", 0.0), passes.get("required", 0.0)
    choice = "auto" if auto >= required else "required"
    tools = 8 if max(auto, required) >= 2 / 3 else 4
    memory = {"n_ctx": fit["n_ctx"], "n_gpu_layers": fit["n_gpu_layers"]}
    n_threads = recommend_threads(threads or {}, busy_others)
    return {"tool_choice": choice, "max_tools_in_prompt": tools, **memory, "n_threads": n_threads}


def fitness(passes: Mapping[str, float]) -> str:
    """What the probe pass rates (0..1 per mode) say the model can do, in words a user acts on."""
    auto, required = passes.get("auto", 0.0), passes.get("required", 0.0)
    if max(auto, required) == 0:
        return "passed no probe: not fit for tool calling here; run it without tools or pick a larger model"
    if auto >= 2 / 3:
        return f"fit for auto mode (passes {auto:.0%} of probes)"
    if required >= 2 / 3:
        return f"fit for required mode only (auto passes {auto:.0%}, required {required:.0%})"
    return f"unreliable: passes {max(auto, required):.0%} of probes at best; expect runs that fail"


def recommend_threads(decode: Mapping[Any, float], busy_others: float = 0.0) -> int | str:
    """A fixed count only when one below all the cores decodes clearly faster (`CLEARLY_FASTER`) than all of them
    on a machine others left idle while it was measured; otherwise "auto", which keeps re-checking the free cores
    before every call (what pays when other programs compete, the case a busy measurement would mistake)."""
    speeds = {int(n): float(tps) for n, tps in decode.items()}
    if len(speeds) < 2 or busy_others >= BUSY_CORE:
        return "auto"
    every = max(speeds)
    best = max((n for n in speeds if n < every), key=lambda n: speeds[n])
    return best if speeds[best] >= CLEARLY_FASTER * speeds[every] else "auto"


def threads_line(record: Mapping[str, Any]) -> str:
    """`threads: 1 → 38.2 tok/s, 2 → 51.0 tok/s (decode)` from a record ("" when it has no thread figures)."""
    table = record.get("threads")
    if not isinstance(table, dict) or not table:
        return ""
    shown = ", ".join(f"{n} → {tps} tok/s" for n, tps in sorted(table.items(), key=_count_order))
    speed = record.get("speed")
    busy = speed.get("busy_others", 0.0) if isinstance(speed, dict) else 0.0
    busy = busy if isinstance(busy, (int, float)) else 0.0
    note = f"; others kept {busy:.1f} cores busy meanwhile, so no fixed count" if busy >= BUSY_CORE else ""
    return f"threads: {shown} (decode){note}"


def _count_order(item: tuple[Any, Any]) -> tuple[int, str]:
    """Thread counts in numeric order (keys are strings in the file: "10" after "2")."""
    return len(str(item[0])), str(item[0])


def qualification_lines(record: Mapping[str, Any] | None) -> list[str]:
    """What `models list` and `models info` show of a record: `qualified AT: pass^K auto 83%, required 67%;
    tool_choice=auto, ..., n_threads=auto` and its `threads_line` (none for None)."""
    if record is None:
        return []
    passes = ", ".join(f"{mode} {rate:.0%}" for mode, rate in record.get("passes", {}).items())
    chosen = ", ".join(f"{k}={v}" for k, v in record.get("defaults", {}).items())
    summary = f"qualified {record.get('qualified_at', '?')}: pass^{record.get('repeat', 1)} {passes}; {chosen}"
    verdict = f"verdict: {fitness(record.get('passes', {}))}" if isinstance(record.get("passes"), dict) else ""
    return [line for line in (summary, verdict, threads_line(record)) if line]


def qualified_files() -> dict[str, dict[str, Any]]:
    """Every qualification on record, by absolute path, whether or not a registry entry names the file
    (`models list` shows those none names)."""
    return {k: v for k, v in _load().items() if isinstance(v, dict)}


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
    """The run defaults recorded for this GGUF ({} when none; n_threads "auto" is left out: unset is auto)."""
    record = qualification(model_path)
    defaults = record.get("defaults") if record else None
    return {k: v for k, v in (defaults or {}).items() if k in DEFAULT_KEYS and _applies(k, v)}


def _applies(key: str, value: Any) -> bool:
    """n_threads "auto" (or anything but a positive count, the file being the user's to edit) leaves it unset."""
    return key != "n_threads" or (isinstance(value, int) and not isinstance(value, bool) and value > 0)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def save_qualification(model_path: Path, record: dict[str, Any]) -> Path:
    """Write (or replace) this GGUF's record; tables of scalars only (`defaults`, `probes`, `speed`, `threads`)."""
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
