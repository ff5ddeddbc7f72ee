"""The `mistral` dialects: `[AVAILABLE_TOOLS]`, `[INST]`, `[TOOL_CALLS]` JSON arrays, `[TOOL_RESULTS]`.

`mistral` uses tekken spacing (Mistral Nemo, Small 3, Ministral: no space after the control tokens);
`mistral-v3` the v3 spacing of Mistral 7B v0.3 (`[INST] text`, `[TOOL_CALLS] [...]`). Calls carry
9-character ids derived from the step, so a results turn names the calls it answers. Unlike the
official templates, which move the tool list and the system message to the *last* user turn, both stay
at the first one: the prompt prefix must stay byte-stable for the KV cache (identical for a
conversation with one user turn). The grammar is a JSON array of calls after `[TOOL_CALLS]`; a closing
`[/TOOL_CALLS]` some models add is read as the end of the calls. Magistral thinks in `[THINK]...[/THINK]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_local.calls.parse import ToolCall
from hermes_local.calls.thoughts import MISTRAL_THINK, THINK
from hermes_local.dialects.base import Dialect, call_id, dumps
from hermes_local.prompts import Segment, Segments


class MistralDialect(Dialect):
    """Mistral's control-token format (tekken spacing)."""

    name = "mistral"
    template = "mistral.jinja"
    framing_tokens = ("[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]")
    stop = ("</s>", "[INST]", "[TOOL_RESULTS]")
    call_format = "mistral"
    call_open = "[TOOL_CALLS]"
    required_prefill = "[TOOL_CALLS]"
    description = "Mistral (tekken: Nemo, Small 3): [AVAILABLE_TOOLS], [INST], [TOOL_CALLS] array, [TOOL_RESULTS]"
    sp = ""
    user_joins = ("user",)  # after [/TOOL_RESULTS] an [INST] turn is the trained shape
    thoughts = (MISTRAL_THINK, THINK)

    def offer(self, tools: Sequence[dict[str, Any]]) -> Any:
        return "[" + ", ".join(dumps({"type": "function", "function": t.get("function", t)}) for t in tools) + "]"

    def context(self) -> dict[str, Any]:
        return {"sp": self.sp}

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        segs: list[Segment] = []
        if text:
            segs.append(Segment(self.sp + text, False))
        if calls:
            array = [{"name": c.name, "arguments": c.arguments, "id": call_id(step, i)} for i, c in enumerate(calls)]
            segs += [Segment("[TOOL_CALLS]", True), Segment(self.sp + dumps(array), False)]
        return Segments(segs)

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        segs: list[Segment] = []
        for i, r in enumerate(responses):
            body = f'{self.sp}{{"content": {dumps(r["content"])}, "call_id": "{call_id(step, i)}"}}'
            segs += [Segment("[TOOL_RESULTS]", True), Segment(body, False), Segment("[/TOOL_RESULTS]", True)]
        return Segments(segs)

    def grammar(self, tools: Sequence[Any]) -> str:
        from hermes_local.calls.grammar import json_array_grammar

        return json_array_grammar(list(tools))


class MistralV3Dialect(MistralDialect):
    """Mistral 7B v0.3 spacing: a space after `[INST]`, `[AVAILABLE_TOOLS]`, `[TOOL_CALLS]`, `[TOOL_RESULTS]`."""

    name = "mistral-v3"
    sp = " "
    description = "Mistral v3 (Mistral 7B v0.3): as mistral with a space after the control tokens"
