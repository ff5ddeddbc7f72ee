"""Wiring: registry offload/context settings reach llama.cpp unless the user set them."""

from __future__ import annotations

import pytest

from hermes_local.config import home_dir, load_settings
from hermes_local.runtime import load_llm


@pytest.mark.real_model
def test_registry_n_ctx_applies_unless_the_user_sets_it() -> None:
    home_dir().mkdir(parents=True, exist_ok=True)
    (home_dir() / "models.toml").write_text("[models.smollm2]\nn_ctx = 1024\nn_gpu_layers = 0\nmain_gpu = 0\n")
    from_registry = load_llm(load_settings({"model": "smollm2"}))
    assert from_registry.n_ctx == 1024 and from_registry.params.n_gpu_layers == 0
    from_flag = load_llm(load_settings({"model": "smollm2", "n_ctx": 2048}))
    assert from_flag.n_ctx == 2048
    assert load_llm(load_settings({"model": "smollm2"})) is from_registry  # one Llama per settings, reused
