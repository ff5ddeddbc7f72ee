"""The real llama.cpp path on the embedded SmolLM2 GGUF: load, complete from tokens, KV reuse."""

from __future__ import annotations

import json

import pytest

from hermes_local.calls.grammar import tool_call_grammar
from hermes_local.calls.parse import parse_tool_calls
from hermes_local.llm import LLM, CallOptions
from hermes_local.prompts import chat_tokens
from hermes_local.tools import default_registry

pytestmark = pytest.mark.real_model


def chat(llm, user: str, prefill: str = "") -> list[int]:
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": user}]
    return chat_tokens(messages, llm, prefill=prefill)


def test_loads_and_satisfies_the_protocol(real_llm) -> None:
    assert isinstance(real_llm, LLM)
    assert real_llm.n_ctx == 2048


def test_complete_from_tokens_reports_usage_and_streams(real_llm) -> None:
    pieces: list[str] = []
    tokens = chat(real_llm, "Say hello.")
    out = real_llm.complete(tokens, CallOptions(max_tokens=12, temperature=0.0), on_token=pieces.append)
    assert out.usage.prompt_tokens == len(tokens)
    assert 1 <= out.usage.completion_tokens <= 12
    assert out.usage.completion_tokens == len(out.tokens)
    assert out.usage.seconds > 0
    assert "".join(pieces) == out.text


def test_second_call_sharing_a_prefix_reuses_the_kv_cache(real_llm) -> None:
    first_tokens = chat(real_llm, "Name a colour.")
    real_llm.reset_cache()
    first = real_llm.complete(first_tokens, CallOptions(max_tokens=8, temperature=0.0))
    assert first.usage.prompt_tokens_evaluated == len(first_tokens)
    second_tokens = first_tokens + first.tokens + real_llm.tokenize(" And another one?", special=False)
    second = real_llm.complete(second_tokens, CallOptions(max_tokens=8, temperature=0.0))
    assert second.usage.prompt_tokens == len(second_tokens)
    # Only the tokens after the shared prefix (the last completion token + the new text) are evaluated.
    assert second.usage.prompt_tokens_evaluated <= len(second_tokens) - len(first_tokens) + 1
    assert second.usage.prompt_tokens_evaluated >= 1


def test_deterministic_at_temperature_zero(real_llm) -> None:
    tokens = chat(real_llm, "Count to three.")
    a = real_llm.complete(tokens, CallOptions(max_tokens=10, temperature=0.0))
    b = real_llm.complete(tokens, CallOptions(max_tokens=10, temperature=0.0))
    assert a.text == b.text


def test_stop_sequence_cuts_the_text(real_llm) -> None:
    tokens = chat(real_llm, "Write the numbers 1 2 3 4 5 6 separated by spaces.")
    out = real_llm.complete(tokens, CallOptions(max_tokens=30, temperature=0.0, stop=["4"]))
    assert "4" not in out.text


def test_grammar_constrains_a_required_tool_call(real_llm) -> None:
    registry = default_registry()
    grammar = tool_call_grammar(list(registry))
    tokens = chat(real_llm, "Note 'buy milk' in my memo.", prefill="<tool_call>\n")
    out = real_llm.complete(tokens, CallOptions(max_tokens=80, temperature=0.0, grammar=grammar))
    parsed = parse_tool_calls("<tool_call>\n" + out.text, registry.names())
    assert parsed.errors == [] and len(parsed.calls) == 1
    call = parsed.calls[0]
    assert call.name in registry.names()
    registry.get(call.name).arguments_model.model_validate(call.arguments)
    json.dumps(call.arguments)


def test_concurrent_calls_are_serialized_and_match_sequential_results(real_llm) -> None:
    import threading

    prompts = [chat(real_llm, f"Name fruit number {i}.") for i in range(3)]
    expected = [real_llm.complete(p, CallOptions(max_tokens=8, temperature=0.0)).text for p in prompts]
    got: dict[int, str] = {}

    def worker(i: int) -> None:
        got[i] = real_llm.complete(prompts[i], CallOptions(max_tokens=8, temperature=0.0)).text

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [got[i] for i in range(3)] == expected


def test_an_over_long_thought_is_closed_at_the_reasoning_budget(real_llm) -> None:
    """The prompt opened a `<think>` (as Qwen3 / DeepSeek-R1 templates do): at 12 thought tokens the engine
    writes `</think>` for the model, which then goes on answering (issue 27.5)."""
    from hermes_local.calls.thoughts import THINK

    tokens = chat(real_llm, "Count from 1 to 200, one number per line.", prefill="<think>\n")
    options = CallOptions(max_tokens=40, temperature=0.0, thoughts=(THINK,), max_reasoning_tokens=12)
    out = real_llm.complete(tokens, options)
    assert "</think>" in out.text, out.text
    thought = out.text.split("</think>", 1)[0]
    assert len(real_llm.tokenize(thought, special=False)) <= 13
    assert len(out.tokens) > 14  # it went on after the closing marker
    plain = real_llm.complete(tokens, CallOptions(max_tokens=40, temperature=0.0))
    assert "</think>" not in plain.text  # the model would not have closed it by itself
