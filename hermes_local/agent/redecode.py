"""Re-decode a reply whose tool call does not parse, in the same step, instead of sending back an error turn.

When a reply holds something that starts like a call (any family's opener: `<tool_call>`, `<function`,
`[TOOL_CALLS]`, `{"name"`, `<|tool_call>`, `to=functions.`, ...) but parsing it gives an error, the lazy
grammar never engaged (the model wrote the call outside its trigger). `span_start` finds where that span
begins: the last opener before which the reply still parses cleanly. A reply that gave neither a call nor an
error but holds an unambiguous call opener of some family (`<|tool_call>`, `to=functions.`, ...) wrote its call
in a syntax this dialect does not read: it is re-decoded from that opener.
`redecode` then asks the model again from exactly there: the prompt is the step's prompt, the reply's
own tokens up to the span, and the dialect's call opener (`required_prefill`), decoded once under the call
grammar from its first token. On the in-process engine the prompt and the kept reply are already in the
KV cache (`kvcache.py` reuses the common prefix), so this is a rewind to the span and a short constrained
decode, not a new step. Only an engine that says it keeps its KV cache between calls (`rewinds_kv`) is
asked; a remote engine keeps today's repair (the parser's error turn). Prints nothing, runs no tool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hermes_local.calls.parse import ParseResult
from hermes_local.llm import LLM, CallOptions, Completion

_OPENERS = re.compile(
    r"<\s*tool_call\s*>|<\|tool_call>|<function[=\s>]|\[TOOL_CALLS\]|\{\s*\"(?:name|function)\"|to=functions\."
    r"|<｜tool▁call▁begin｜>|<minimax:tool_call>|<invoke\s|```tool_code|<\|python_tag\|>|<\s*tool\s*>",
    re.I,
)
# Openers of call syntaxes only their own family's dialect reads (the shared parser reads `<tool_call>`, `<function=`
# and `[TOOL_CALLS]` in every dialect, so one of those that gave no call was prose): a reply holding one outside its
# thoughts that gave neither a call nor an error wrote its call in another family's syntax, and is re-decoded there.
_FOREIGN = re.compile(r"<\|tool_call>|to=functions\.[A-Za-z_]|<｜tool▁call▁begin｜>|<minimax:tool_call>|```tool_code")


@dataclass
class Redo:
    """A re-decoded reply: what the model now wrote from the span on, what it replaced, whether it now parses,
    the reply the step goes on with (the re-decoded one, else the text before the span), and the model call."""

    start: int
    written: str
    replaced: str
    ok: bool
    reply: str
    completion: Completion
    prompt: list[int]


@dataclass
class LastCall:
    """The step's model call: its prompt, options, completion and the prefill it began with."""

    prompt: list[int]
    options: CallOptions
    completion: Completion
    prefill: str


def try_redecode(
    llm: LLM, last: LastCall | None, text: str, parse: Callable[[str], ParseResult], opener: str
) -> Redo | None:
    """Re-decode `text` (the step's reply) once when its call does not parse and the engine can rewind; None
    when nothing needs it or it cannot be done (a forced call, no grammar, a remote engine, no opener)."""
    if last is None or last.prefill or not last.options.grammar or not rewinds(llm):
        return None
    parsed = parse(text)
    foreign = None if parsed.calls or parsed.errors or parsed.rehearsed else _FOREIGN.search(text)
    if foreign is not None and foreign.group() in parsed.reasoning:
        foreign = None  # written inside a thought: a rehearsal, not a call
    if not parsed.errors and foreign is None:
        return None
    start = foreign.start() if foreign is not None else span_start(text, parse)
    if start is None:
        return None
    redo = redecode(llm, last.prompt, last.completion, start, opener, last.options)
    ok = not parse(redo.reply).errors and bool(parse(redo.reply).calls)
    redo.ok, redo.reply = ok, redo.reply if ok else text[:start]
    return redo


def rewinds(llm: LLM) -> bool:
    """Whether the engine keeps its KV cache between calls, so a re-decode costs only the span."""
    return bool(getattr(llm, "rewinds_kv", False)) and callable(getattr(llm, "detokenize", None))


def span_start(text: str, parse: Callable[[str], ParseResult], floor: int = 0) -> int | None:
    """Where the unreadable call span of `text` begins (None: no opener, or the text before every opener
    already fails to parse). `floor`: no earlier than this (a prefill of ours)."""
    starts = [m.start() for m in _OPENERS.finditer(text) if m.start() >= floor]
    for start in reversed(starts):
        if not parse(text[:start]).errors:
            return start
    return None


def _kept_tokens(llm: LLM, tokens: Sequence[int], text: str, chars: int) -> list[int]:
    """The reply's own tokens covering its first `chars` characters, and the rest of them tokenized as text."""
    detokenize: Callable[[Sequence[int]], str] = getattr(llm, "detokenize")  # noqa: B009 - optional on LLM
    low, high = 0, len(tokens)
    while low < high:  # the most tokens whose text is a prefix of text[:chars]
        mid = (low + high + 1) // 2
        piece = detokenize(tokens[:mid])
        if len(piece) <= chars and text.startswith(piece):
            low = mid
        else:
            high = mid - 1
    covered = len(detokenize(tokens[:low]))
    rest = text[covered:chars]
    return list(tokens[:low]) + (llm.tokenize(rest, special=False) if rest else [])


def redecode(
    llm: LLM, prompt: Sequence[int], completion: Completion, start: int, opener: str, options: CallOptions
) -> Redo:
    """Decode the reply again from character `start` of `completion.text`: `opener` (framing) and then the call
    under `options.grammar` from its first token; nothing after it is streamed."""
    kept = _kept_tokens(llm, completion.tokens, completion.text, start)
    again = [*prompt, *kept, *llm.tokenize(opener, special=True)]
    budget = max(16, min(options.max_tokens, llm.n_ctx - len(again) - 1))
    done = llm.complete(again, options.replace(grammar_trigger=None, max_tokens=budget))
    written = opener + done.text
    text = completion.text
    return Redo(start, written, text[start:], True, text[:start] + written, done, again)
