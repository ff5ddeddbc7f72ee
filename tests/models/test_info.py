"""`models info` on a registry entry not downloaded yet, and offload as the real llama.cpp build says (issue 29)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.inprocess.backend import gpu_offload_available

runner = CliRunner()


def test_models_info_on_a_registry_model_not_downloaded_yet() -> None:
    res = runner.invoke(app, ["models", "info", "hermes-2-pro-llama-3-8b:Q5_K_M"])
    assert res.exit_code == 0, res.stderr
    assert "size:            5.73 GB" in res.stdout and "quant:           Q5_K_M" in res.stdout
    assert "chat format:     chatml; tool calls: hermes" in res.stdout
    assert (
        "hermes-local models download hermes-2-pro-llama-3-8b:Q5_K_M fetches Hermes-2-Pro-Llama-3-8B-Q5_K_M.gguf"
        in res.stdout
    )
    data = json.loads(runner.invoke(app, ["models", "info", "hermes-3", "--json"]).stdout)
    assert data["downloaded"] is False and data["file"] == "Hermes-3-Llama-3.1-8B.Q4_K_M.gguf"
    assert (data["repo"], data["size"], data["chat_format"]) == (
        "NousResearch/Hermes-3-Llama-3.1-8B-GGUF",
        4_920_000_000,
        "chatml",
    )


def test_models_info_reports_offload_from_the_real_build() -> None:
    offload = gpu_offload_available()
    res = runner.invoke(app, ["models", "info", "embedded", "--n-gpu-layers", "-1", "--json"])
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["gpu_offload"] is offload
    assert (data["memory"]["layers_on_gpu"] > 0) is offload  # no "31/31 layers on GPU" on a CPU-only build
    text = runner.invoke(app, ["models", "info", "embedded", "--n-gpu-layers", "-1"]).stdout
    assert ("CPU only" in text) is not offload
