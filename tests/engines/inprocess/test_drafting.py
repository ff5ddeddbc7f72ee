"""Prompt-lookup drafting: proposals from earlier n-gram occurrences; greedy-exact on the real model."""

from __future__ import annotations

import pytest

from hermes_local.engines.inprocess.drafting import PromptLookup, best_draft
from hermes_local.llm import CallOptions


def test_proposes_what_followed_the_latest_earlier_occurrence() -> None:
    lookup = PromptLookup([5, 1, 2, 3, 4, 9, 1, 2, 7, 8, 0], min_ngram=2, max_draft=3)
    assert lookup.guess() == []  # suffix (8, 0) / (7, 8, 0) never seen before
    lookup.extend([1, 2])
    assert lookup.guess() == [7, 8, 0]  # latest earlier (1, 2) was followed by 7 8 0
    lookup.extend([3])
    assert lookup.guess() == [4, 9, 1]  # the trigram (1, 2, 3) wins over the bigram (2, 3)


def test_no_guess_without_history_and_never_past_the_end() -> None:
    assert PromptLookup().guess() == []
    lookup = PromptLookup([1, 2, 1, 2], min_ngram=2, max_draft=10)
    assert lookup.guess() == [1, 2]


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
            before = exact_llm.draft_counts["accepted"]
            try:
                outs.append(exact_llm.complete(tokens, CallOptions(max_tokens=120, temperature=0.0, grammar=grammar)))
            finally:
                exact_llm.drafting = default
            decodes[drafting] = decodes.get(drafting, 0) + exact_llm.draft_counts["accepted"] - before
        assert outs[0].tokens == outs[1].tokens, goal
    # Drafted tokens were kept. (It used to assert that more tokens were evaluated with drafting, i.e. that
    # some drafts were rejected; drafts are now made only where they pay, and here none had to be rejected.)
    assert decodes[True] > decodes[False]


def test_draft_length_adapts_to_acceptance() -> None:
    lookup = PromptLookup(list(range(40)) + list(range(10)), start_draft=16, max_draft=16)
    assert lookup.guess() == list(range(10, 26))
    assert lookup.propose() == [10, 11]  # the prior (p = 0.8) pays for two drafted tokens, not sixteen
    lookup.extend(list(range(10, 26)))  # the model copied: every guessed token was followed
    assert lookup.acceptance > 0.9 and len(lookup.propose()) >= 4
    lookup.record(8, 2)
    assert lookup.draft_len == 3  # what was kept, plus one, caps the next drafts
    lookup.record(3, 3)
    assert lookup.draft_len == 6  # all accepted: twice as long


def test_no_draft_while_the_model_does_not_follow_the_guesses_and_back_when_it_does() -> None:
    """Issue 28.5: a rejected draft costs decode time (0.95x on the copy-heavy task); guesses the model does
    not follow stop being drafted, and are still checked for free so drafting resumes when it copies."""
    text = list(range(100, 140))
    lookup = PromptLookup(text + text[:5])
    for i in range(12):  # the model paraphrases: it never emits the guessed token
        assert lookup.guess()
        lookup.propose()
        lookup.extend([1000 + i])
        lookup.extend(text[:5])  # the same n-gram again, so there is a guess each time
    assert lookup.acceptance < 0.5 and lookup.guess() and lookup.propose() == []
    for _ in range(4):  # now it copies: the guesses it follows bring drafting back
        guess = lookup.guess()
        lookup.propose()
        lookup.extend(guess)
        lookup.extend(text[:5])
    assert lookup.acceptance > 0.6 and lookup.propose()


def test_best_draft_follows_the_decode_cost_curve() -> None:
    assert best_draft(0.5, 0.5) == (0, 1.0)  # a coin-flip guess never pays for its batch slot at this cost
    d, gain = best_draft(0.95, 0.5)
    assert 3 <= d <= 6 and 1.4 < gain < 1.6  # the ceiling at 95 % acceptance on the 2-core machine
    assert best_draft(0.95, 0.0, 16)[0] == 16  # a flat decode cost (GPU): draft all
