"""`models qualify`'s record (issue 46): memory fit, recommendation (the thread count too), the qualified.toml round
trip, the lines that show it, and runs using the recorded defaults only for settings the user did not give."""

from __future__ import annotations

from pathlib import Path

from hermes_local.config import load_settings
from hermes_local.models.qualified import (
    fitness,
    qualification,
    qualification_lines,
    qualified_defaults,
    qualified_file,
    recommend,
    recommend_threads,
    save_qualification,
    thread_candidates,
    threads_line,
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
        "n_threads": "auto",  # nothing measured: keep the adaptive count
    }
    weak = recommend({"auto": 1 / 6, "required": 3 / 6}, fit)
    assert weak["tool_choice"] == "required" and weak["max_tools_in_prompt"] == 4
    assert recommend({"auto": 1.0}, fit, {"1": 50.0, "2": 40.0})["n_threads"] == 1


def test_a_fixed_thread_count_only_when_clearly_faster_than_all_the_cores_on_an_idle_machine() -> None:
    assert thread_candidates(1) == [1] and thread_candidates(2) == [1, 2] and thread_candidates(3) == [1, 2, 3]
    assert thread_candidates(16) == [1, 8, 15, 16]
    assert recommend_threads({"1": 30.0, "2": 50.0}) == "auto"  # all the cores are faster
    assert recommend_threads({"1": 43.0, "2": 40.0}) == "auto"  # faster, but under 10%: noise, keep adaptive
    assert recommend_threads({"1": 45.0, "2": 40.0}) == 1
    assert recommend_threads({1: 45.0, 2: 40.0}) == 1  # counts as numbers too
    assert recommend_threads({"1": 5.0, "8": 50.0, "15": 60.0, "16": 52.0}) == 15  # the fastest below all
    assert recommend_threads({"1": 5.0, "8": 50.0, "15": 55.0, "16": 52.0}) == "auto"
    assert recommend_threads({"1": 60.0, "2": 40.0}, busy_others=1.0) == "auto"  # measured beside a busy program
    assert recommend_threads({"1": 60.0, "2": 40.0}, busy_others=0.3) == 1
    assert recommend_threads({"2": 60.0}) == recommend_threads({}) == "auto"  # nothing to compare


def test_the_thread_figures_are_shown_in_numeric_order_with_why_no_fixed_count() -> None:
    record = {
        "qualified_at": "2025-01-02T03:04:05+00:00",
        "repeat": 2,
        "passes": {"auto": 0.8333, "required": 0.6667},
        "defaults": {"tool_choice": "auto", "n_threads": 1},
        "threads": {"10": 30.0, "1": 45.5, "2": 40.0},
        "speed": {"decode_tps": 40.0, "busy_others": 0.1},
    }
    assert threads_line(record) == "threads: 1 → 45.5 tok/s, 2 → 40.0 tok/s, 10 → 30.0 tok/s (decode)"
    assert qualification_lines(record) == [
        "qualified 2025-01-02T03:04:05+00:00: pass^2 auto 83%, required 67%; tool_choice=auto, n_threads=1",
        "verdict: fit for auto mode (passes 83% of probes)",
        "threads: 1 → 45.5 tok/s, 2 → 40.0 tok/s, 10 → 30.0 tok/s (decode)",
    ]
    busy = record | {"speed": {"busy_others": 1.2}}
    assert threads_line(busy).endswith("(decode); others kept 1.2 cores busy meanwhile, so no fixed count")
    assert threads_line({"defaults": {}}) == "" and len(qualification_lines({"defaults": {}})) == 1
    assert qualification_lines(None) == []


def test_the_record_round_trips_and_a_changed_file_is_not_qualified(tmp_path: Path) -> None:
    path = _gguf(tmp_path)
    defaults = {"tool_choice": "required", "max_tools_in_prompt": 4, "n_ctx": 2048, "n_gpu_layers": 0, "n_threads": 1}
    record = {"model": "tiny", "passes": {"auto": 0.5, "required": 0.8333}, "defaults": defaults, "repeat": 2}
    record |= {"threads": {"1": 45.5, "2": 40.0}, "speed": {"decode_tps": 41.0, "busy_others": 0.12}}
    written = save_qualification(path, record)
    text = written.read_text(encoding="utf-8")
    assert written == qualified_file() and "[models." in text and '"n_threads" = 1\n' in text and '"2" = 40.0' in text
    got = qualification(path)
    assert got is not None and got["passes"] == {"auto": 0.5, "required": 0.8333} and got["model"] == "tiny"
    assert got["threads"] == {"1": 45.5, "2": 40.0} and got["speed"]["busy_others"] == 0.12
    assert qualified_defaults(path) == defaults and isinstance(qualified_defaults(path)["n_threads"], int)
    save_qualification(path, record | {"defaults": defaults | {"n_threads": "auto"}})
    saved = qualification(path)
    assert saved is not None and saved["defaults"]["n_threads"] == "auto"  # recorded, and shown
    assert "n_threads" not in qualified_defaults(path)  # but auto means: leave it unset
    for edited in (0, -2, "4", True):  # the file is the user's to edit: only a positive count applies
        save_qualification(path, record | {"defaults": {"n_threads": edited}})
        assert qualified_defaults(path) == {}
    path.write_bytes(path.read_bytes() + b"\0")  # replaced by another file: the record no longer applies
    assert qualification(path) is None and qualified_defaults(path) == {}


def test_runs_use_the_recorded_defaults_unless_the_user_set_them(tmp_path: Path) -> None:
    path = _gguf(tmp_path)
    defaults = {"tool_choice": "required", "max_tools_in_prompt": 4, "n_ctx": 2048, "n_gpu_layers": 0, "n_threads": 1}
    save_qualification(path, {"model": "tiny", "defaults": defaults})
    plain = load_settings({"model": str(path)})
    assert qualified_settings(plain, path) == defaults
    told = load_settings({"model": str(path), "tool_choice": "auto", "n_ctx": 1024, "n_threads": 2})
    assert qualified_settings(told, path) == {"max_tools_in_prompt": 4, "n_gpu_layers": 0}
    load = ModelSource(str(path), path=path).engine_model(plain).load
    assert load == {"n_ctx": 2048, "n_gpu_layers": 0, "n_threads": 1}  # the load options reach the engine
    assert ModelSource(str(path), path=path).engine_model(told).load == {"n_gpu_layers": 0}


def test_the_verdict_says_what_the_pass_rates_allow() -> None:
    """Gemma 3 270M (base) passed no probe in either mode and was still handed tool_choice=auto with no word on
    what that means; the verdict says it plainly, in `models qualify`, `models list` and `models info`."""
    assert fitness({"auto": 0.0, "required": 0.0}).startswith("passed no probe: not fit for tool calling")
    assert fitness({"auto": 5 / 6, "required": 1.0}) == "fit for auto mode (passes 83% of probes)"
    assert fitness({"auto": 1 / 6, "required": 5 / 6}).startswith("fit for required mode only (auto passes 17%")
    assert fitness({"auto": 1 / 6, "required": 0.0}).startswith("unreliable: passes 17% of probes at best")
    lines = qualification_lines({"qualified_at": "t", "repeat": 2, "passes": {"auto": 0.0, "required": 0.0}})
    assert lines[1].startswith("verdict: passed no probe")
