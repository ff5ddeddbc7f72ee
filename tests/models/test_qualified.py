"""`models qualify`'s record (issue 46): memory fit, recommendation, the qualified.toml round trip, and runs using
the recorded defaults only for settings the user did not give."""

from __future__ import annotations

from pathlib import Path

from hermes_local.config import load_settings
from hermes_local.models.qualified import (
    qualification,
    qualified_defaults,
    qualified_file,
    recommend,
    save_qualification,
)
from hermes_local.runtime.model import ModelSource, qualified_settings
from tests.models.test_gguf import make_gguf


def _gguf(tmp_path: Path, **metadata: object) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(make_gguf(dict(metadata)))
    return path


def test_recommendation_follows_the_probe_pass_rates() -> None:
    fit = {"n_ctx": 4096, "n_gpu_layers": 0}
    assert recommend({"auto": 5 / 6, "required": 4 / 6}, fit) == {
        "tool_choice": "auto",
        "max_tools_in_prompt": 8,
        "n_ctx": 4096,
        "n_gpu_layers": 0,
    }
    weak = recommend({"auto": 1 / 6, "required": 3 / 6}, fit)
    assert weak["tool_choice"] == "required" and weak["max_tools_in_prompt"] == 4


def test_the_record_round_trips_and_a_changed_file_is_not_qualified(tmp_path: Path) -> None:
    path = _gguf(tmp_path)
    defaults = {"tool_choice": "required", "max_tools_in_prompt": 4, "n_ctx": 2048, "n_gpu_layers": 0}
    record = {"model": "tiny", "passes": {"auto": 0.5, "required": 0.8333}, "defaults": defaults, "repeat": 2}
    written = save_qualification(path, record)
    assert written == qualified_file() and "[models." in written.read_text(encoding="utf-8")
    got = qualification(path)
    assert got is not None and got["passes"] == {"auto": 0.5, "required": 0.8333} and got["model"] == "tiny"
    assert qualified_defaults(path) == defaults
    path.write_bytes(path.read_bytes() + b"\0")  # replaced by another file: the record no longer applies
    assert qualification(path) is None and qualified_defaults(path) == {}


def test_runs_use_the_recorded_defaults_unless_the_user_set_them(tmp_path: Path) -> None:
    path = _gguf(tmp_path)
    defaults = {"tool_choice": "required", "max_tools_in_prompt": 4, "n_ctx": 2048, "n_gpu_layers": 0}
    save_qualification(path, {"model": "tiny", "defaults": defaults})
    plain = load_settings({"model": str(path)})
    assert qualified_settings(plain, path) == defaults
    told = load_settings({"model": str(path), "tool_choice": "auto", "n_ctx": 1024})
    assert qualified_settings(told, path) == {"max_tools_in_prompt": 4, "n_gpu_layers": 0}
    load = ModelSource(str(path), path=path).engine_model(plain).load
    assert load == {"n_ctx": 2048, "n_gpu_layers": 0}  # the load options reach the engine
    assert ModelSource(str(path), path=path).engine_model(told).load == {"n_gpu_layers": 0}
