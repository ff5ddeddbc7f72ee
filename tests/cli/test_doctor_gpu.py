"""`doctor --gpu` on this machine's real llama.cpp build (CPU-only): the silent fallback is an error naming the
reinstall; with the build's facts replaced by a CUDA device's, the devices and the auto fit are shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.inprocess import backend


def test_a_cpu_only_build_is_a_problem_with_the_reinstall_command(embedded_model_path: Path, workspace: Path) -> None:
    if backend.gpu_offload_available():
        pytest.skip("this llama.cpp build can offload")
    args = ["doctor", "--gpu", "--model", str(embedded_model_path), "--workspace", str(workspace)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    assert "gpu build:        CPU backend only" in res.output
    assert "device CPU:" in res.output  # the devices llama.cpp registered, with their memory
    assert "GPU requested but this llama-cpp-python build is CPU-only" in res.output
    assert 'CMAKE_ARGS="-DGGML_CUDA=on" pip install --force-reinstall' in res.output
    assert "auto fit:         n_gpu_layers=0 and n_ctx=8192 (CPU only" in res.output


def test_a_gpu_device_shows_its_memory_and_what_auto_puts_on_it(
    embedded_model_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = {"name": "CUDA0", "description": "NVIDIA H200", "type": "gpu", "free": 140 * 2**30, "total": 141 * 2**30}
    cpu = {"name": "CPU", "description": "host", "type": "cpu", "free": 8 * 2**30, "total": 16 * 2**30}
    monkeypatch.setattr(backend, "devices", lambda: [card, cpu])
    monkeypatch.setattr(backend, "gpu_offload_available", lambda: True)
    real_info = backend.backend_info
    monkeypatch.setattr(backend, "backend_info", lambda: {**real_info(), "gpu_offload": True})
    args = ["doctor", "--gpu", "--no-speed", "--model", str(embedded_model_path), "--workspace", str(workspace)]
    res = CliRunner().invoke(app, args)
    assert "gpu build:        CUDA backend" in res.output, res.output
    assert "device CUDA0:     NVIDIA H200 (gpu), 150.32 GB free of 151.40 GB" in res.output
    assert "auto fit:         n_gpu_layers=31 and n_ctx=8192 (31/31 layers on the GPU" in res.output
    assert "CPU-only" not in res.output
