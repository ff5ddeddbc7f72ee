"""Gemma 3 (issue 46): the registry's gemma-3-4b must get through a step that sends a tool result back.

Gemma 3's official template (tests/data/templates/google-gemma-3-4b-it.jinja) has no tool support and raises
on any role that breaks user/model alternation, so the `gguf` dialect (which sends results as `tool`
messages) cannot render a conversation past its first call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hermes_local.dialects import select_dialect
from hermes_local.errors import UserError
from hermes_local.models.gguf import read_header
from hermes_local.models.registry import load_registry
from hermes_local.prompts import Segments
from tests.dialects.test_dialects import CALL, RESULT, SYSTEM, TEMPLATES, TOOLS, USER
from tests.models.test_gguf import make_gguf

GEMMA3 = (TEMPLATES / "google-gemma-3-4b-it.jinja").read_text(encoding="utf-8")


def _header(tmp_path: Path, template: str = GEMMA3) -> Any:
    path = tmp_path / "gemma-3.gguf"
    path.write_bytes(make_gguf(chat_template=template))
    return read_header(path)


def _with_result(d: Any) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": Segments.untrusted(SYSTEM)},
        {"role": "user", "content": Segments.untrusted(USER)},
        {"role": "assistant", "content": d.assistant_content(1, "", [CALL])},
        {"role": "tool", "content": d.tool_results(1, [{"name": CALL.name, "content": RESULT}])},
    ]


@pytest.mark.xfail(strict=True, raises=UserError, reason="issue 46: the gguf dialect sends a tool turn Gemma 3 refuses")
def test_the_gemma3_registry_model_renders_a_call_and_its_result(tmp_path: Path) -> None:
    entry = load_registry().models["gemma-3-4b"]
    d = select_dialect(
        None, chat_format=entry.chat_format, header=_header(tmp_path), tool_call_format=entry.tool_call_format
    )
    text = d.render(_with_result(d), TOOLS).text
    assert text.endswith("<end_of_turn>\n<start_of_turn>model\n")
    assert text.count("<start_of_turn>user\n") == 2 and "<start_of_turn>tool" not in text
