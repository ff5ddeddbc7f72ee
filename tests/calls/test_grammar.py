"""GBNF for tool calls: names restricted to registered tools, arguments to each schema."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from hermes_local.calls.grammar import tool_call_grammar
from hermes_local.calls.parse import parse_tool_calls
from hermes_local.llm import CallOptions
from hermes_local.prompts import chat_tokens, render
from hermes_local.runtime import build_registry
from hermes_local.tools import ToolRegistry, tool


@tool
def search_orders(customer: str, status: Literal["open", "shipped"], limit: int = 10, tags: list[str] | None = None):
    """Find orders.

    Args:
        customer: Customer name.
        status: Order status.
        limit: Most rows.
        tags: Optional tags.
    """
    return []


def test_grammar_lists_exactly_the_registered_tools_and_is_cached() -> None:
    registry = build_registry()
    text = tool_call_grammar(list(registry))
    for name in registry.names():
        assert f'"\\"{name}\\""' in text
    assert text.startswith("root ::=") and '"</tool_call>"' in text.splitlines()[0]
    assert tool_call_grammar(list(registry)) is text


def test_enums_optional_and_arrays_are_expressed() -> None:
    text = tool_call_grammar([search_orders])
    assert '"\\"open\\"" | "\\"shipped\\""' in text
    assert '( "," " " "\\"limit\\""' in text  # optional property, canonical separator
    assert '"[" ( string ( "," " " string )* )? "]"' in text


@pytest.mark.real_model
def test_llama_cpp_accepts_the_grammar_and_output_always_validates(real_llm) -> None:
    registry = ToolRegistry([*build_registry(), search_orders])
    grammar = tool_call_grammar(list(registry))
    system = render("system.jinja", tools=registry.schemas(), instructions="")
    tasks = ["Find open orders for Ann.", "List the files here.", "Remember that I like tea.", "Query the db."]
    for task in tasks:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        out = real_llm.complete(
            chat_tokens(messages, real_llm, prefill="<tool_call>\n"),
            CallOptions(max_tokens=160, temperature=0.0, grammar=grammar),
        )
        parsed = parse_tool_calls("<tool_call>\n" + out.text, registry.names())
        assert parsed.errors == [] and len(parsed.calls) == 1, out.text
        call = parsed.calls[0]
        registry.get(call.name).arguments_model.model_validate(call.arguments)
        json.dumps(call.arguments)


@pytest.mark.real_model
def test_detokenized_output_keeps_special_tokens(real_llm) -> None:
    im_end = real_llm.special_token_id("<|im_end|>")
    assert real_llm.detokenize([im_end]) == "<|im_end|>"
