"""`--n-gpu-layers auto` / `--n-ctx auto` on generated GGUFs with stated free memory (models/fit.py), and the run's
settings, `models info` and `doctor` taking them.

The 7B-shaped file is written sparse by scripts/synthetic_gguf.py (its header exact, its 3.9 GB of data a hole),
so only the header is read; the embedded SmolLM2 is the real file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.errors import UserError
from hermes_local.models.fit import Free, fit
from hermes_local.models.gguf import read_header
from hermes_local.runtime.model import find_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from synthetic_gguf import write  # noqa: E402  (scripts/)

GiB = 2**30


@pytest.fixture(scope="module")
def seven_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("gguf") / "synthetic-7b.Q4_0.gguf", "7b", sparse=True)


def test_the_7b_takes_every_layer_and_its_trained_context_on_a_large_card(seven_b: Path) -> None:
    chosen = fit(read_header(seven_b), "auto", "auto", Free(device=140 * GiB, host=64 * GiB))
    assert (chosen.layers, chosen.total_layers, chosen.n_gpu_layers, chosen.n_ctx) == (33, 33, 33, 32768)
    assert chosen.line().startswith("fit: n_gpu_layers=33 and n_ctx=32768 (33/33 layers on the GPU")


def test_on_an_8_gib_card_the_layers_stay_and_the_context_shrinks_to_fit(seven_b: Path) -> None:
    chosen = fit(read_header(seven_b), "auto", "auto", Free(device=8 * GiB, host=64 * GiB))
    assert (chosen.layers, chosen.n_ctx) == (33, 19712)
    assert chosen.estimate["gpu_bytes"] <= 8 * GiB - 512 * 2**20
    # one context step more would not fit: the largest that fits
    bigger = fit(read_header(seven_b), chosen.n_ctx + 256, "auto", Free(device=8 * GiB, host=64 * GiB))
    assert bigger.layers < 33


def test_a_small_card_gets_fewer_layers_at_the_floor_context_and_a_fixed_context_is_kept(seven_b: Path) -> None:
    header = read_header(seven_b)
    small = fit(header, "auto", "auto", Free(device=4 * GiB, host=64 * GiB))
    assert 0 < small.layers < 33 and small.n_ctx == 4096
    fixed = fit(header, 16384, "auto", Free(device=4 * GiB, host=64 * GiB))
    assert fixed.n_ctx == 16384 and fixed.layers < small.layers and fixed.auto == ("n_gpu_layers",)


def test_without_a_device_everything_stays_on_the_cpu_and_the_host_bounds_the_context(seven_b: Path) -> None:
    header = read_header(seven_b)
    assert (fit(header, "auto", "auto", Free(device=None, host=64 * GiB)).layers, 0) == (0, 0)
    tight = fit(header, "auto", "auto", Free(device=None, host=8 * GiB))
    assert tight.n_gpu_layers == 0 and 256 <= tight.n_ctx < 32768


def test_what_cannot_fit_is_refused_in_one_line_naming_the_fix(seven_b: Path) -> None:
    header = read_header(seven_b)
    with pytest.raises(UserError) as caught:
        fit(header, "auto", "auto", Free(device=None, host=2 * GiB))
    assert "does not fit this machine" in caught.value.line and "smaller quant" in caught.value.line
    with pytest.raises(UserError, match="--n-gpu-layers auto"):  # fixed values that overflow the device
        fit(header, 32768, -1, Free(device=8 * GiB, host=64 * GiB))
    assert fit(header, 4096, -1, Free(device=8 * GiB, host=64 * GiB)).auto == ()  # fixed and fitting: kept


def test_the_embedded_model_without_a_gpu_build_gets_its_trained_context(embedded_model_path: Path) -> None:
    chosen = fit(read_header(embedded_model_path), "auto", "auto", Free(device=None, host=16 * GiB))
    assert (chosen.layers, chosen.total_layers, chosen.n_ctx) == (0, 31, 8192)


def test_a_run_s_auto_settings_become_load_options_with_the_line(
    embedded_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings({"model": str(embedded_model_path), "n_ctx": "auto", "n_gpu_layers": "auto"})
    engine = find_model(settings).engine_model(settings)
    assert engine.load["n_ctx"] == 8192 and engine.load["n_gpu_layers"] == 0  # this build: no GPU device
    assert engine.note.startswith("fit: n_gpu_layers=0 and n_ctx=8192 (CPU only; n_ctx 8192)")
    monkeypatch.setenv("HERMES_LOCAL_DEVICE_FREE_MB", "8192")  # what auto would choose on an 8 GiB card
    monkeypatch.setattr("hermes_local.engines.inprocess.backend.gpu_offload_available", lambda: True)
    engine = find_model(settings).engine_model(settings)
    assert engine.load["n_gpu_layers"] == 31 and "31/31 layers on the GPU" in engine.note
    fixed = load_settings({"model": str(embedded_model_path)})
    assert "n_ctx" not in find_model(fixed).engine_model(fixed).load  # fixed values are not touched


def test_models_info_and_doctor_show_the_fit(embedded_model_path: Path, workspace: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["models", "info", str(embedded_model_path), "--n-ctx", "auto"])
    assert res.exit_code == 0, res.output
    assert "fit: n_ctx=8192 (CPU only; n_ctx 8192" in res.output and "at n_ctx=8192" in res.output
    res = runner.invoke(app, ["doctor", "--model", str(embedded_model_path), "--n-gpu-layers", "auto", "--no-speed",
                              "--workspace", str(workspace)])  # fmt: skip
    assert "fit:" in res.output and "n_gpu_layers=0" in res.output, res.output
    res = runner.invoke(app, ["run", "x", "--n-ctx", "lots", "--model", "replay:none.jsonl"])
    assert res.exit_code == 2 and "n_ctx" in res.output


def test_a_router_model_loaded_beside_it_is_reserved_first(
    seven_b: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_local.runtime.model import fit_settings

    router = write(tmp_path / "router-7b.Q4_0.gguf", "7b", sparse=True)  # a (large) second model beside the first
    monkeypatch.setenv("HERMES_LOCAL_DEVICE_FREE_MB", str(12 * 1024))
    alone = load_settings({"model": str(seven_b), "n_ctx": "auto", "n_gpu_layers": "auto", "memory": False})
    with_router = alone.model_copy(update={"router_model": str(router)})
    _, solo = fit_settings(alone, read_header(seven_b))
    _, shared = fit_settings(with_router, read_header(seven_b))
    assert solo.layers == 33 and solo.n_ctx == 32768
    assert shared.layers == 33 and shared.n_ctx < solo.n_ctx  # the router's weights and KV take their share first
    assert shared.estimate["gpu_bytes"] + read_header(router).path.stat().st_size < 12 * 2**30


@pytest.mark.real_model
def test_the_estimate_s_weights_are_what_llama_cpp_loads(embedded_model_path: Path, tmp_path: Path) -> None:
    """The fit stands on footprint's estimate: its weight bytes are what llama.cpp reports for the loaded model."""
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.models.footprint import estimate_memory

    tiny = write(tmp_path / "tiny.gguf", "tiny")
    for path in (embedded_model_path, tiny):
        llm = LlamaCppLLM(path, LlamaParams(n_ctx=512, n_threads=1, n_gpu_layers=0))
        assert llm._llama._model.size() == estimate_memory(path, 512, 0)["weights_bytes"]
