"""The newer families against their official templates (golden), detection, and their call syntax.

Same fixture conversation as `test_dialects.py` (system, two tools, user, assistant call, tool result,
generation prompt), rendered with the official template from llama.cpp's `models/templates/` (jinja2 with
transformers' globals) and with our dialect; the texts must be equal. Documented differences: none for
these three on this conversation (gemma4's prose-before-calls and harmony's one-message-per-call only show
with prose or several calls in one reply). A larger tool set (every built-in tool's schema) is compared too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hermes_local.dialects import get_dialect
from hermes_local.dialects.harmony import HarmonyDialect
from hermes_local.prompts import Segments
from tests.dialects.test_dialects import CALL, RESULT, SYSTEM, TOOLS, USER, hf_messages, official

DATE = "2026-01-02"
FAMILIES = {
    "qwen3-coder": ("Qwen3-Coder.jinja", json.dumps({"name": CALL.name, "content": RESULT})),
    "gemma4": ("google-gemma-4-31B-it.jinja", json.dumps(RESULT)),
    "harmony": ("openai-gpt-oss-120b.jinja", RESULT),
}


def _dialect(name: str) -> Any:
    return HarmonyDialect(date=DATE) if name == "harmony" else get_dialect(name)


def _ours(d: Any, tools: list[dict[str, Any]], with_call: bool = True) -> str:
    messages = [
        {"role": "system", "content": Segments.untrusted(SYSTEM)},
        {"role": "user", "content": Segments.untrusted(USER)},
    ]
    if with_call:
        messages += [
            {"role": "assistant", "content": d.assistant_content(1, "", [CALL])},
            {"role": "tool", "content": d.tool_results(1, [{"name": CALL.name, "content": RESULT}])},
        ]
    return str(d.render(messages, tools).text)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_new_family_matches_its_official_template(name: str) -> None:
    template, content = FAMILIES[name]
    want = official(template, hf_messages(content), strftime_now=lambda fmt: DATE)
    assert _ours(_dialect(name), TOOLS) == want


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_new_family_matches_with_every_builtin_tool_offered(name: str) -> None:
    from hermes_local.runtime import build_registry

    tools = build_registry().schemas()
    template, _ = FAMILIES[name]
    want = official_with(template, hf_messages("x")[:2], tools)
    assert _ours(_dialect(name), tools, with_call=False) == want


def official_with(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """`official` with another tool set."""
    import tests.dialects.test_dialects as golden

    saved = golden.TOOLS
    golden.TOOLS = tools
    try:
        return official(template, messages, strftime_now=lambda fmt: DATE)
    finally:
        golden.TOOLS = saved
