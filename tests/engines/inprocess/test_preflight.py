"""The pre-flight load: a loader that crashes in the child gives one line and spares the process; verdicts cached.

The crashing loaders below kill their own process with a signal, as llama.cpp's CUDA backend did (SIGSEGV) and
AMX kernels do (SIGILL); the child imports them by name, so the repository root is put on its PYTHONPATH.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.inprocess import preflight
from hermes_local.engines.inprocess.llamacpp import LlamaParams
from hermes_local.errors import ModelLoadError

ROOT = Path(__file__).resolve().parents[3]
HERE = "tests.engines.inprocess.test_preflight"


def segfault(path: str, params: dict) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def illegal_instruction(path: str, params: dict) -> None:
    os.kill(os.getpid(), signal.SIGILL)


def count_and_pass(path: str, params: dict) -> None:
    marker = Path(os.environ["PREFLIGHT_MARKER"])
    marker.write_text(marker.read_text() + "x" if marker.exists() else "x")


def refuse(path: str, params: dict) -> None:
    raise ValueError("not a model")


@pytest.fixture(autouse=True)
def child_imports_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HERMES_LOCAL_PREFLIGHT", "on")


def test_a_crashing_load_is_one_line_naming_the_build_and_the_fix_and_is_cached(embedded_model_path: Path) -> None:
    params = LlamaParams(n_ctx=512, n_gpu_layers=-1)
    with pytest.raises(ModelLoadError) as caught:
        preflight.preflight(embedded_model_path, params, loader=f"{HERE}:segfault")
    line = caught.value.line
    assert "\n" not in line
    assert "crashed (SIGSEGV)" in line and embedded_model_path.name in line and "n_gpu_layers=-1" in line
    assert "llama-cpp-python" in line and "--n-gpu-layers 0" in line and "CMAKE_ARGS" in line
    # cached: the same build, model and layers fail at once, even with a loader that would pass now
    with pytest.raises(ModelLoadError, match="SIGSEGV"):
        preflight.preflight(embedded_model_path, params, loader=f"{HERE}:count_and_pass")
    with pytest.raises(ModelLoadError, match="SIGILL"):  # other layers: checked anew
        preflight.preflight(
            embedded_model_path, LlamaParams(n_ctx=512, n_gpu_layers=3), loader=f"{HERE}:illegal_instruction"
        )


def test_a_passing_load_runs_once_per_build_model_and_layers(
    embedded_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "calls"
    monkeypatch.setenv("PREFLIGHT_MARKER", str(marker))
    for _ in range(3):
        preflight.preflight(embedded_model_path, LlamaParams(n_ctx=512), loader=f"{HERE}:count_and_pass")
    assert marker.read_text() == "x"
    preflight.preflight(embedded_model_path, LlamaParams(n_ctx=1024), loader=f"{HERE}:count_and_pass")
    assert marker.read_text() == "xx"


def test_an_ordinary_failure_is_left_to_the_real_load_and_not_cached(embedded_model_path: Path) -> None:
    preflight.preflight(embedded_model_path, LlamaParams(n_ctx=512), loader=f"{HERE}:refuse")  # no verdict: no raise
    assert not (Path(os.environ["HERMES_LOCAL_HOME"]) / "cache" / "preflight.json").exists()


def test_off_and_auto_on_a_cpu_build_skip_the_child(embedded_model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_LOCAL_PREFLIGHT", "off")
    preflight.preflight(embedded_model_path, LlamaParams(n_ctx=512), loader=f"{HERE}:segfault")
    monkeypatch.setenv("HERMES_LOCAL_PREFLIGHT", "auto")
    monkeypatch.setattr("hermes_local.engines.inprocess.backend.gpu_offload_available", lambda: False)
    preflight.preflight(embedded_model_path, LlamaParams(n_ctx=512), loader=f"{HERE}:segfault")
    monkeypatch.setattr("hermes_local.engines.inprocess.backend.gpu_offload_available", lambda: True)
    with pytest.raises(ModelLoadError):
        preflight.preflight(embedded_model_path, LlamaParams(n_ctx=512), loader=f"{HERE}:segfault")
    preflight.preflight(embedded_model_path, LlamaParams(n_ctx=512, n_gpu_layers=0), loader=f"{HERE}:segfault")


def test_run_ends_with_the_line_and_exit_2_when_the_load_would_crash(
    embedded_model_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preflight, "LOADER", f"{HERE}:segfault")
    args = [
        "run",
        "list the files",
        "--model",
        str(embedded_model_path),
        "--n-ctx",
        "1792",
        "--workspace",
        str(workspace),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "error: llama.cpp crashed (SIGSEGV)" in res.output and "--n-gpu-layers 0" in res.output
    assert "Traceback" not in res.output


@pytest.mark.real_model
def test_the_default_loader_passes_on_this_build(embedded_model_path: Path) -> None:
    preflight.preflight(embedded_model_path, LlamaParams(n_ctx=512, n_gpu_layers=0))
    assert list(preflight._read_cache().values()) == ["ok"]


def sigill_with_extra_buffers(path: str, params: dict) -> None:
    if params["extra_buffers"]:
        os.kill(os.getpid(), signal.SIGILL)


def test_on_an_amx_cpu_extra_buffers_are_kept_where_they_pass_and_dropped_where_they_die(
    embedded_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_LOCAL_PREFLIGHT", "auto")  # a CPU-only load: AMX alone makes the check run
    monkeypatch.setattr("hermes_local.engines.inprocess.backend.gpu_offload_available", lambda: False)
    monkeypatch.setattr(preflight, "_amx_risk", lambda: True)
    kept = LlamaParams(n_ctx=512, n_gpu_layers=0)
    preflight.preflight(embedded_model_path, kept, loader=f"{HERE}:passes")
    assert kept.extra_buffers is True
    dropped = LlamaParams(n_ctx=768, n_gpu_layers=0)
    preflight.preflight(embedded_model_path, dropped, loader=f"{HERE}:sigill_with_extra_buffers")
    assert dropped.extra_buffers is False
    again = LlamaParams(n_ctx=768, n_gpu_layers=0)  # cached: no child, the same answer
    preflight.preflight(embedded_model_path, again, loader=f"{HERE}:segfault")
    assert again.extra_buffers is False
    with pytest.raises(ModelLoadError, match="SIGSEGV"):  # another crash is not an AMX matter
        preflight.preflight(embedded_model_path, LlamaParams(n_ctx=1024, n_gpu_layers=0), loader=f"{HERE}:segfault")


def passes(path: str, params: dict) -> None:
    return None
