"""The grammar automaton and the grammar-aware decode decisions (closing mode, guard, fast-forward)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from hermes_local.calls.grammar import tool_call_grammar
from hermes_local.calls.parse import parse_tool_calls
from hermes_local.config import load_settings
from hermes_local.engines.inprocess.automaton import GrammarAutomaton, TokenTexts, automaton_for
from hermes_local.engines.inprocess.decoding import LOOP_MIN_TOKENS, GrammarTracker
from hermes_local.engines.inprocess.gbnf import GrammarSyntaxError
from hermes_local.runtime import build_registry
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, ToolRegistry, default_registry, tool


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


@tool
def short_note(text: Annotated[str, Field(max_length=5)]):
    """Keep a short note.

    Args:
        text: At most five characters.
    """
    return text


REGISTRY = ToolRegistry([*build_registry(), search_orders, short_note])
GRAMMAR = tool_call_grammar(list(REGISTRY))
CALLS = [
    {"name": "read_file", "arguments": {"path": 'notes/a "b".txt'}},
    {"name": "write_file", "arguments": {"path": "x.md", "content": "line 1\nline 2 é ☃"}},
    {"arguments": {"sql": "select 1", "limit": 5}, "name": "query_database"},
    {"name": "get_current_time", "arguments": {}},
    {"name": "list_dir", "arguments": {}},
    {"name": "search_orders", "arguments": {"customer": "Ann", "status": "open", "tags": ["a", "b"]}},
    {"name": "short_note", "arguments": {"text": "milk"}},
]


def call_text(call: dict) -> str:
    return json.dumps(call, ensure_ascii=False) + "\n</tool_call>"


def valid(text: str) -> bool:
    parsed = parse_tool_calls("<tool_call>\n" + text, REGISTRY.names())
    if parsed.errors or len(parsed.calls) != 1:
        return False
    call = parsed.calls[0]
    REGISTRY.get(call.name).arguments_model.model_validate(call.arguments)
    return True


def test_automaton_accepts_exactly_the_calls_the_grammar_allows() -> None:
    a = automaton_for(GRAMMAR)
    assert automaton_for(GRAMMAR) is a  # built once per grammar
    for call in CALLS:
        end = a.advance(a.initial, call_text(call))
        assert a.is_finished(end), call
    rejected = [
        '{"name": "delete_everything", "arguments": {}}',
        '{"name":"read_file", "arguments": {"path": "a"}}',  # canonical separators only
        '{"name": "read_file", "arguments": {"path": "a", "extra": 1}}',
        '{"name": "search_orders", "arguments": {"customer": "A", "status": "closed"}}',
        '{"name": "short_note", "arguments": {"text": "too long"}}',  # maxLength 5
        '{"name": "read_file", "arguments": {"path": "a\tb"}}',  # raw control character
    ]
    for text in rejected:
        assert not a.advance(a.initial, text), text


def test_forced_continuations_follow_unique_names_and_keys() -> None:
    a = automaton_for(GRAMMAR)
    forced, after = a.forced(a.advance(a.initial, '{"name": "read_f'))
    assert forced == 'ile", "arguments": {"path": "'
    assert a.in_string(after) and a.forced(after)[0] == ""
    assert a.forced(a.initial)[0] == ""  # "\n" or "{"
    assert not a.in_string(a.advance(a.initial, '{"name": "read'))  # tool names are literals, not strings


def test_shortest_completion_from_every_prefix_is_a_valid_call() -> None:
    a = automaton_for(GRAMMAR)
    assert a.shortest_completion(a.initial) == '{"name": "list_dir", "arguments": {}}</tool_call>'
    for call in CALLS:
        text = call_text(call)
        for cut in range(len(text) + 1):
            state = a.advance(a.initial, text[:cut])
            completion = a.shortest_completion(state)
            assert len(completion) == a.min_completion_length(state)
            assert a.is_complete(a.advance(state, completion))
            assert valid(text[:cut] + completion), text[:cut] + completion


def test_max_length_strings_report_their_limit() -> None:
    a = automaton_for(GRAMMAR)
    state = a.advance(a.initial, '{"name": "short_note", "arguments": {"text": "ab')
    assert a.in_string(state) and a.string_limit(state) == 5
    state = a.advance(state, "cde")
    assert a.forced(state)[0] == '"}}'  # the grammar closes the string at maxLength


def test_gbnf_repetitions_and_classes() -> None:
    a = GrammarAutomaton('root ::= "x" [a-c]{2,3} ( "-" [^a-z] )* "!"\n')
    assert a.is_finished(a.advance(a.initial, "xab!"))
    assert a.is_finished(a.advance(a.initial, "xabc-1-Z!"))
    assert not a.advance(a.initial, "xa!") and not a.advance(a.initial, "xabcc")
    assert a.shortest_completion(a.advance(a.initial, "xa")) == "a!"


class CharVocab:
    """A toy vocabulary where every character is one token (ids are code points)."""

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def texts(self) -> TokenTexts:
        return TokenTexts(lambda t: chr(t).encode())


def tracker(**kwargs) -> GrammarTracker:
    v = CharVocab()
    return GrammarTracker(automaton_for(GRAMMAR), v.tokenize, v.texts(), **kwargs)


def feed(t: GrammarTracker, text: str) -> None:
    for ch in text:
        t.feed(ord(ch), ch)


def test_closing_mode_fires_only_near_the_end_of_the_budget() -> None:
    t = tracker()
    feed(t, '{"name": "write_file", "arguments": {"path": "a.txt", "content": "some text')
    need = len(t.completion_tokens())
    assert "".join(map(chr, t.completion_tokens())) == '"}}</tool_call>'
    assert t.closing_reason(remaining=need + 10) is None
    assert t.closing_reason(remaining=need + 1) == "budget"
    feed(t, '"}}\n</tool_call>')
    assert t.finished and t.closing_reason(remaining=1) is None
    assert tracker(closing=False).closing_reason(remaining=1) is None


def test_runaway_guard_detects_loops_and_lengths_but_not_ordinary_text() -> None:
    t = tracker()
    feed(t, '{"name": "append_to_memo", "arguments": {"content": "')
    rng = random.Random(0)
    feed(t, "".join(rng.choice("abcdefgh ") for _ in range(3 * LOOP_MIN_TOKENS)))
    assert t.closing_reason(remaining=500) is None
    feed(t, "the end. " * (LOOP_MIN_TOKENS // 9 + 2))
    assert t.closing_reason(remaining=500) == "loop"
    completion = "".join(map(chr, t.completion_tokens()))
    assert completion == '"}}</tool_call>'

    capped = tracker(free_text_max_chars=20)
    feed(capped, '{"name": "append_to_memo", "arguments": {"content": "')
    feed(capped, "x" * 10 + "y" * 9)
    assert capped.closing_reason(remaining=500) is None
    feed(capped, "z")
    assert capped.closing_reason(remaining=500) == "max_length"

    short = tracker()
    feed(short, '{"name": "short_note", "arguments": {"text": "abcd')
    assert short.closing_reason(remaining=500) is None
    feed(short, "e")
    assert short.closing_reason(remaining=500) == "max_length"


def test_fast_forward_drafts_the_models_own_split_once_it_has_seen_it() -> None:
    from hermes_local.engines.inprocess.decoding import CANONICAL_DRAFT, ForcedMemo

    t = tracker()
    feed(t, '{"name": "read_f')
    forced = 'ile", "arguments": {"path": "'
    assert t.forced_text() == forced
    memo = ForcedMemo()
    # unknown text: only the first tokens of the canonical split (the model often splits otherwise)
    assert "".join(map(chr, t.forced_tokens(memo))) == forced[:CANONICAL_DRAFT]
    # the model wrote it in its own pieces once (token ids here are pieces of two characters)
    pieces = [forced[i : i + 2] for i in range(0, len(forced), 2)]
    ids = list(range(1000, 1000 + len(pieces)))
    texts = {**dict(zip(ids, pieces, strict=True)), 7: "{", 8: "x", 9: "z"}
    memo.learn([7, *ids, 8], texts, [(1, forced)])  # type: ignore[arg-type]
    assert t.forced_tokens(memo) == ids
    assert memo.get(forced[2:]) == tuple(ids[1:])  # and every tail at the model's token boundaries
    memo.learn([*ids[:-1], 9], texts, [(0, forced)])  # type: ignore[arg-type]  # does not spell it: ignored
    assert t.forced_tokens(memo) == ids
    t = tracker()
    feed(t, '{"name": "read_file", "arguments": {"path": "a"}}\n')
    assert "".join(map(chr, t.forced_tokens())) == "</tool_call>"[:CANONICAL_DRAFT]


class TruncatingLLM(ScriptedLLM):
    """Scripted outputs; the ones listed in `cut` come back marked as closed early by closing mode."""

    def __init__(self, outputs: list[str], cut: set[int]) -> None:
        super().__init__(outputs)
        self.cut = cut

    def complete(self, tokens, *args, **kwargs):  # type: ignore[no-untyped-def]
        index = self._cursor
        completion = super().complete(tokens, *args, **kwargs)
        completion.truncated = "budget" if index in self.cut else None
        return completion


def test_truncated_write_is_not_run_and_the_model_is_told_how_long_it_was(workspace: Path) -> None:
    content = "x" * 37
    llm = TruncatingLLM(
        [
            tool_call_text("write_file", path="big.txt", content=content),
            tool_call_text("read_file", path="seen.txt"),
            "done",
        ],
        cut={0, 1},
    )
    (workspace / "seen.txt").write_text("hello")
    events: list[Any] = []
    agent = build_agent(
        llm,
        load_settings({}),
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(allow=["write_file"], interactive=False),
        on_event=events.append,
    )
    result = agent.run("write a big file")
    write, read = result.tool_calls
    assert not (workspace / "big.txt").exists()
    assert write.error_kind == "truncated" and write.truncated and not write.ok
    assert read.ok and read.truncated  # a truncated read call still runs
    assert "'content' was cut after 37 characters" in llm.prompt_texts[1]
    assert "smaller pieces" in llm.prompt_texts[1]
    calls = result.to_json()["tool_calls"]
    assert calls[0]["truncated"] is True and calls[1]["truncated"] is True
    logged = [e.to_dict() for e in events if e.kind in ("tool_call", "tool_result")]
    assert all(p.get("truncated") is True for p in logged)


def test_calls_that_finish_on_their_own_carry_no_truncated_key(workspace: Path) -> None:
    llm = TruncatingLLM([tool_call_text("get_current_time"), "ok"], cut=set())
    result = build_agent(llm, load_settings({}), workspace=workspace, registry=default_registry()).run("t")
    assert "truncated" not in result.to_json()["tool_calls"][0]


class _SchemaTool:
    """A tool known only by its JSON schema (as an HTTP client or an MCP server sends it)."""

    def __init__(self, name: str, parameters: Any) -> None:
        self.name, self._parameters = name, parameters

    def parameters_schema(self) -> Any:
        return self._parameters

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "parameters": self._parameters}}


def _long_text_tool(limit: int) -> _SchemaTool:
    params = {"type": "object", "properties": {"text": {"type": "string", "maxLength": limit}}, "required": ["text"]}
    return _SchemaTool("long_text", params)


def test_a_huge_max_length_is_one_rule_bounded_by_the_decoder() -> None:
    for limit in (5000, 50_000_000):  # 5,000 took 43 s for 40 tokens; 50,000,000 grew serve past 3.3 GB
        grammar = tool_call_grammar([_long_text_tool(limit)])
        a = GrammarAutomaton(grammar)
        assert len(grammar) < 5000 and len(a.rules) < 200, limit
        state = a.advance(a.initial, '{"name": "long_text", "arguments": {"text": "abc')
        assert a.in_string(state) and a.string_limit(state) == limit
    v = CharVocab()
    t = GrammarTracker(automaton_for(tool_call_grammar([_long_text_tool(5000)])), v.tokenize, v.texts())
    feed(t, '{"name": "long_text", "arguments": {"text": "')
    feed(t, "ab" * 2499 + "c")
    assert t.closing_reason(remaining=100_000) is None
    feed(t, "d")  # the 5,000th character: the decoder closes the string here
    assert t.closing_reason(remaining=100_000) == "max_length"


def test_the_gbnf_parser_refuses_an_expansion_instead_of_building_it() -> None:
    with pytest.raises(GrammarSyntaxError, match="over"):
        GrammarAutomaton('root ::= "x" [a-z]{0,50000000}\n')


def test_malformed_schemas_make_a_grammar_not_a_crash() -> None:
    recursive = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
    }
    odd = [
        recursive,
        {"type": "object", "properties": ["a", "b"]},
        {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/schema.json"}}},
        {"type": "object", "properties": {"a": {"enum": "x"}, "b": {"anyOf": {}}}, "required": "a"},
        "not a schema",
    ]
    for i, params in enumerate(odd):
        a = GrammarAutomaton(tool_call_grammar([_SchemaTool(f"odd_{i}", params)]))
        assert a.is_finished(a.advance(a.initial, f'{{"name": "odd_{i}", "arguments": {{}}}}</tool_call>')), params
    a = GrammarAutomaton(tool_call_grammar([_SchemaTool("tree", recursive)]))
    call = '{"name": "tree", "arguments": {"root": {"child": {"child": {"leaf": 1}}}}}</tool_call>'
    assert a.is_finished(a.advance(a.initial, call))  # the recursive part takes any JSON value
