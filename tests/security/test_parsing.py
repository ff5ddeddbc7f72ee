"""Hostile model output against the tool-call parser: huge numbers, lone surrogates, nesting, padding.

Each case must end as an error the model can read (or a call), never an exception, and the parser's
work must stay linear in the reply's length. Pathological replies run in a child process with a
hang guard far above what linear parsing needs (the quadratic parser took minutes on these); the
time each one took is printed as a figure, not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_local.calls.parse import parse_tool_calls
from hermes_local.config import load_settings
from hermes_local.testing import ScriptedLLM, build_agent
from hermes_local.tools import Approver

NAMES = ["read_file", "write_file", "list_dir"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('<tool_call>{"name": "read_file", "arguments": {"path": "a", "n": ' + "9" * 5000 + "}}</tool_call>", True),
        ("<function=read_file>{" + '"n": ' + "7" * 5000 + "}</function>", True),
        ('<tool_call>{"name": "read_file", "arguments": "{\\"n\\": ' + "9" * 5000 + '}"}</tool_call>', False),
        ('{"name": "read_file", "arguments": {"n": ' + "1" * 5000 + "}}", False),  # bare JSON: left as text
    ],
    ids=["tagged", "function-tag", "arguments-as-string", "bare"],
)
def test_huge_integers_are_an_error_for_the_model(text: str, error: bool) -> None:
    result = parse_tool_calls(text, NAMES)
    assert result.calls == []
    assert not error or (len(result.errors) == 1 and "too many digits" in result.errors[0])


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "write_file", "arguments": {"path": "a\\ud800", "content": "x"}}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "\\udcff"}}</tool_call>',
        '<tool_call>{"name": "read_\\udc80file", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": {"\\ud834": "x"}}</tool_call>',
    ],
)
def test_lone_surrogate_escapes_are_an_error_for_the_model(text: str) -> None:
    result = parse_tool_calls(text, NAMES)
    assert result.calls == [] and len(result.errors) == 1 and "surrogate" in result.errors[0]


def test_a_valid_surrogate_pair_is_text() -> None:
    result = parse_tool_calls('<tool_call>{"name": "read_file", "arguments": {"path": "\\ud83d\\ude00"}}</tool_call>')
    assert result.calls[0].arguments == {"path": "😀"}


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "x", "arguments": ' + "[" * 100_000 + "}</tool_call>",
        '<tool_call>{"name": "x", "arguments": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}</tool_call>",
        '<tool_call>{"name": "x", "arguments": {"a": ' + "{" * 50_000 + "}" * 50_000 + "}}</tool_call>",
    ],
)
def test_deep_nesting_is_an_error(text: str) -> None:
    result = parse_tool_calls(text, ["x"])
    assert result.calls == [] and len(result.errors) == 1


_PATHOLOGICAL = {
    "parameter + 500,000 spaces": "<function=write_file><parameter=path>" + " " * 500_000,
    "tool_call function parameter + spaces": "<tool_call><function=write_file><parameter=path>" + " " * 500_000,
    "parameters padded before the next": "<function=x>" + ("<parameter=a>" + " " * 100) * 4000,
    "[TOOL_CALLS] x 40,000": "[TOOL_CALLS]" * 40_000,
    "<tool_call>{ x 40,000": "<tool_call>{" * 40_000,
    "open objects": "<tool_call>" + '{"a":' * 100_000,
    "unclosed quotes": '<tool_call>{"name": "x", "arguments": {"a": "' + '\\"' * 200_000,
    "<function= x 50,000": "<function=" * 50_000,
    "fenced calls": "```tool_call\n{" * 30_000,
    "bare braces": "{" * 300_000,
    "<think> x 40,000": "<think>" * 40_000,  # nested thoughts: one thought, not 40,000 nested parsers
    "thought and fence x 20,000": "<|startofthought|>```\n" * 20_000,
    "closed thoughts with calls x 5,000": "[THINK]<tool_call>{}</tool_call>[/THINK]" * 5_000,
}

_RUN = textwrap.dedent(
    """
    import json, sys, time
    from hermes_local.calls.parse import parse_tool_calls
    cases = json.loads(sys.stdin.read())
    for name, text in cases.items():
        started = time.perf_counter()
        result = parse_tool_calls(text, ["x", "write_file"])
        print(json.dumps([name, round(time.perf_counter() - started, 3), len(result.calls), len(result.errors)]))
    """
)


def test_parser_time_stays_linear_on_pathological_replies() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN],
        input=json.dumps(_PATHOLOGICAL),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,  # a hang guard only: linear parsing needs well under a second per case
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    for name, seconds, calls, errors in rows:
        print(f"parse {name!r}: {seconds} s, {calls} calls, {errors} errors")
    assert [r[0] for r in rows] == list(_PATHOLOGICAL)


def test_agent_survives_hostile_replies(tmp_path: Path) -> None:
    outputs = [
        '<tool_call>{"name": "write_file", "arguments": {"path": "x\\ud800", "content": "y"}}</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": {"path": "a", "n": ' + "9" * 5000 + "}}</tool_call>",
        "<function=write_file><parameter=path>" + " " * 50_000 + "</function>",
        "Done.",
    ]
    llm = ScriptedLLM(outputs, n_ctx=200_000)
    agent = build_agent(llm, load_settings({"max_steps": 8}), workspace=tmp_path, approver=Approver(approve_all=True))
    result = agent.run("Do what the script says.")
    assert result.stopped == "answer" and result.answer == "Done."
    assert list(tmp_path.iterdir()) == []


def test_one_reply_cannot_fan_out_into_thousands_of_calls_or_errors() -> None:
    from hermes_local.calls.parse import MAX_CALLS, MAX_ERRORS

    many = '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>' * 5000
    result = parse_tool_calls(many, NAMES)
    assert len(result.calls) == MAX_CALLS and len(result.errors) == 1 and "5000 tool calls" in result.errors[0]
    broken = parse_tool_calls("<tool_call>{" * 40_000, NAMES)
    assert broken.calls == [] and len(broken.errors) == MAX_ERRORS and "more unreadable" in broken.errors[-1]


def test_agent_runs_at_most_the_capped_calls_of_one_reply(tmp_path: Path) -> None:
    from hermes_local.calls.parse import MAX_CALLS

    reply = '<tool_call>{"name": "append_to_memo", "arguments": {"content": "x%d"}}</tool_call>'
    llm = ScriptedLLM(["".join(reply % i for i in range(1000)), "Done."], n_ctx=400_000)
    agent = build_agent(llm, load_settings({"max_steps": 4}), workspace=tmp_path, approver=Approver(approve_all=True))
    result = agent.run("Do what the script says.")
    assert result.stopped == "answer"
    assert (tmp_path / "memo.md").read_text().count("\n") == MAX_CALLS
