"""Batched concurrent runs on the real model: several sequences in one context, decoded together."""

from __future__ import annotations

import threading

import pytest

from hermes_local.calls.grammar import tool_call_grammar
from hermes_local.llm import CallOptions
from hermes_local.prompts import chat_tokens, render
from hermes_local.runtime import build_registry

pytestmark = pytest.mark.real_model

TASKS = ["What time is it?", "Read the file notes.txt.", "List the files here.", "Remember that I like tea."]
MORE_TASKS = ["Write 'hi' to a.txt.", "Run `ls` in the shell.", "What is in the docs folder?", "Save 'tea' to memo."]


def prompts(llm, tasks: list[str] = TASKS) -> list[list[int]]:
    registry = build_registry()
    system = render("system.jinja", tools=registry.schemas(), instructions="")
    messages = [[{"role": "system", "content": system}, {"role": "user", "content": t}] for t in tasks]
    return [chat_tokens(m, llm, prefill="<tool_call>\n") for m in messages]


def test_batched_runs_match_single_runs_and_share_decode_steps(exact_llm) -> None:
    from hermes_local.engines.inprocess.batching import BatchedLLM

    grammar = tool_call_grammar(list(build_registry()))
    batch = prompts(exact_llm)
    single = [exact_llm.complete(p, CallOptions(max_tokens=48, temperature=0.0, grammar=grammar)).tokens for p in batch]
    batched = BatchedLLM(exact_llm, parallel=4)
    try:
        outs = batched.complete_many(batch, CallOptions(max_tokens=48, temperature=0.0, grammar=grammar))
        longest = max(o.usage.completion_tokens for o in outs)
        assert batched.steps <= longest + 2 * len(batch)  # one decode per step for all (not one per sequence)
        # the system prompt and tool schemas are evaluated once: later sequences share the first one's cells
        assert outs[0].usage.prompt_tokens_evaluated == len(batch[0])
        assert all(o.usage.prompt_tokens_evaluated < len(p) // 4 for o, p in zip(outs[1:], batch[1:], strict=True))
        # batch-invariant kernels: the same tokens as one sequence at a time (with its fast-forward)
        assert [o.tokens for o in outs] == single
        # threads calling complete() at once are served together; a second call reuses the KV prefix
        results: list = [None] * len(batch)

        def run(i: int) -> None:
            results[i] = batched.complete(batch[i], CallOptions(max_tokens=48, temperature=0.0, grammar=grammar))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batch))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.tokens for r in results] == single
        assert all(r.usage.prompt_tokens_evaluated < r.usage.prompt_tokens for r in results)
    finally:
        batched.close()


def test_shared_prefix_cells_survive_when_their_first_owner_moves_on(exact_llm) -> None:
    """A sequence that shares another's prefix cells keeps them when that other sequence is re-admitted
    with an unrelated prompt (its cells are dropped for it, not for the sharer)."""
    from hermes_local.engines.inprocess.batching import BatchedLLM

    grammar = tool_call_grammar(list(build_registry()))
    first, second = prompts(exact_llm)[:2]
    unrelated = chat_tokens([{"role": "user", "content": "Say hello."}], exact_llm)
    expected = exact_llm.complete(second, CallOptions(max_tokens=48, temperature=0.0, grammar=grammar)).tokens
    batched = BatchedLLM(exact_llm, parallel=2)
    try:
        outs = batched.complete_many([first, second], CallOptions(max_tokens=1, temperature=0.0, grammar=grammar))
        assert outs[1].usage.prompt_tokens_evaluated < len(second) // 4  # the second shares the first's cells
        # both sequences now get unrelated work in turn: the free one first, then the other
        batched.complete_many([unrelated, unrelated], CallOptions(max_tokens=4, temperature=0.0))
        again = batched.complete(second, CallOptions(max_tokens=48, temperature=0.0, grammar=grammar))
        assert again.tokens == expected
    finally:
        batched.close()


def test_a_queue_of_runs_through_two_sequences_gives_the_tokens_of_one_at_a_time(exact_llm) -> None:
    """Runs start as sequences free up (eval --jobs, serve --parallel): with batch-invariant kernels each
    run's tokens are still those of running it alone, also after other runs freed cells around its own."""
    from hermes_local.engines.inprocess.batching import BatchedLLM

    grammar = tool_call_grammar(list(build_registry()))
    queue = prompts(exact_llm, TASKS + MORE_TASKS)
    closing, exact_llm.closing = exact_llm.closing, False  # batched sequences have no closing mode
    try:
        single = [
            exact_llm.complete(p, CallOptions(max_tokens=48, temperature=0.0, grammar=grammar)).tokens for p in queue
        ]
    finally:
        exact_llm.closing = closing
    batched = BatchedLLM(exact_llm, parallel=2)
    try:
        outs = batched.complete_many(queue, CallOptions(max_tokens=48, temperature=0.0, grammar=grammar))
    finally:
        batched.close()
    assert [o.tokens for o in outs] == single
