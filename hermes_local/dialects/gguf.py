"""The `gguf` dialect: the model's own `tokenizer.chat_template`, rendered safely.

For any family the other dialects do not cover. The template (its `tool_use` variant when the GGUF has
one) runs in the bounded sandbox of `prompts.py` (a time and output budget; no `lipsum`)
with the globals transformers passes (`messages`, `tools`,
`bos_token`, `eos_token`, `add_generation_prompt`, `raise_exception`, `strftime_now`) and its
`tojson`. Every message content is replaced by a unique sentinel before rendering and put back
afterwards with its own trust flags, so only the template's text can become special tokens. Tool
definitions are template data: they are refused if they spell special-token text; a template that
does not use `tools` gets the Hermes tool block at the top of the system message instead (as content). Calls in the
history, the parser, the grammar and its trigger follow the model's call format (`call_format`: the
registry's `tool_call_format`, else detected from the template's markers, else `hermes`): e.g. a
template that teaches `[TOOL_CALLS]` gets the mistral parser entry and JSON-array grammar. Results go
back as `tool` messages. Stop strings are the GGUF's EOS/EOT token texts. The thought markers are the ones
the template names (`<think>` by default); a template that cuts `</think>` out of past assistant turns
(DeepSeek-R1, QwQ) drops past thoughts, any other (Qwen3's keeps those of the current query) keeps them.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import jinja2

from hermes_local.calls.formats import detect_call_format
from hermes_local.calls.parse import ParseResult, ToolCall
from hermes_local.calls.thoughts import KNOWN_THOUGHTS
from hermes_local.dialects.base import Dialect, Message, ToolDef, dumps
from hermes_local.errors import UserError
from hermes_local.prompts import BoundedSandbox, Segment, Segments, render_bounded

_SENTINEL = re.compile("\ue002(\\d+)\ue003")
_CONTROL_TEXT = re.compile(r"<\|[^|<>\s]{1,40}\|>|<｜[^｜<>]{1,40}｜>|</?s>|\[/?(?:INST|TOOL_CALLS|AVAILABLE_TOOLS)\]")
_USES_TOOLS = re.compile(r"\btools\b")
_PRIVATE_MARKER = re.compile("[\ue000-\ue004]")  # the sentinels' characters: never in template data
_DROPS_THOUGHTS = re.compile(r"split\(\s*['\"]</think>['\"]\s*\)")  # content.split('</think>')[-1]
_NEXT_RESULT = Segment("\ue004", True)  # separates results in one results turn: each becomes a tool message


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:  # fmt: skip
    if isinstance(indent, int) and not 0 <= indent <= 16:
        raise jinja2.exceptions.TemplateError(f"tojson indent={indent} is out of range (0-16)")
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    try:
        return datetime.datetime.now().strftime(str(fmt)[:200])
    except (UnicodeError, ValueError) as exc:
        raise jinja2.exceptions.TemplateError(f"strftime_now({fmt!r}) failed: {exc}") from None


@lru_cache(maxsize=8)
def _compiled(source: str) -> jinja2.Template:
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.add_filter("tojson", _tojson)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def template_error(source: str) -> str:
    """Why a chat template does not compile as transformers compiles it, e.g. `line 2: unexpected '}'` ("" if
    it does)."""
    try:
        _compiled(source)
    except jinja2.TemplateSyntaxError as exc:
        return f"line {exc.lineno}: {' '.join(str(exc.message).split())[:200]}"
    except (jinja2.TemplateError, RecursionError, ValueError) as exc:
        return " ".join(str(exc).split())[:200] or type(exc).__name__
    return ""


def compile_template(source: str) -> jinja2.Template:
    """A chat template compiled as transformers does (sandboxed, trim_blocks, lstrip_blocks)."""
    problem = template_error(source)
    if problem:
        raise UserError(f"the model's chat template does not compile ({problem}); pick a format with --dialect")
    return _compiled(source)


def _call_dialect(call_format: str) -> Dialect:
    """The fixed dialect whose call syntax a `gguf` model writes ("none": hermes, never used for calls)."""
    from hermes_local.dialects.gemma import Gemma4Dialect
    from hermes_local.dialects.gemma3 import Gemma3Dialect
    from hermes_local.dialects.harmony import HarmonyDialect
    from hermes_local.dialects.hermes import HermesDialect
    from hermes_local.dialects.llama3 import Llama3Dialect
    from hermes_local.dialects.mistral import MistralDialect
    from hermes_local.dialects.qwen import QwenDialect
    from hermes_local.dialects.qwen3coder import Qwen3CoderDialect
    from hermes_local.dialects.textcalls import DeepSeekCalls, MiniMaxCalls

    by_format: dict[str, type[Dialect]] = {
        "qwen": QwenDialect,
        "mistral": MistralDialect,
        "llama3": Llama3Dialect,
        "qwen3-coder": Qwen3CoderDialect,
        "gemma": Gemma4Dialect,
        "tool_code": Gemma3Dialect,
        "harmony": HarmonyDialect,
        "deepseek": DeepSeekCalls,
        "minimax": MiniMaxCalls,
    }
    return by_format.get(call_format, HermesDialect)()


def tool_offer_text(tools: Sequence[dict[str, Any]]) -> str:
    """The Hermes tool block's text (without its framing), for templates that cannot offer tools."""
    from hermes_local.dialects.hermes import HermesDialect

    text = HermesDialect().render([], tools, add_generation_prompt=False).text
    return text.removeprefix("<|im_start|>system\n").removesuffix("<|im_end|>\n")


class GGUFDialect(Dialect):
    """Renders a model's own chat template; content behind sentinels."""

    name = "gguf"
    description = "the model's own tokenizer.chat_template (sandboxed Jinja), for any other family"

    def __init__(
        self,
        template: str = "",
        *,
        bos_token: str = "",
        eos_token: str = "",
        stop: Sequence[str] = (),
        call_format: str | None = None,
    ) -> None:
        self.source = template
        self.call_format = call_format or detect_call_format(template)
        self.calls = _call_dialect(self.call_format)  # writes, parses and constrains the calls
        self.call_open = self.calls.call_open
        self.required_prefill = self.calls.required_prefill
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.stop = tuple(dict.fromkeys([*stop, *([eos_token] if eos_token else [])]))
        named = [m for m in KNOWN_THOUGHTS if m[1] in template]
        self.thoughts = tuple(named) or self.thoughts
        self.keep_thoughts = "last_query_index" in template or not _DROPS_THOUGHTS.search(template)

    def add_stops(self, texts: Iterable[str]) -> None:
        """Also stop at these texts (the model's EOS/EOT tokens, known once its vocabulary is loaded)."""
        self.stop = tuple(dict.fromkeys([*self.stop, *(t for t in texts if t)]))
        if not self.eos_token and self.stop:
            self.eos_token = self.stop[0]

    def call_text(self, call: ToolCall, step: int, index: int) -> str:
        return self.calls.call_text(call, step, index)

    def assistant_content(self, step: int, text: str, calls: Sequence[ToolCall]) -> Segments:
        return self.calls.assistant_content(step, text, calls)

    def parse(self, text: str, tool_names: Sequence[str] | frozenset[str] | None = None) -> ParseResult:
        return self.calls.parse(text, tool_names)

    def grammar(self, tools: Sequence[Any]) -> str:
        return self.calls.grammar(tools)

    def tool_results(self, step: int, responses: Sequence[dict[str, Any]]) -> Segments:
        """One `tool` message per result holding {"name", "content"}; the template frames each."""
        segs: list[Segment] = []
        for i, r in enumerate(responses):
            segs += [_NEXT_RESULT] if i else []
            segs.append(Segment(dumps(r), False))
        return Segments(segs)

    def render_prompt(self, msgs: list[Message], tools: list[ToolDef], open_turn: bool, prefill: str) -> Segments:
        if not self.source:
            raise UserError("this model has no tokenizer.chat_template; pick a format with --dialect NAME")
        if tools and _CONTROL_TEXT.search(dumps(list(tools))):
            raise UserError("a tool definition contains special-token text such as <|...|>; rename or reword it")
        if tools and _PRIVATE_MARKER.search(json.dumps(list(tools), ensure_ascii=False)):
            raise UserError("a tool definition contains private-use characters U+E000-U+E004; remove them")
        messages = msgs
        if tools and not _USES_TOOLS.search(self.source):  # a template without tool support: offer them ourselves
            offer = Segments.untrusted(tool_offer_text(tools))
            if messages and messages[0]["role"] == "system":
                messages[0] = {"role": "system", "content": offer + Segments.untrusted("\n\n") + messages[0]["content"]}
            else:
                messages.insert(0, {"role": "system", "content": offer})
            tools = []
        values: list[Segments] = []
        hf_messages = []
        for m in messages:
            parts: list[list[Segment]] = [[]]
            for seg in m["content"]:
                if seg == _NEXT_RESULT:
                    parts.append([])
                else:
                    parts[-1].append(seg)
            for part in parts:
                values.append(Segments(part))
                hf_messages.append({"role": m["role"], "content": f"\ue002{len(values) - 1}\ue003"})
        try:
            rendered = render_bounded(
                compile_template(self.source),
                messages=hf_messages,
                tools=list(tools) or None,
                bos_token="",  # hermes-local adds the BOS token itself, as llama.cpp does
                eos_token=self.eos_token,
                add_generation_prompt=open_turn,
            )
        except jinja2.TemplateError as exc:
            line = " ".join(str(exc).split())[:200]
            raise UserError(f"the model's chat template failed: {line}; pick a format with --dialect NAME") from None
        out: list[Segment] = []
        pos = 0
        for hit in _SENTINEL.finditer(rendered):
            if hit.start() > pos:
                out.append(Segment(rendered[pos : hit.start()], True))
            index = int(hit.group(1))
            if index >= len(values):  # a sentinel the template (or a tool definition) made up: never content
                raise UserError("the model's chat template made up a content marker; pick a format with --dialect")
            out.extend(values[index])
            pos = hit.end()
        out.append(Segment(rendered[pos:], True))
        if prefill:
            out.append(Segment(prefill, True))
        return Segments(seg for seg in out if seg.text)
