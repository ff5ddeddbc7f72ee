"""Draft-model speculative decoding on the real model: the embedded SmolLM2 drafting for itself.

With batch-invariant kernels (the `exact_llm` fixture) the output at temperature 0 is identical to decoding
without a draft, and a model drafting for itself has its drafts kept; a model of another vocabulary is refused.
Prompt lookup and fast-forward are off here so every draft comes from the draft model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hermes_local.engines.inprocess.draftmodel import attach_draft
from hermes_local.errors import UserError
from hermes_local.llm import CallOptions
from hermes_local.prompts import chat_tokens

pytestmark = pytest.mark.real_model

PROMPTS = [
    "Write two sentences about the sea.",
    "List three fruits, one per line.",
    "What is the capital of France? Answer briefly.",
    "Explain in one sentence what a file system is.",
]


def outputs(llm, *, draft: bool) -> list[list[int]]:
    got = []
    for text in PROMPTS:
        llm.reset_cache()  # every run prefills its prompt in the same batch shape
        tokens = chat_tokens([{"role": "user", "content": text}], llm)
        got.append(llm.complete(tokens, CallOptions(max_tokens=40, temperature=0.0)).tokens)
    return got


def test_drafting_for_itself_gives_the_plain_output_and_keeps_the_drafts(exact_llm, embedded_model_path: Path) -> None:
    saved = exact_llm.drafting, exact_llm.fast_forward
    exact_llm.drafting = exact_llm.fast_forward = False
    try:
        plain = outputs(exact_llm, draft=False)
        draft = attach_draft(exact_llm, embedded_model_path)
        drafted = outputs(exact_llm, draft=True)
    finally:
        exact_llm.drafting, exact_llm.fast_forward = saved
        exact_llm.draft_model = None
    assert drafted == plain
    assert draft.counts["proposed"] > 40 and draft.counts["accepted"] >= 0.95 * draft.counts["proposed"]


def test_a_draft_model_of_another_vocabulary_is_refused(exact_llm, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    from synthetic_gguf import write

    other = write(tmp_path / "tiny.gguf", "tiny")
    # the synthetic model (random weights) shares the embedded vocabulary, so it is accepted ...
    assert attach_draft(exact_llm, other).n_vocab == exact_llm._llama.n_vocab()
    exact_llm.draft_model = None
    # ... and a model with another vocabulary (the MiniLM embedding model, if installed) is not
    from hermes_local.models.registry import registry_rows

    minilm = [r["path"] for r in registry_rows() if r["path"] and "minilm" in r["name"].lower()]
    if not minilm:
        pytest.skip("no model of another vocabulary installed")
    with pytest.raises(UserError, match="another vocabulary"):
        attach_draft(exact_llm, Path(minilm[0]))
    assert exact_llm.draft_model is None


def test_run_with_draft_model_loads_it_beside_the_chat_model(workspace: Path) -> None:
    from typer.testing import CliRunner

    from hermes_local import engines
    from hermes_local.cli.app import app

    args = ["run", "What time is it?", "--draft-model", "smollm2", "--tool-choice", "required", "--max-steps", "1",
            "--n-ctx", "2304", "--json", "--no-memory", "--workspace", str(workspace)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code in (0, 3), res.output
    loaded = [llm for key, llm in engines._loaded.items() if "2304" in key[1] and key[2] != "None"]
    assert loaded and loaded[0].draft_model is not None
    assert loaded[0].draft_model.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    res = CliRunner().invoke(app, [*args[:3], "no-such-model", *args[4:]])
    assert res.exit_code == 2 and "no-such-model" in res.output
