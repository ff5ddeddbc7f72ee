"""`POST /v1/chat/completions` for clients that bring their own tools, answered in the model's dialect.

OpenAI-shaped messages and `tools` are rendered by the same dialect as the agent's (`dialects/`, Hermes
by default: the trained tool block offers the tools, assistant tool calls become the dialect's call
blocks, `role: "tool"` messages become one results turn per run of results); all client text is
untrusted content and never becomes special tokens. `tool_choice`
(`auto`, `none`, `required`, or a named function) is enforced with the dialect's tool-call grammar
(lazy after the call opener for `auto`; pre-filled and constrained from the first token
for `required` and a named function). The reply is parsed (and repaired) by `calls/parse.py`; calls
come back as OpenAI `tool_calls` with ids and JSON-string arguments and `finish_reason:
"tool_calls"`. `stream: true` sends `chat.completion.chunk` deltas: content as it is generated (text that
may open a call, in the dialect's own opener, is held back) and then one tool-call delta per call (`ChunkStream`).
Does not run tools, call the model (`chats.py` queues and runs the calls) or know about HTTP routes.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from hermes_local.calls.grammar import check_schema
from hermes_local.calls.parse import ToolCall
from hermes_local.calls.thoughts import ReplyStream
from hermes_local.dialects.base import Dialect
from hermes_local.dialects.hermes import HermesDialect
from hermes_local.errors import UserError
from hermes_local.llm import DEFAULT_STOP, CallOptions, Completion
from hermes_local.prompts import Segments

CALL_OPEN = "<tool_call>"
DIALECT: Dialect = HermesDialect()  # the format Hermes 2 Pro / 3 were trained on


class ChatRequest(BaseModel):
    """The fields of an OpenAI chat completion request that change the answer (others are ignored)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None


class _SchemaTool:
    """A client's function definition, shaped like `tools.Tool` for `grammar.tool_call_grammar`."""

    def __init__(self, spec: dict[str, Any], index: int) -> None:
        fn = spec.get("function") if spec.get("type", "function") == "function" else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise UserError(f'tools[{index}] must be {{"type": "function", "function": {{"name": ..., ...}}}}')
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise UserError(f"tools[{index}].function.parameters must be a JSON schema object")
        if len(fn["name"]) > 128:
            raise UserError(f"tools[{index}].function.name is longer than 128 characters")
        check_schema(params, f"tools[{index}].function.parameters")
        self.name: str = fn["name"]
        self._schema: dict[str, Any] = {
            "type": "function",
            "function": {"name": self.name, "description": str(fn.get("description") or ""), "parameters": params},
        }

    def schema(self) -> dict[str, Any]:
        return self._schema

    def parameters_schema(self) -> dict[str, Any]:
        return self._schema["function"]["parameters"]


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise UserError(f"{where}: only text content parts are supported")
        return "".join(parts)
    raise UserError(f"{where} must be a string or a list of text parts")


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError) as exc:  # ValueError: also a number past Python's 4,300-digit limit
        raise UserError(f"{where}.function.arguments must be a JSON object string ({exc})") from exc
    if not isinstance(value, dict):
        raise UserError(f"{where}.function.arguments must be a JSON object")
    return value


def render_messages(messages: list[dict[str, Any]], dialect: Dialect = DIALECT) -> list[dict[str, Any]]:
    """OpenAI messages -> the dialect's messages of `Segments` (framing trusted, every client text untrusted).

    The client's system messages become the system turn that follows the dialect's tool block; the tools
    themselves are offered by `Dialect.tokens`.
    """
    system = [_text(m.get("content"), f"messages[{i}].content") for i, m in enumerate(messages)
              if m.get("role") in ("system", "developer")]  # fmt: skip
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": Segments.untrusted("\n\n".join(system))})
    names: dict[str, str] = {}  # tool_call_id -> function name
    responses: list[dict[str, Any]] = []

    def flush_responses() -> None:
        if responses:
            out.append({"role": "tool", "content": dialect.tool_results(0, list(responses))})
            responses.clear()

    for i, m in enumerate(messages):
        role, where = m.get("role"), f"messages[{i}]"
        if role != "tool":
            flush_responses()
        if role in ("system", "developer"):
            continue
        if role == "user":
            out.append({"role": "user", "content": Segments.untrusted(_text(m.get("content"), f"{where}.content"))})
        elif role == "assistant":
            calls = []
            for j, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise UserError(f"{where}.tool_calls[{j}] needs function.name and function.arguments")
                calls.append(ToolCall(fn["name"], _arguments(fn.get("arguments"), f"{where}.tool_calls[{j}]")))
                if isinstance(tc.get("id"), str):
                    names[tc["id"]] = fn["name"]
            text = _text(m.get("content"), f"{where}.content").strip()
            out.append({"role": "assistant", "content": dialect.assistant_content(0, text, calls)})
        elif role == "tool":
            content = _text(m.get("content"), f"{where}.content")
            try:
                shown: Any = json.loads(content)
            except (ValueError, RecursionError):  # not JSON, a 5,000-digit number, nesting too deep: plain text
                shown = content
            name = m.get("name") or names.get(str(m.get("tool_call_id")), "tool")
            responses.append({"name": str(name), "content": shown})
        else:
            raise UserError(f"{where}.role must be system, user, assistant or tool, not {role!r}")
    flush_responses()
    return out


@dataclass
class Prepared:
    """A request turned into what the model call needs."""

    tokens: list[int]
    prefill: str
    options: CallOptions
    tools: list[_SchemaTool]
    choice: str  # auto | none | required | named
    dialect: Dialect = DIALECT


def prepare(
    req: ChatRequest,
    model: Any,
    *,
    temperature: float,
    max_tokens: int,
    use_grammar: bool,
    dialect: Dialect = DIALECT,
) -> Prepared:
    """Render the prompt in the model's dialect and pick grammar and pre-fill for the request's `tool_choice`."""
    tools = [_SchemaTool(spec, i) for i, spec in enumerate(req.tools or [])]
    choice_raw = req.tool_choice if req.tool_choice is not None else ("auto" if tools else "none")
    allowed = tools
    if isinstance(choice_raw, dict):
        function = choice_raw.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise UserError('tool_choice must be {"type": "function", "function": {"name": NAME}}')
        wanted = function["name"]
        allowed = [t for t in tools if t.name == wanted]
        if not allowed:
            raise UserError(f"tool_choice names function {wanted!r}, which is not in tools")
        choice = "named"
    elif choice_raw in ("auto", "none", "required"):
        choice = choice_raw
    else:
        raise UserError('tool_choice must be "auto", "none", "required" or {"type": "function", ...}')
    if choice in ("required", "named") and not tools:
        raise UserError(f"tool_choice {choice_raw!r} needs tools")
    if not tools:
        choice = "none"
    forced = choice in ("required", "named")
    prefill = dialect.required_prefill if forced else ""
    messages = render_messages(req.messages, dialect)
    offered = [] if choice == "none" else [t.schema() for t in tools]
    tokens = dialect.tokens(messages, offered, model, prefill=prefill)
    room = model.n_ctx - len(tokens) - 1
    if room < 1:
        raise UserError(f"the prompt needs {len(tokens)} tokens but the model's context is {model.n_ctx}")
    grammar = None
    if use_grammar and choice != "none":
        grammar = dialect.grammar(cast(Any, allowed))
    stop = tuple(dialect.stop or DEFAULT_STOP) + ((req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ()))
    wanted_tokens = req.max_completion_tokens or req.max_tokens or max_tokens
    options = CallOptions(
        max_tokens=min(wanted_tokens, room),
        temperature=req.temperature if req.temperature is not None else temperature,
        stop=stop,
        grammar=grammar,
        grammar_trigger=None if (grammar is None or forced) else dialect.call_open,
    )
    return Prepared(
        tokens=tokens,
        prefill=prefill,
        options=options,
        tools=allowed,
        choice=choice,
        dialect=dialect,
    )


def reply_parts(p: Prepared, completion: Completion) -> tuple[str | None, list[dict[str, Any]], str, str]:
    """(content, OpenAI tool_calls, finish_reason, reasoning) of a finished completion: a thought is never
    content (it is `reasoning_content`, as llama-server sends it)."""
    text = p.prefill + completion.text
    parsed = p.dialect.parse(text, [t.name for t in p.tools])
    if p.choice == "none":
        return (parsed.text if parsed.reasoning else text).strip(), [], completion.finish_reason, parsed.reasoning
    known = {t.name for t in p.tools}
    calls = [
        {
            "id": "call_" + secrets.token_hex(12),
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
        }
        for c in parsed.calls
        if c.name in known
    ]
    content = parsed.text or None
    if calls:
        return content, calls, "tool_calls", parsed.reasoning
    if content is None:  # a thought only: empty content; nothing parsed out of it: the raw reply, not nothing
        content = "" if parsed.reasoning else text.strip()
    return content, [], completion.finish_reason, parsed.reasoning


def _usage(completion: Completion) -> dict[str, int]:
    u = completion.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


def chat_response(req: ChatRequest, p: Prepared, completion: Completion, model_name: str) -> dict[str, Any]:
    """The `chat.completion` object for a non-streaming request, from its finished completion."""
    content, calls, finish, reasoning = reply_parts(p, completion)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model or model_name,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _usage(completion),
    }


def _partial_opener(text: str, call_open: str) -> int:
    """How many of `text`'s last characters may be the start of `call_open` split across pieces ("<tool", "``",
    "[TOOL_"): they wait for the next piece, whatever character the opener starts with."""
    for k in range(min(len(call_open) - 1, len(text)), 0, -1):
        if text.endswith(call_open[:k]):
            return k
    return 0


class _ContentGate:
    """Streamed text to send now: leading and trailing whitespace waits, and so does anything from a
    possible call opener on (`watch_calls`: the dialect's `<tool_call>`, ```` ```tool_code ````, `[TOOL_CALLS]`,
    even split across pieces); nothing is sent once a call opened or when `closed`."""

    def __init__(self, *, watch_calls: bool, closed: bool = False, call_open: str | None = None) -> None:
        self.call_open = call_open or CALL_OPEN
        self.text = ""
        self.sent = 0
        self.watch_calls = watch_calls
        self.closed = closed

    def feed(self, piece: str) -> str:
        self.text += piece
        if self.closed:
            return ""
        if self.sent == 0:
            self.sent = len(self.text) - len(self.text.lstrip())
        end = len(self.text.rstrip())
        if self.watch_calls:
            found = self.text.find(self.call_open, self.sent)
            if found >= 0:
                self.closed, end = True, len(self.text[:found].rstrip())
            else:
                held = _partial_opener(self.text[self.sent : end], self.call_open)
                end = len(self.text[: end - held].rstrip()) if held else end
        if end <= self.sent:
            return ""
        out, self.sent = self.text[self.sent : end], end
        return out


class ChunkStream:
    """Server-sent `chat.completion.chunk` lines for one streamed reply, fed as the model produces it: `first()`,
    then `piece(text)` for each generated piece, then `finish(completion)` (or `error(exc)`), each ending the
    stream with `data: [DONE]`. Holds no thread and waits for nothing: `chats.py` feeds it."""

    def __init__(self, req: ChatRequest, p: Prepared, model_name: str) -> None:
        self.req, self.p = req, p
        self.id, self.created, self.name = (
            "chatcmpl-" + secrets.token_hex(12),
            int(time.time()),
            req.model or model_name,
        )
        self.gate = _ContentGate(watch_calls=p.choice != "none", closed=bool(p.prefill), call_open=p.dialect.call_open)
        self.thoughts = ReplyStream(p.dialect.all_thoughts(), hide_markup=False)  # thoughts: reasoning_content
        self.sent = ""

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    def first(self) -> str:
        return self._chunk({"role": "assistant", "content": ""})

    def piece(self, text: str) -> list[str]:
        out = []
        for channel, part in self.thoughts.feed(text):
            shown = part if channel == "thought" else self.gate.feed(part)
            if shown and channel == "thought":
                out.append(self._chunk({"reasoning_content": shown}))
            elif shown:
                self.sent += shown
                out.append(self._chunk({"content": shown}))
        return out

    def error(self, exc: BaseException) -> list[str]:
        message = exc.line if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        return [f"data: {json.dumps({'error': {'message': message, 'type': 'server_error'}})}\n\n", "data: [DONE]\n\n"]

    def finish(self, completion: Completion) -> list[str]:
        content, calls, finish, _reasoning = reply_parts(self.p, completion)
        out = []
        if content and content.startswith(self.sent) and len(content) > len(self.sent):
            out.append(self._chunk({"content": content[len(self.sent) :]}))
        for i, call in enumerate(calls):
            head = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
            head["function"]["arguments"] = ""
            out.append(self._chunk({"tool_calls": [head]}))
            out.append(
                self._chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
            )
        out.append(self._chunk({}, finish))
        if (self.req.stream_options or {}).get("include_usage"):
            body = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.name}
            out.append(f"data: {json.dumps(body | {'choices': [], 'usage': _usage(completion)})}\n\n")
        return [*out, "data: [DONE]\n\n"]
