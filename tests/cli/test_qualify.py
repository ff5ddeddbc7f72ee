"""`models qualify`'s thread sweep (issue 46) without a real model: `measure` times each count on one loaded model,
the command records the figures and the recommended `n_threads`, and `models list` / `models info` show them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import home_dir, load_settings
from hermes_local.llm import CallOptions, Completion, Usage
from hermes_local.models.qualified import qualification, qualified_defaults, save_qualification
from tests.models.test_gguf import make_gguf
from tests.runtime.test_model import TinyModel

DECODE = {1: 30.0, 2: 50.0}  # tok/s of the stand-in model per thread count
PROMPT = {1: 100.0, 2: 180.0}


class SweptLlama:
    """Stands in for `LlamaCppLLM` in `measure`: its speed depends on the thread count in force."""

    made: list[SweptLlama] = []

    def __init__(self, path: Path, params: Any, threads: Any = None) -> None:
        self.n_threads, self.pinned, self.resets = 2, [], 0
        self.drafting = self.fast_forward = True
        SweptLlama.made.append(self)

    def bos_tokens(self) -> list[int]:
        return [1]

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        return [7] * len(text.split())

    def reset_cache(self) -> None:
        self.resets += 1

    def use_threads(self, n: int) -> None:
        self.n_threads = n
        self.pinned.append(n)

    def complete(self, tokens: list[int], options: CallOptions) -> Completion:
        prompt_s = len(tokens) / PROMPT[self.n_threads]
        n = options.max_tokens
        usage = Usage(len(tokens), len(tokens), n, prompt_s + n / DECODE[self.n_threads], prompt_s)
        return Completion("x" * n, tokens=[7] * n, usage=usage)


def test_measure_times_each_thread_count_on_the_one_loaded_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_local.cli.gpu import measure
    from hermes_local.engines.inprocess import llamacpp

    monkeypatch.setattr(llamacpp, "LlamaCppLLM", SweptLlama)
    SweptLlama.made.clear()
    plain = measure(Path("m.gguf"), load_settings({}), 0, 4096, drafting=False)
    assert "threads" not in plain and plain["decode_tps"] == pytest.approx(50.0)
    got = measure(Path("m.gguf"), load_settings({}), 0, 4096, drafting=False, threads=[1, 2])
    llm = SweptLlama.made[-1]
    assert len(SweptLlama.made) == 2 and llm.pinned == [1, 2]  # one load, switched between counts
    assert llm.resets == 3  # the prompt evaluated whole each time, not taken from the KV cache
    assert got["threads"] == {n: pytest.approx({"prompt_tps": PROMPT[n], "decode_tps": DECODE[n]}) for n in (1, 2)}
    assert got["decode_tps"] == pytest.approx(50.0) and got["busy_others"] >= 0.0


def _fake_qualify(monkeypatch: pytest.MonkeyPatch, decode: dict[int, float], busy: float) -> list[list[int]]:
    """`models qualify` with its speed check and probes replaced, on a 2-core machine; returns the counts asked."""
    from hermes_local.cli import gpu
    from hermes_local.engines import threads
    from hermes_local.evals import qualify

    asked: list[list[int]] = []

    def measure(*args: Any, threads: list[int], **kwargs: Any) -> dict[str, Any]:
        asked.append(list(threads))
        table = {n: {"prompt_tps": 100.0, "decode_tps": decode[n]} for n in threads}
        return {"prompt_tps": 120.0, "decode_tps": 40.0, "load_s": 0.5, "threads": table, "busy_others": busy}

    def run_probes(settings: Any, repeat: int, on_run: Any = None) -> dict[str, Any]:
        verdicts = {p["id"]: f"{repeat}/{repeat}" for p in qualify.PROBES}
        return {"passes": {"auto": 1.0, "required": 1.0}, "probes": {m: verdicts for m in qualify.MODES}}

    monkeypatch.setattr(gpu, "measure", measure)
    monkeypatch.setattr(qualify, "run_probes", run_probes)
    monkeypatch.setattr(threads, "usable_cores", lambda: [0, 1])
    return asked


def test_qualify_records_the_thread_figures_and_a_clearly_faster_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(make_gguf())
    asked = _fake_qualify(monkeypatch, {1: 46.0, 2: 40.0}, busy=0.1)
    res = CliRunner().invoke(app, ["models", "qualify", str(model), "--repeat", "1"])
    assert res.exit_code == 0, res.output
    assert asked == [[1, 2]]
    assert "n_threads=1" in res.stdout and "threads: 1 → 46.0 tok/s, 2 → 40.0 tok/s (decode)" in res.stdout
    assert "threads:" not in res.stderr  # progress only there
    record = qualification(model)
    assert record is not None and record["threads"] == {"1": 46.0, "2": 40.0} and record["speed"]["busy_others"] == 0.1
    assert qualified_defaults(model)["n_threads"] == 1

    asked = _fake_qualify(monkeypatch, {1: 43.0, 2: 40.0}, busy=0.1)  # under 10% faster: keep auto
    res = CliRunner().invoke(app, ["models", "qualify", str(model), "--repeat", "1", "--json"])
    record = json.loads(res.stdout[res.stdout.index("{") :])
    assert record["defaults"]["n_threads"] == "auto" and record["threads"] == {"1": 43.0, "2": 40.0}
    assert "n_threads" not in qualified_defaults(model)

    _fake_qualify(monkeypatch, {1: 60.0, 2: 40.0}, busy=1.0)  # beside a busy program: not the machine's own
    res = CliRunner().invoke(app, ["models", "qualify", str(model), "--repeat", "1"])
    assert "n_threads=auto" in res.stdout and "others kept 1.0 cores busy meanwhile, so no fixed count" in res.stdout


def test_models_list_info_and_doctor_show_the_recorded_threads(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    TinyModel(monkeypatch)
    gguf = home_dir() / "models" / "tiny.Q8_0.gguf"
    record = {"qualified_at": "2025-01-02T03:04:05+00:00", "repeat": 1, "passes": {"auto": 1.0}}
    record |= {"defaults": {"tool_choice": "auto", "n_threads": 1}, "threads": {"1": 46.0, "2": 40.0}}
    save_qualification(gguf, record)
    listing = CliRunner().invoke(app, ["models", "list"])
    assert "tool_choice=auto, n_threads=1" in listing.stdout
    assert "    threads: 1 → 46.0 tok/s, 2 → 40.0 tok/s (decode)" in listing.stdout
    info = CliRunner().invoke(app, ["models", "info", "tiny"])
    assert info.exit_code == 0, info.output
    assert "qualified 2025-01-02T03:04:05+00:00: pass^1 auto 100%; tool_choice=auto, n_threads=1" in info.stdout
    assert "threads: 1 → 46.0 tok/s" in info.stdout
    as_json = CliRunner().invoke(app, ["models", "info", "tiny", "--json"])
    assert json.loads(as_json.stdout)["qualification"]["threads"] == {"1": 46.0, "2": 40.0}
    doctor = CliRunner().invoke(app, ["doctor", "--no-speed", "--model", "tiny", "--workspace", str(workspace)])
    assert "threads:          1 (set by models qualify)" in doctor.stdout, doctor.output


def test_models_list_shows_a_qualified_file_no_registry_entry_names(tmp_path: Path) -> None:
    gguf = tmp_path / "gemma-3-270m-q4_k_m.gguf"
    gguf.write_bytes(make_gguf())
    record = {"qualified_at": "2026-12-06T02:24:58+00:00", "repeat": 2, "passes": {"auto": 0.0, "required": 0.0}}
    save_qualification(gguf, record | {"size": gguf.stat().st_size, "defaults": {"tool_choice": "auto"}})
    listing = CliRunner().invoke(app, ["models", "list"])
    assert listing.exit_code == 0, listing.output
    tail = listing.stdout.split("qualified files no registry entry names (run them with --model PATH):\n", 1)[1]
    assert tail.startswith(f"  {gguf.resolve()}\n    qualified 2026-12-06T02:24:58+00:00: pass^2 auto 0%, required 0%")
    assert "    verdict: passed no probe: not fit for tool calling" in tail
    rows = json.loads(CliRunner().invoke(app, ["models", "list", "--json"]).stdout)
    assert [r["path"] for r in rows if r["name"] is None] == [str(gguf.resolve())]
