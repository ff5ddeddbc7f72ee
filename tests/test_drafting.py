"""Prompt-lookup drafting: proposals from earlier n-gram occurrences; greedy-exact on the real model."""

from __future__ import annotations

import pytest

from hermes_local.drafting import PromptLookup


def test_proposes_what_followed_the_latest_earlier_occurrence() -> None:
    lookup = PromptLookup([5, 1, 2, 3, 4, 9, 1, 2, 7, 8, 0], max_draft=3)
    assert lookup.propose() == []  # suffix (8, 0) / (7, 8, 0) never seen before
    lookup.extend([1, 2])
    assert lookup.propose() == [7, 8, 0]  # latest earlier (1, 2) was followed by 7 8 0
    lookup.extend([3])
    assert lookup.propose() == [4, 9, 1]  # the trigram (1, 2, 3) wins over the bigram (2, 3)


def test_no_proposal_without_history_and_never_past_the_end() -> None:
    assert PromptLookup().propose() == []
    lookup = PromptLookup([1, 2, 1, 2], max_draft=10)
    assert lookup.propose() == [1, 2]


@pytest.mark.real_model
@pytest.mark.xfail(
    reason="open: with drafting on, this output diverges from plain greedy decoding (verification bug or "
    "batch-shape numerics, not yet diagnosed); drafting stays off by default",
    strict=False,
)
def test_drafting_is_greedy_exact_on_a_copy_task(real_llm) -> None:
    from hermes_local.grammar import tool_call_grammar
    from hermes_local.prompts import chat_tokens, render
    from hermes_local.runtime import build_registry

    registry = build_registry()
    system = render("system.jinja", tools=registry.schemas(), instructions="")
    text = "Milk, eggs, bread and butter.\nCall Ann at 5pm about the invoice for order 1182."
    goal = f"Write this text into todo.txt exactly:\n{text}"
    tokens = chat_tokens(
        [{"role": "system", "content": system}, {"role": "user", "content": goal}], real_llm, prefill="<tool_call>\n"
    )
    grammar = tool_call_grammar(list(registry))
    outs = []
    from hermes_local.kvcache import fixed_prefix

    for drafting in (False, True):
        real_llm._llama.n_tokens = min(real_llm._llama.n_tokens, fixed_prefix(real_llm, tokens))  # same prefill
        real_llm.drafting = drafting
        try:
            outs.append(real_llm.complete(tokens, max_tokens=120, temperature=0.0, grammar=grammar).text)
        finally:
            real_llm.drafting = False
    assert outs[0] == outs[1]
