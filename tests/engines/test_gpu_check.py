"""scripts/gpu_check.sh --dry-run: the GPU check's every step on this CPU machine (no build, a tiny synthetic
model, a pretend 8 GiB card), and the one table it prints. On a GPU machine the same script builds the CUDA
wheel and measures; here it proves the steps and the table are wired."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.real_model  # llama.cpp loads the tiny synthetic model


def test_the_dry_run_runs_every_step_and_prints_the_table(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [str(ROOT / "scripts" / "gpu_check.sh"), "--dry-run"], env=env, capture_output=True, text=True, timeout=600
    )
    table = proc.stdout
    assert proc.returncode == 0, (table, proc.stderr[-2000:])
    rows = dict([p.strip() for p in line.split("  ", 1)] for line in table.splitlines() if "  " in line)
    assert rows["step model"].startswith("ok") and rows["step task"].startswith("ok")
    assert rows["step run_gpu"].startswith("ok") and rows["step run_auto"].startswith("ok")
    assert rows["step build"] == "skipped (dry run)"
    assert rows["doctor gpu build"] == "CPU backend only: this llama.cpp build cannot offload"
    assert "CPU-only" in rows["doctor problem"]  # this build: doctor --gpu says so, with the reinstall command
    assert rows["doctor auto fit"].startswith("n_gpu_layers=3 and n_ctx=2048 (3/3 layers on the GPU")  # 8 GiB
    assert rows["run_auto"].startswith("fit: n_gpu_layers=3 and n_ctx=2048")
    assert rows["run_gpu"].startswith("stopped max_steps")
    assert "evaluated/new 1.000" in rows["task_cpu"]
    assert not (ROOT / ".gpu-bundle").exists() or (ROOT / ".gitignore").read_text().count("/.gpu-bundle/") == 1
