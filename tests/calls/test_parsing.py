"""Tests for `hermes_local.calls.parse`: the whole malformed-call corpus, then one focused test per behaviour."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from hermes_local.calls.parse import CALL_EXAMPLE, MAX_CALLS, ParseResult, ToolCall, parse_tool_calls

CORPUS_PATH = Path(__file__).parents[1] / "data" / "malformed_calls.jsonl"
CORPUS: list[dict[str, Any]] = [json.loads(line) for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines()]
TOOLS = ["get_weather", "read_file", "write_file", "search", "list_files", "run_shell"]


def parse(text: str, tool_names: list[str] | None = TOOLS) -> ParseResult:
    return parse_tool_calls(text, tool_names)


def calls(result: ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in result.calls]


# -- the corpus ------------------------------------------------------------------------------------


def test_corpus_is_large_and_well_formed() -> None:
    assert len(CORPUS) >= 70
    assert len({case["id"] for case in CORPUS}) == len(CORPUS)
    assert sum("synthetic" not in case["source"] for case in CORPUS) >= 10
    for case in CORPUS:
        assert set(case) == {"id", "source", "text", "tool_names", "expect_calls", "expect_errors"}


@pytest.mark.parametrize("case", CORPUS, ids=[case["id"] for case in CORPUS])
def test_corpus_case(case: dict[str, Any]) -> None:
    result = parse_tool_calls(case["text"], case["tool_names"])
    assert [asdict(call) for call in result.calls] == case["expect_calls"]
    assert len(result.errors) == case["expect_errors"], result.errors
    for call in result.calls:
        json.dumps(call.arguments)  # always plain JSON data


# -- tags, order, several calls, surrounding text --------------------------------------------------


def test_public_api_shapes() -> None:
    result = parse('<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>')
    assert result == ParseResult(calls=[ToolCall("search", {"query": "q"})], text="", errors=[])
    assert "<tool_call>" in CALL_EXAMPLE and parse("hello", None) == ParseResult([], "hello", [])


def test_name_and_arguments_in_either_order() -> None:
    a = parse('<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>')
    b = parse('<tool_call>{"arguments": {"query": "q"}, "name": "search"}</tool_call>')
    assert calls(a) == calls(b) == [("search", {"query": "q"})]


def test_text_before_between_and_after_calls_is_kept() -> None:
    result = parse(
        'First the file.\n<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>\n'
        'Then the weather. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call> Done.'
    )
    assert calls(result) == [("read_file", {"path": "a"}), ("get_weather", {"city": "Oslo"})]
    assert result.text == "First the file.\nThen the weather. Done."
    assert result.errors == []


def test_adjacent_calls() -> None:
    one = '<tool_call>{"name": "read_file", "arguments": {"path": "%s"}}</tool_call>'
    assert calls(parse(one % "a" + one % "b")) == [("read_file", {"path": "a"}), ("read_file", {"path": "b"})]


@pytest.mark.parametrize(
    "text",
    [
        'Checking.\n<tool_call>{"name": "search", "arguments": {"query": "q"}}',
        'Checking.\n<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_cal',
        'Checking.\n{"name": "search", "arguments": {"query": "q"}}\n</tool_call>',
    ],
    ids=["no-closer", "cut-closer", "no-opener"],
)
def test_missing_closing_or_opening_tag(text: str) -> None:
    result = parse(text, None)
    assert calls(result) == [("search", {"query": "q"})]
    assert result.text == "Checking." and result.errors == []


def test_missing_closer_before_the_next_call() -> None:
    text = '<tool_call>{"name": "search", "arguments": {"query": "a"}}\n<tool_call>{"name": "search", "arguments": {}}'
    assert calls(parse(text)) == [("search", {"query": "a"}), ("search", {})]


def test_several_objects_and_arrays_inside_one_block() -> None:
    first, second = '{"name": "search", "arguments": {"query": "a"}}', '{"name": "list_files", "arguments": {}}'
    two = f"<tool_call>\n{first}\n{second}\n</tool_call>"
    array = f"<tool_call>[{first}, {second}]</tool_call>"
    assert calls(parse(two)) == calls(parse(array)) == [("search", {"query": "a"}), ("list_files", {})]


# -- other formats and wrappers --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '[TOOL_CALLS] [{"name": "search", "arguments": {"query": "q"}}]',
        '[TOOL_CALLS][{"name": "search", "arguments": {"query": "q"}}]</s>',
        '[TOOL_CALLS]search[ARGS]{"query": "q"}',
        '<function=search>{"query": "q"}</function>',
        '<function name="search">{"query": "q"}</function>',
        "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n</function>\n</tool_call>",
        '<tool_call><function>search</function>{"query": "q"}</tool_call>',
        '<tool>{"name": "search", "arguments": {"query": "q"}}</tool>',
        '<tools>{"name": "search", "arguments": {"query": "q"}}</tools>',
        '<json>{"name": "search", "arguments": {"query": "q"}}</json>',
        '<function_call>{"name": "search", "arguments": {"query": "q"}}</function_call>',
        '<tool_call>\n```json\n{"name": "search", "arguments": {"query": "q"}}\n```\n</tool_call>',
        '```json\n<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>\n```',
        '```tool_call\n{"name": "search", "arguments": {"query": "q"}}\n```',
    ],
)
def test_formats_and_wrappers(text: str) -> None:
    result = parse(text, None)
    assert calls(result) == [("search", {"query": "q"})], result.errors
    assert result.errors == [] and result.text == ""


def test_weak_wrappers_keep_non_calls_as_text() -> None:
    declaration = (
        '<tools>{"type": "function", "function": {"name": "search", "description": "d", "parameters": {}}}</tools>'
    )
    for text in ('<json>{"city": "Paris"}</json>', declaration):
        result = parse(text)
        assert result.calls == [] and result.errors == [] and result.text == text


def test_fenced_code_that_is_not_a_call_is_kept_verbatim() -> None:
    text = 'Your package.json:\n```json\n{"name": "search", "version": "1.0.0"}\n```\nThat is all.'
    assert parse(text) == ParseResult([], text, [])


# -- repair ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "arguments"),
    [
        ('{"name": "search", "arguments": {"query": "q", "tags": ["a",],},}', {"query": "q", "tags": ["a"]}),
        (
            "{'name': 'search', 'arguments': {'query': 'q', 'exact': True, 'limit': None, 'r': (1, 2)}}",
            {"query": "q", "exact": True, "limit": None, "r": [1, 2]},
        ),
        ('{"name": "search", "arguments": "{\\"query\\": \\"q\\"}"}', {"query": "q"}),
        ('{"name": "search", "parameters": {"query": "q"}}', {"query": "q"}),
        ('{"name": "search", "args": {"query": "q"}}', {"query": "q"}),
        ('{"name": "search", "input": {"query": "q"}}', {"query": "q"}),
        ('{"name": "search"}', {}),
        ('{"name": "search", "arguments": null}', {}),
        ('{"type": "function", "function": {"name": "search", "arguments": "{\\"query\\": \\"q\\"}"}}', {"query": "q"}),
        ('{"type": "function", "function": {"name": "search", "arguments": {"query": "q"}}}', {"query": "q"}),
        ('{"function": "search", "arguments": {"query": "q"}}', {"query": "q"}),
    ],
    ids=[
        "trailing-commas",
        "python-literal",
        "arguments-string",
        "parameters",
        "args",
        "input",
        "missing",
        "null",
        "openai-string",
        "openai-object",
        "function-name",
    ],
)
def test_repairs(body: str, arguments: dict[str, Any]) -> None:
    result = parse(f"<tool_call>{body}</tool_call>")
    assert calls(result) == [("search", arguments)] and result.errors == []


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ('<tool_call>{"name": "search", "arguments": {"limit": 1', {"limit": 1}),
        (
            '<tool_call>{"name": "search", "arguments": {"query": "q", "tags": ["a", "b"',
            {"query": "q", "tags": ["a", "b"]},
        ),
        ('<tool_call>{"name": "search", "arguments": {"query": "q",', {"query": "q"}),
        ('<tool_call>{"name": "search", "arguments": {"query": "q"}</tool_call>', {"query": "q"}),
    ],
)
def test_brace_balancing_after_complete_values(text: str, arguments: dict[str, Any]) -> None:
    result = parse(text)
    assert calls(result) == [("search", arguments)] and result.errors == []


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_cur',
        '<tool_call>{"name":"write_file","arguments":{"path":"a.t',
        '<tool_call>{"name": "write_file", "arguments": {"path": ',
        '<tool_call>{"name": "write_file", "arguments": {"path"',
        "<function=get_we",
        "Let me check. <tool_cal",
    ],
)
def test_values_cut_mid_string_are_never_healed(text: str) -> None:
    result = parse(text)
    assert result.calls == [] and len(result.errors) == 1
    assert result.errors[0].startswith("Your tool call was not valid JSON: ")
    assert result.errors[0].endswith(f"reply with exactly one {CALL_EXAMPLE}")


# -- JSON-aware scanning ---------------------------------------------------------------------------


def test_braces_tags_quotes_and_newlines_inside_strings_do_not_end_a_call() -> None:
    content = 'x = {"a": [1, 2]}\n}} <tool_call> </tool_call> \\"quoted\\"'
    raw = json.dumps({"name": "write_file", "arguments": {"path": "a.py", "content": content}})
    raw = raw.replace("\\n", "\n")  # a raw newline inside the string, as models write it
    result = parse(f"<tool_call>{raw}</tool_call> after")
    assert calls(result) == [("write_file", {"path": "a.py", "content": content})]
    assert result.text == "after" and result.errors == []


def test_raw_newline_in_python_literal_string_is_repaired() -> None:
    result = parse("<tool_call>{'name': 'write_file', 'arguments': {'content': 'a\nb'}}</tool_call>")
    assert calls(result) == [("write_file", {"content": "a\nb"})]


def test_ampersands_and_angle_brackets_in_prose_lose_nothing() -> None:
    result = parse('Tom & Jerry, 1 < 2 <tool_call>{"name": "search", "arguments": {"query": "a<b&c"}}</tool_call>')
    assert calls(result) == [("search", {"query": "a<b&c"})] and result.text == "Tom & Jerry, 1 < 2"


# -- reasoning, fabricated responses, leftovers ----------------------------------------------------


def test_nothing_inside_think_is_executed_or_shown() -> None:
    inner = '<tool_call>{"name": "run_shell", "arguments": {"command": "rm -rf ~"}}</tool_call>'
    closed = parse(f"<think>I could {inner}</think>\nThe answer is 4.")
    unclosed = parse(f"The answer is 4.<think>or maybe {inner}")
    unopened = parse(f"maybe {inner}</think>The answer is 4.")
    for result in (closed, unclosed, unopened):
        assert (result.calls, result.text, result.errors) == ([], "The answer is 4.", [])
        assert result.rehearsed == [ToolCall("run_shell", {"command": "rm -rf ~"})]  # read, to be logged; never run
        assert result.reasoning.endswith(inner)


def test_fabricated_tool_response_and_all_after_it_are_dropped() -> None:
    result = parse(
        'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
        '<tool_response>{"temp": 3}</tool_response>\nIt is 3C. '
        '<tool_call>{"name": "write_file", "arguments": {"path": "w", "content": "3"}}</tool_call>'
    )
    assert calls(result) == [("get_weather", {"city": "Oslo"})] and result.text == "Checking."


def test_a_user_or_tool_turn_the_model_wrote_itself_ends_the_reply() -> None:
    result = parse(
        'Reading. <tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call><|im_end|>\n'
        "<|im_start|>user\nnow delete it<|im_end|>\n<|im_start|>assistant\n"
        '<tool_call>{"name": "run_shell", "arguments": {"command": "rm a"}}</tool_call>'
    )
    assert calls(result) == [("read_file", {"path": "a"})] and result.text == "Reading."


def test_chatml_leftovers_are_removed_from_text() -> None:
    result = parse("<|im_start|>assistant\nHello there.<|im_end|>\n<|endoftext|></s><|eot_id|>", None)
    leftovers = ["<|im_start|>assistant\n", "<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>"]
    assert result == ParseResult([], "Hello there.", [], dropped=[("chat markup", m) for m in leftovers])


@pytest.mark.parametrize(
    ("reply", "why", "part"),
    [
        (
            'It is 10.\n<tool_response>{"content": "10:00"}</tool_response> Done.',
            "a tool result or turn the model wrote itself",
            '<tool_response>{"content": "10:00"}</tool_response> Done.',
        ),
        ("Hello. </tool_call> Bye.", "a closing tag with nothing open", "</tool_call>"),
        ("Let me check. <tool_ca", "a tag cut off at the end", "<tool_ca"),
        ("<|startofresponse|>Ten.<|endofresponse|>", "chat markup", "<|endofresponse|>"),
    ],
)
def test_every_dropped_part_of_a_reply_is_listed_with_why(reply: str, why: str, part: str) -> None:
    result = parse(reply, None)
    assert (why, part) in result.dropped
    assert part not in result.text  # dropped: neither the text for the user nor a call


def test_calls_over_the_limit_are_listed_as_dropped() -> None:
    many = "".join(f'<tool_call>{{"name": "t{i}", "arguments": {{}}}}</tool_call>' for i in range(MAX_CALLS + 2))
    result = parse(many, None)
    assert result.dropped == [("calls over the per-reply limit", f"t{MAX_CALLS}, t{MAX_CALLS + 1}")]


# -- bare JSON -------------------------------------------------------------------------------------


def test_bare_json_is_a_call_only_when_call_shaped_and_named() -> None:
    call = '{"name": "get_weather", "arguments": {"city": "Rome"}}'
    assert calls(parse(f"Calling {call} now")) == [("get_weather", {"city": "Rome"})]
    assert parse(f"Calling {call} now").text == "Calling now"
    assert parse(call, None) == ParseResult([], call, [])
    assert parse(call, ["other_tool"]).calls == []
    for text in (
        '{"name": "search", "version": "1.0.0"}',
        '{"name": "get_weather", "city": "Rome"}',
        "[1, 2] {'a': 1}",
    ):
        assert parse(text) == ParseResult([], text, [])


# -- unrecoverable blocks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        '{"name": 42, "arguments": {}}',
        '{"name": "search", "arguments": ["q"]}',
        '{"name": "search", "arguments": "q"}',
        '{"query": "q"}',
        '{"name": "search" "arguments": {}}',
        "search for q please",
        "",
    ],
)
def test_unrecoverable_blocks_give_one_error_each_and_no_call(body: str) -> None:
    good = '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>'
    result = parse(f"Before. <tool_call>{body}</tool_call> {good} After.")
    assert calls(result) == [("list_files", {})]
    assert len(result.errors) == 1 and result.errors[0].startswith("Your tool call ")
    assert CALL_EXAMPLE in result.errors[0]
    assert result.text == "Before. After."


def test_one_error_per_block_even_when_it_holds_several_bad_values() -> None:
    result = parse('<tool_call>[1, "two", {"x": 3}]</tool_call>')
    assert result.calls == [] and len(result.errors) == 1


def test_unknown_tool_names_inside_tags_are_kept_for_the_agent() -> None:
    result = parse('<tool_call>{"name": "launch_rocket", "arguments": {}}</tool_call>')
    assert calls(result) == [("launch_rocket", {})] and result.errors == []


def test_a_tag_only_mentioned_in_prose_is_text() -> None:
    text = "Tools are called with a <tool_call> tag followed by JSON."
    assert parse(text) == ParseResult([], text, [])


def test_a_made_up_tool_result_is_flagged_and_the_text_before_it_kept() -> None:
    echoed = parse_tool_calls('The time is shown.\n<tool_response>\n{"content": "10:00"}\n</tool_response>\nIt is 10.')
    assert echoed.echoed and echoed.text == "The time is shown." and echoed.calls == []
    assert not parse_tool_calls("It is 10:00.").echoed


@pytest.mark.parametrize(
    "text",
    [
        '[TOOL_CALLS][{"name": "search", "arguments": {"query": "q"}}][/TOOL_CALLS]',
        '[TOOL_CALLS] [{"name": "search", "arguments": {"query": "q"}}] [/TOOL_CALLS]</s>',
        '<tool_call>\n{"name": "search", "arguments": {"query": "q"}}\n</tool_call>\n[/TOOL_CALLS]',
    ],
)
def test_a_closing_tool_calls_marker_is_no_error_and_no_text(text: str) -> None:
    result = parse(text)
    assert calls(result) == [("search", {"query": "q"})] and result.errors == [] and result.text == ""


@pytest.mark.parametrize(
    ("opened", "closed"),
    [("<think>", "</think>"), ("<|startofthought|>", "<|endofthought|>"), ("[THINK]", "[/THINK]")],
)
def test_every_known_thought_is_reasoning_and_its_calls_rehearsals(opened: str, closed: str) -> None:
    inner = '<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "b"}}</tool_call>'
    result = parse(f"{opened}Plan: {inner}{closed}<|startofresponse|>Done.<|endofresponse|>")
    assert result.calls == [] and result.text == "Done." and result.errors == []
    assert result.rehearsed == [ToolCall("write_file", {"path": "a", "content": "b"})]
    assert result.reasoning == f"Plan: {inner}"


def test_a_thought_marker_inside_a_call_argument_is_content() -> None:
    result = parse(
        '<tool_call>{"name": "write_file", "arguments": {"path": "t.md", "content": "<think>x"}}</tool_call>'
    )
    assert calls(result) == [("write_file", {"path": "t.md", "content": "<think>x"})] and result.reasoning == ""
