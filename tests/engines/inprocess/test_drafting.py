"""Prompt-lookup drafting: proposals from earlier n-gram occurrences; greedy-exact on the real model."""

from __future__ import annotations

import pytest

from hermes_local.engines.inprocess.drafting import PromptLookup
from hermes_local.llm import CallOptions


def test_proposes_what_followed_the_latest_earlier_occurrence() -> None:
    lookup = PromptLookup([5, 1, 2, 3, 4, 9, 1, 2, 7, 8, 0], min_ngram=2, max_draft=3)
    assert lookup.propose() == []  # suffix (8, 0) / (7, 8, 0) never seen before
    lookup.extend([1, 2])
    assert lookup.propose() == [7, 8, 0]  # latest earlier (1, 2) was followed by 7 8 0
    lookup.extend([3])
    assert lookup.propose() == [4, 9, 1]  # the trigram (1, 2, 3) wins over the bigram (2, 3)


def test_no_proposal_without_history_and_never_past_the_end() -> None:
    assert PromptLookup().propose() == []
    lookup = PromptLookup([1, 2, 1, 2], min_ngram=2, max_draft=10)
    assert lookup.propose() == [1, 2]


COPY_GOALS = [
    "Write this text into todo.txt exactly:\nMilk, eggs, bread and butter.\nCall Ann at 5pm about invoice 1182.",
    "Save 'SELECT id, total FROM orders WHERE total > 100 ORDER BY id' into query.sql.",
    "Copy config/app.toml to config/app.toml.bak (the file says: port = 8080, host = localhost, debug = false).",
]


@pytest.mark.real_model
def test_drafting_is_greedy_exact_on_copy_tasks(exact_llm) -> None:
    """Identical tokens with and without drafting at temperature 0, and the drafts are really used."""
    from hermes_local.calls.grammar import tool_call_grammar
    from hermes_local.engines.inprocess.kvcache import fixed_prefix
    from hermes_local.prompts import chat_tokens, render
    from hermes_local.runtime import build_registry

    registry = build_registry()
    system = render("system.jinja", tools=registry.schemas(), instructions="")
    grammar = tool_call_grammar(list(registry))
    decodes = {}
    default = exact_llm.drafting
    for goal in COPY_GOALS:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": goal}]
        tokens = chat_tokens(messages, exact_llm, prefill="<tool_call>\n")
        outs = []
        for drafting in (False, True):
            exact_llm._llama.n_tokens = min(exact_llm._llama.n_tokens, fixed_prefix(exact_llm, tokens))
            exact_llm.drafting = drafting
            before = exact_llm.tokens_evaluated_total
            try:
                outs.append(exact_llm.complete(tokens, CallOptions(max_tokens=120, temperature=0.0, grammar=grammar)))
            finally:
                exact_llm.drafting = default
            evaluated = exact_llm.tokens_evaluated_total - before - outs[-1].usage.prompt_tokens_evaluated
            decodes[drafting] = decodes.get(drafting, 0) + evaluated
        assert outs[0].tokens == outs[1].tokens, goal
    assert decodes[True] > decodes[False]  # drafted tokens were evaluated (and some rejected)


def test_draft_length_adapts_to_acceptance() -> None:
    lookup = PromptLookup(list(range(40)) + list(range(10)), start_draft=4, max_draft=16)
    assert lookup.propose() == [10, 11, 12, 13]
    lookup.record(4, 4)
    assert lookup.draft_len == 8  # all accepted: twice as long
    lookup.record(8, 2)
    assert lookup.draft_len == 3  # what was kept, plus one
    lookup.record(3, 0)
    assert lookup.draft_len == 1
