"""Opening a skill on the embedded model (llama.cpp, real KV cache): the step after `open_skill` evaluates only the
tokens that are new, so the prompt prefix (system, tools, the skills' catalog, the goal) is reused whole."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.llm import DEFAULT_OPTIONS, CallOptions, Completion, DelegatingLLM, TokenCallback
from hermes_local.testing import build_agent
from hermes_local.tools import Approver
from hermes_local.tools.skills import OPEN_SKILL


def literal(text: str) -> str:
    """A GBNF grammar whose only sentence is `text`."""
    return "root ::= " + json.dumps(text)


class Forced(DelegatingLLM):
    """The real model, its replies forced by a one-sentence grammar each: the prompt, the decoding and the KV cache
    are llama.cpp's own; only which reply comes is fixed, so the test does not depend on what SmolLM2 would pick."""

    def __init__(self, inner: object, replies: list[str]) -> None:
        super().__init__(inner)
        self.replies = list(replies)

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        forced = dataclasses.replace(options, grammar=literal(self.replies.pop(0)), grammar_trigger=None)
        return self.inner.complete(tokens, forced, on_token=on_token)


@pytest.mark.real_model
def test_opening_a_skill_keeps_the_kv_prefix_on_the_embedded_model(workspace: Path, real_llm) -> None:
    folder = Path(os.environ["HERMES_LOCAL_HOME"]) / "skills" / "weekly-report"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: weekly-report\ndescription: Writes the weekly report from notes.txt.\n---\n"
        "1. Read notes.txt.\n2. Write report.md, one line per note.\n"
    )
    opened = '<tool_call>\n{"name": "' + OPEN_SKILL + '", "arguments": {"name": "weekly-report"}}\n</tool_call>'
    llm = Forced(real_llm, [opened, "Done."])
    settings = load_settings({"tools": ["time"], "n_ctx": 2048, "max_tokens": 64, "memory": False})
    with build_agent(llm, settings, workspace=workspace, approver=Approver(interactive=False)) as agent:
        result = agent.run("Write the weekly report.")
    assert [c.name for c in result.tool_calls] == [OPEN_SKILL] and result.tool_calls[0].ok
    first, second = result.llm_calls
    assert second.prompt_tokens_new > 0
    ratio = second.prompt_tokens_evaluated / second.prompt_tokens_new
    assert ratio == 1.0, (second.prompt_tokens, second.prompt_tokens_evaluated, second.prompt_tokens_new)
    assert second.prompt_tokens_evaluated < second.prompt_tokens - first.prompt_tokens // 2
