"""What every dialect shares: the `Dialect` base class and the tool-result shape.

A dialect is how one model family frames turns, offers tools, writes calls and receives results.
`Dialect.render(messages, tools)` turns the agent's conversation (role + `Segments` content, the
system message holding hermes-local's own rules) into trusted/untrusted segments through a template
in `prompts/`; `assistant_content` and `tool_results` give the content of an assistant turn with
calls and of the turn(s) answering them. `thoughts` are the family's thought markers (its own first;
the parser reads every known pair, so a call rehearsed in any thought never runs) and `keep_thoughts`
says whether a past thought stays in the history, as the family's template does: `reply_content`
writes it back with trusted markers, so the history is what the model wrote and the KV prefix holds.
Framing (template text) is trusted, so only it can become
special tokens; everything else is content. Does not tokenize beyond `prompts.to_tokens`, load
models or run tools.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hermes_local.calls.parse import ParseResult, ToolCall, parse_tool_calls
from hermes_local.calls.thoughts import KNOWN_THOUGHTS, THINK, Markers
from hermes_local.llm import LLM
from hermes_local.prompts import Segment, Segments, render, to_tokens

ToolDef = dict[str, Any]  # one tool's JSON schema as offered to the model
Message = dict[str, Any]  # {"role": "system" | "user" | "assistant" | "tool", "content": Segments}


def result_content(envelope: dict[str, Any]) -> Any:
    """What a model sees of one tool result: the data, or the error and its kind (no duplicate fields)."""
    if envelope.get("ok"):
        return envelope.get("data")
    return {"error": envelope.get("error"), "kind": envelope.get("error_kind")}


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON as transformers' `tojson` writes it: keys in insertion order, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def call_id(step: int, index: int) -> str:
    """A stable 9-character call id (Mistral requires exactly nine alphanumerics)."""
    return f"s{step % 10000:04d}c{index % 1000:03d}"


class Dialect:
    """One model family's prompt format; subclasses set the class attributes and the templates."""

    name = "base"
    template = "chatml.jinja"
    framing_tokens: tuple[str, ...] = ()  # must be single special tokens in the model's vocabulary
    stop: tuple[str, ...] = ()
    call_format = "hermes"  # the call syntax parsed and constrained (calls/formats.py); "none": no tools
    call_open: str | None = None  # the lazy grammar trigger (None: the grammar applies only when required)
    required_prefill = ""  # written for the model when every step must call a tool; the grammar follows it
    description = ""
    user_joins: tuple[str, ...] = ("user", "tool")  # a user note merges into a preceding turn of these roles
    roles: dict[str, str] = {}  # our role -> the role this family's template writes (e.g. tool -> user)
    default_system: str | None = None  # the system turn the family's template writes when it is given none
    thoughts: tuple[Markers, ...] = (THINK,)  # the family's thought markers (its own first)
    keep_thoughts = True  # a template that writes the content verbatim keeps a past thought in the history

    # -- prompt ----------------------------------------------------------------------------
    def offer(self, tools: Sequence[dict[str, Any]]) -> Any:
        """The tool definitions as this dialect's template wants them (default: the schemas)."""
        return list(tools)

    def render(
        self,
        messages: Sequence[Message],
        tools: Sequence[dict[str, Any]] = (),
        *,
        add_generation_prompt: bool = True,
        prefill: str = "",
    ) -> Segments:
        """The whole prompt as segments; `messages[0]` may be a system message (our rules). `add_generation_prompt`:
        end in an open assistant turn, begun with `prefill` (framing of ours)."""
        return self.render_prompt(list(messages), list(tools), add_generation_prompt, prefill)

    def render_prompt(self, msgs: list[Message], tools: list[ToolDef], open_turn: bool, prefill: str) -> Segments:
        """`render` for this family (default: its own Jinja template); a dialect overrides this, not `render`."""
        if msgs and msgs[0]["role"] == "system":
            system = msgs.pop(0)["content"]
        else:
            system = Segments.untrusted(self.default_system) if self.default_system else None
        msgs = [{**m, "role": self.roles.get(m["role"], m["role"])} for m in msgs]
        return render(
            self.template,
            system=system,
            messages=msgs,
            tools=self.offer(tools) if tools else None,
            add_generation_prompt=open_turn,
            prefill=Segments((Segment(prefill, True),)) if prefill else "",  # ours, so framing
            **self.context(),
        )

    def context(self) -> dict[str, Any]:
        """Extra template variables of this dialect."""
        return {}

    def tokens(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], llm: LLM, *, prefill: str = ""
    ) -> list[int]:
        """Token ids of the conversation ending in an open assistant turn (optionally pre-filled)."""
        return to_tokens(self.render(messages, tools, prefill=prefill), llm)

    # -- history ---------------------------------------------------------------------------
    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return dumps({"name": call.name, "arguments": call.arguments})

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        """An assistant reply with its calls in canonical form (trusted tags, untrusted JSON)."""
        segs: list[Segment] = []
        if text:
            segs.append(Segment(text + ("\n" if calls else ""), False))
        for i, call in enumerate(calls):
            segs += [Segment("<tool_call>\n", True), Segment(self.call_text(call, step, i), False)]
            segs.append(Segment("\n</tool_call>" + ("\n" if i < len(calls) - 1 else ""), True))
        return Segments(segs)

    def reply_content(
        self, step: int, text: str, calls: Sequence[ToolCall], reasoning: str = "", markers: Markers | None = None
    ) -> Segments:
        """The assistant turn of a reply, with its thought first when this family keeps past thoughts."""
        content = self.assistant_content(step, text, calls)
        if not (reasoning and self.keep_thoughts):
            return content
        open_, close = markers or self.thoughts[0]
        return (
            Segments((Segment(open_, True), Segment(f"\n{reasoning}\n", False), Segment(f"{close}\n\n", True)))
            + content
        )

    def all_thoughts(self) -> tuple[Markers, ...]:
        """This family's thought markers first, then every other known pair (what the engine watches)."""
        return (*self.thoughts, *(m for m in KNOWN_THOUGHTS if m not in self.thoughts))

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        """One turn answering a step's calls; `responses` hold {"name", "content"} (content shown as is)."""
        return render("tool_response.jinja", responses=[dumps(r) for r in responses])

    # -- output ----------------------------------------------------------------------------
    def parse(self, text: str, tool_names: Sequence[str] | frozenset[str] | None = None) -> ParseResult:
        return parse_tool_calls(text, tool_names, dialect=self.name)

    def grammar(self, tools: Sequence[Any]) -> str:
        """GBNF for what follows `call_open`."""
        from hermes_local.calls.grammar import tool_call_grammar

        return tool_call_grammar(list(tools))

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


class ChatMLDialect(Dialect):
    """The ChatML framing and `<tool_call>` trigger that Hermes and Qwen share; subclasses add the tool offer."""

    framing_tokens = ("<|im_start|>", "<|im_end|>")
    stop = ("<|im_end|>", "<|im_start|>", "<|endoftext|>")
    call_open = "<tool_call>"
    required_prefill = "<tool_call>\n"
