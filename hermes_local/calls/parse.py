"""Tool-call extraction and repair: `parse_tool_calls(text, tool_names=None) -> ParseResult`.

It scans one model reply (no XML parser: one `&` or `<` in prose must not lose a call) and returns the calls, the text
left for the user, and one error per unreadable block, worded for the model. It reads `<tool_call>{json}</tool_call>`
(several; a tag missing; several objects or an array per block; fences; drifted wrappers `<tool>`, `<function_call>`,
and `<tools>`/`<json>` only when call-shaped, as `<tools>` also holds definitions), `[TOOL_CALLS] [...]`,
`[TOOL_CALLS]name[ARGS]{...}`, `<function=NAME>{args}`, `<function name="NAME">`, `<function>NAME</function>{args}`,
`<parameter=KEY>value</parameter>`, and bare JSON only when call- shaped and named in `tool_names`. It repairs trailing
commas, raw newlines in strings, Python literals, arguments sent as a JSON string, as "parameters"/"args"/"input" or as
flat keys, OpenAI envelopes, and brackets left open by a reply cut off after a complete value; a value cut mid-string
(a cut-off name or path) is never completed but reported. A thought (any pair of `thoughts.py`, unclosed, or closed
only: the prompt opened it) is neither calls nor text: it is `reasoning`, its calls `rehearsed` (never run).
`[/TOOL_CALLS]` is dropped; a `<tool_response>` (or a user/tool turn) the model wrote itself is made up, so it and all
after it are dropped; ChatML leftovers are removed (`prose.py` joins the text left); `dropped` lists all that, with why.

It never executes anything, does not check arguments against schemas, and keeps unknown tool names found inside tags
(the agent reports those). One reply yields at most `MAX_CALLS` calls and `MAX_ERRORS` errors (a reply of thousands of
calls or broken blocks is reported, not fanned out). Scanning and repairing the JSON itself is `json_repair.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hermes_local.calls.json_repair import decode as _decode
from hermes_local.calls.json_repair import scan as _scan
from hermes_local.calls.json_repair import value_at as _value
from hermes_local.calls.prose import CUT_OFF, HOLE, LEFTOVER, MADE_UP, OVER_LIMIT, STRAY_TAG, kept_text, leftovers
from hermes_local.calls.thoughts import CLOSE_PATTERN, OPEN_PATTERN, Markers, pair_of, prompt_opened, thought_end
from hermes_local.calls.variants import normalize_variants

MAX_CALLS = 32  # calls kept from one reply (the rest are reported, not run)
MAX_ERRORS = 4  # error messages kept from one reply (the last one counts the rest)
CALL_EXAMPLE = '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>'

_STRONG = r"tool_calls?|toolcall|tool-call|function_calls?|tool"  # a call is meant: bad JSON is an error
_WEAK = r"tools|json"  # a call only if the content is call-shaped
_STRONG_CLOSE = rf"<\s*/\s*(?:{_STRONG}|function)\s*>"
_TAGS = rf"{_STRONG}|{_WEAK}|function"
_MARKER = re.compile(
    rf"(?P<open><\s*(?P<tag>{_STRONG}|{_WEAK})\s*>)"
    rf"|(?P<close>{_STRONG_CLOSE}|{CLOSE_PATTERN}|\[/TOOL_CALLS\])"
    r"|(?P<fn><function(?:=(?P<eq>[^>\s]*)|\s+name\s*=\s*[\"'](?P<attr>[^\"']*)[\"']\s*)?\s*(?:>|(?P<fncut>\Z)))"
    r"|(?P<mistral>\[TOOL_CALLS\])"
    r"|(?P<fence>```(?P<lang>[\w-]*)[^\n`]*\n?)"
    rf"|(?P<think>{OPEN_PATTERN})"
    r"|(?P<response><tool_response>|<\|im_start\|>\s*(?:user|tool|system|ipython)\b)"
    r"|(?P<brace>[{\[])",
    re.I,
)
_FIRST = re.compile(r"[<\[`{]")  # every marker starts with one of these
_CLOSER = re.compile(rf"<\s*/\s*(?:{_TAGS})\s*>", re.I)
_STRONG_CLOSER = re.compile(_STRONG_CLOSE, re.I)
_OPENER = re.compile(rf"<\s*(?:{_STRONG})\s*>|\[TOOL_CALLS\]|<function[=\s>]", re.I)
_SKIP = re.compile(r"(?:\s|,|```[\w-]*|<\|[a-z_]+\|>|</s>|\[/TOOL_CALLS\])*", re.I)


def _skip(s: str, pos: int) -> int:
    """Past whitespace, commas, fences and stray special tokens from `pos` (the pattern always matches)."""
    m = _SKIP.match(s, pos)
    return m.end() if m else pos


_PARTIAL_END = re.compile(r"<\s*/?\s*[\w-]*\Z")
_FN_NAME = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*</function>", re.I)
_NAME_JSON = re.compile(r"([A-Za-z_][\w.\-]*)\s*(?=\{)")
_MISTRAL_ARGS = re.compile(r"([A-Za-z_][\w.\-]*)\s*\[ARGS\]")
_PARAM = re.compile(r"\s*<parameter(?:=(?P<k>[^>]+)|\s+name\s*=\s*[\"'](?P<a>[^\"']+)[\"']\s*)>", re.I)
# Where a parameter value ends; whitespace before a next tag is not part of the value. Searched once per
# value (a lazy `.*?` with a `\s*` lookahead re-scanned every whitespace run: quadratic on padding).
_PARAM_END = re.compile(r"</parameter>|<parameter[=\s]|</function>", re.I)
_CUT_TAIL = re.compile(r"<\s*([a-z_]{4,})\Z", re.I)
_CALLISH = re.compile(r"name|function|tool", re.I)

_NAME_KEYS = ("name", "function", "tool_name", "tool")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input", "params")
_ENVELOPE_KEYS = frozenset({"id", "type", "index", "call_id", *_NAME_KEYS})
_FENCE_CALL_LANGS = frozenset({"tool_call", "tool_code", "function_call", "tool"})
_HINT_WORDS = frozenset({"json", "call", *_FENCE_CALL_LANGS})  # `<tool_call>json {...}` names no tool


@dataclass
class ToolCall:
    """A parsed tool call: tool name and arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass
class ParseResult:
    """What parsing a reply found: tool calls, the remaining text and errors."""

    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""
    errors: list[str] = field(default_factory=list)
    reasoning: str = ""  # the reply's thoughts (kept out of `text`)
    rehearsed: list[ToolCall] = field(default_factory=list)  # calls written inside a thought: never run
    thought_markers: Markers | None = None  # the markers of the reply's first thought
    echoed: bool = False  # the reply held a tool result or a new turn the model wrote itself (dropped)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (why, the text): parts neither calls nor text


def _error(why: str, shape: bool = False) -> str:
    what = 'needs "name" (a string) and "arguments" (a JSON object), but' if shape else "was not valid JSON:"
    return f"Your tool call {what} {why}; reply with exactly one {CALL_EXAMPLE}"


def _fields(obj: dict[str, Any]) -> tuple[dict[str, Any], Any, str | None]:
    """Unwrap an OpenAI envelope: (the call object, its name, the key holding its arguments)."""
    fn = obj.get("function")
    obj = fn if isinstance(fn, dict) else obj
    return obj, next((obj[k] for k in _NAME_KEYS if k in obj), None), next((k for k in _ARG_KEYS if k in obj), None)


def _is_call(obj: Any, names: frozenset[str] | None) -> bool:
    """Call-shaped (a name and an arguments key), not a tool definition, and named in `names` if given."""
    if not isinstance(obj, dict):
        return False
    obj, name, key = _fields(obj)
    if not isinstance(name, str) or key is None or "description" in obj:
        return False
    args = obj[key]
    if isinstance(args, dict) and args.get("type") == "object" and "properties" in args:
        return False
    return names is None or name.strip() in names


def _call(obj: Any) -> ToolCall | str:
    """One decoded object -> a ToolCall, or an error for the model."""
    if not isinstance(obj, dict):
        return _error(f"it was of type {type(obj).__name__}, not an object", shape=True)
    obj, name, key = _fields(obj)
    if not isinstance(name, str) or not name.strip():
        return _error('"name" is missing or not a string', shape=True)
    args = obj[key] if key else {k: v for k, v in obj.items() if k not in _ENVELOPE_KEYS}
    if isinstance(args, str):
        decoded, _ = _decode(args) if args.strip() else ({}, None)
        args = args if decoded is None else decoded
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return _error(f'"{key}" was of type {type(args).__name__}', shape=True)
    try:  # a `\ud800` escape decodes to a lone surrogate, which is not text: no file name, log line or reply
        json.dumps([name, args], ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _error("it contains a lone surrogate escape such as \\ud800, which is not a character")
    except (RecursionError, ValueError):
        return _error("it is nested too deeply")
    return ToolCall(name.strip(), args)


def _expand(value: Any) -> list[Any]:
    """A list of calls, `{"tool_calls": [...]}`, or one call -> the calls."""
    calls = value.get("tool_calls") if isinstance(value, dict) else value
    return calls if isinstance(calls, list) else [value]


def _params(s: str, pos: int) -> tuple[dict[str, Any], int, bool]:
    """`<parameter=k>v</parameter>` children -> (arguments, end, cut off inside a value)."""
    args: dict[str, Any] = {}
    while (m := _PARAM.match(s, pos)) is not None:
        stop = _PARAM_END.search(s, m.end())
        if stop is None:
            return args, len(s), True
        closed = stop.group().lower() == "</parameter>"
        raw = s[m.end() : stop.start()] if closed else s[m.end() : stop.start()].rstrip()
        raw = raw.removeprefix("\n").removesuffix("\n")
        value, why = _decode(raw.strip()) if raw.strip()[:1] in ("{", "[") else (raw, None)
        args[(m.group("k") or m.group("a")).strip()] = raw if why else value
        pos = stop.end() if closed else m.end() + len(s[m.end() : stop.start()].rstrip())
    return args, pos, False


class _Parser:
    """One pass over a reply: prose goes to `parts` (`HOLE` where a block was removed), blocks to calls/errors."""

    def __init__(self, text: str, names: frozenset[str] | None, thought: bool = False) -> None:
        self.s, self.names, self.in_thought = text, names, thought
        self.calls: list[ToolCall] = []
        self.errors: list[str] = []
        self.parts: list[str] = []
        self.thoughts: list[str] = []
        self.rehearsed: list[ToolCall] = []
        self.markers: Markers | None = None
        self.echoed = False
        self.dropped: list[tuple[str, str]] = []
        self.braces = bool(names) or _STRONG_CLOSER.search(text) is not None  # bare JSON can matter at all
        self.budget = 10 * len(text) + 100_000  # characters bare-brace scans may read: keeps odd text linear

    def run(self, strong: bool = False) -> _Parser:
        s, pos = self.s, self._block(0, 0, True) if strong else 0
        look = pos
        while (first := _FIRST.search(s, look)) is not None:  # a plain character search first: much faster
            if (m := _MARKER.match(s, first.start())) is None:
                look = first.start() + 1
                continue
            self.parts.append(s[pos : m.start()])
            kept = len(self.parts)
            pos = getattr(self, f"_on_{m.lastgroup}")(m)
            if len(self.parts) == kept:
                self.parts.append(HOLE)
            look = pos
        self.parts.append(s[pos:])
        return self

    def _add(self, call: ToolCall | str) -> None:
        if isinstance(call, ToolCall):
            self.calls.append(call)
        else:
            self.errors.append(call)

    def _end(self, pos: int) -> int:
        """Consume the closing tag after a call (or a partial one the reply was cut inside)."""
        p = _skip(self.s, pos)
        m = _CLOSER.match(self.s, p)
        return m.end() if m else len(self.s) if _PARTIAL_END.match(self.s, p) else p

    def _resync(self, p: int) -> int:
        """After an unreadable block: resume after its closing tag, at the next opening tag, or at the end."""
        o = _OPENER.search(self.s, p)
        c = _CLOSER.search(self.s, p, len(self.s) if o is None else o.start())
        return c.end() if c is not None else len(self.s) if o is None else o.start()

    def _block(self, start: int, body: int, strong: bool) -> int:
        s = self.s
        p = _skip(s, body)
        if strong and s[p : p + 9].lower() == "<function":
            return p  # `<tool_call><function=...>`: the main loop reads it next
        if strong and (named := _NAME_JSON.match(s, p)) is not None:
            return self._named(named.group(1), named.end())
        results: list[ToolCall | str] = []
        pos, resync = p, False
        while pos < len(s) and s[pos] in "{[" and not resync:
            value, why, end, resync = _value(s, pos)
            if end <= pos:  # not even one character of a value: leave it to the main loop
                break
            items = [] if why else _expand(value)
            if not strong and (why or not items or not all(_is_call(x, None) for x in items)):
                self.parts.append(s[start:body])
                return body
            results += [_error(why)] if why else [_call(x) for x in items] or [_error("it held no call")]
            pos = _skip(s, end)
        if not results:
            mentioned = _OPENER.search(s, p) is None and _CLOSER.search(s, p) is None and s[p:].strip()
            if not strong or mentioned:  # a tag named in prose, not a call
                self.parts.append(s[start:body])
                return body
            results.append(_error("no JSON object followed the opening tag"))
            resync = True
        self.calls += [r for r in results if isinstance(r, ToolCall)]
        self.errors += [r for r in results if isinstance(r, str)][:1]  # one error per unreadable block
        return self._resync(p) if resync else self._end(pos)

    def _named(self, name: str, pos: int) -> int:
        """Arguments after a name given outside the JSON: a JSON object or `<parameter=...>` children."""
        s = self.s
        p = _skip(s, pos)
        if s[p : p + 1] in ("{", "["):
            value, why, end, resync = _value(s, p)
            if why is not None:
                self.errors.append(_error(why))
                return self._resync(p) if resync else self._end(end)
            whole = _is_call(value, None) and (name.lower() in _HINT_WORDS or _fields(value)[1] == name)
            self._add(_call(value if whole else {"name": name, "arguments": value}))  # `json {call}`: a hint word
            return self._end(end)
        args, end, cut = _params(s, pos)
        if cut or (not args and p >= len(s)):
            self.errors.append(_error("it was cut off before its arguments ended"))
            return len(s)
        if not args and _CLOSER.match(s, p) is None:  # neither JSON nor <parameter=...> children
            self.errors.append(_error(f"the arguments of {name!r} were not a JSON object"))
            return self._resync(p)
        self._add(_call({"name": name, "arguments": args}))
        return self._end(end)

    def _on_open(self, m: re.Match[str]) -> int:
        return self._block(m.start(), m.end(), m.group("tag").lower() not in ("tools", "json"))

    def _on_close(self, m: re.Match[str]) -> int:
        self.dropped.append((STRAY_TAG, m.group()))  # an orphan closing tag (or `</think>`): drop it
        return m.end()

    def _on_fn(self, m: re.Match[str]) -> int:
        if m.group("fncut") is not None:
            self.errors.append(_error("it was cut off inside the <function=...> tag"))
            return len(self.s)
        name = m.group("eq") if m.group("eq") is not None else m.group("attr")
        if name is None:  # `<function>NAME</function>{args}` or `<function>{call}</function>`
            if (tag := _FN_NAME.match(self.s, m.end())) is None:
                return self._block(m.start(), m.end(), True)
            return self._named(tag.group(1), tag.end())
        return self._named(name.strip("\"' "), m.end())

    def _on_mistral(self, m: re.Match[str]) -> int:
        p = _skip(self.s, m.end())
        if (named := _MISTRAL_ARGS.match(self.s, p)) is not None:
            return self._named(named.group(1), named.end())
        return self._block(m.start(), p, True)

    def _on_fence(self, m: re.Match[str]) -> int:
        close = self.s.find("```", m.end())
        inner, end = (self.s[m.end() :], len(self.s)) if close < 0 else (self.s[m.end() : close], close + 3)
        if not inner.strip():  # an empty fence (```tool_code``` named in prose) holds no call
            self.parts.append(self.s[m.start() : end])
            return end
        sub = _Parser(inner, self.names, self.in_thought).run(strong=m.group("lang").lower() in _FENCE_CALL_LANGS)
        if not sub.calls and not sub.errors:  # an ordinary code block: keep it as it is
            self.parts.append(self.s[m.start() : end])
            return end
        self.calls += sub.calls
        self.errors += sub.errors
        self.echoed = self.echoed or sub.echoed
        self.dropped += sub.dropped
        self.parts += [HOLE, *sub.parts, HOLE]
        return end

    def _on_think(self, m: re.Match[str]) -> int:
        if self.in_thought:  # a thought inside a thought is part of it
            return m.end()
        stop, end = thought_end(self.s, m.group(), m.end())
        self._thought(self.s[m.end() : stop], m.group())
        return end

    def _thought(self, text: str, marker: str) -> None:
        """A thought: its text is reasoning, its calls rehearsals (read, never run)."""
        self.markers = self.markers or pair_of(marker)
        sub = _Parser(text, self.names, thought=True).run()
        self.thoughts += [text.strip()] if text.strip() else []
        self.rehearsed += sub.calls

    def _on_response(self, m: re.Match[str]) -> int:
        self.echoed = True
        self.dropped.append((MADE_UP, self.s[m.start() :]))
        return len(self.s)  # the model made up a tool's answer or a new turn: it and all after it are dropped

    def _on_brace(self, m: re.Match[str]) -> int:
        s, i = self.s, m.start()
        if not self.braces:
            self.parts.append(m.group())
            return m.end()
        scanned = end, _, state = _scan(s, i)
        self.budget -= end - i
        self.braces = self.budget > 0
        resync = state in ("string", "mismatch")
        closer = _STRONG_CLOSER.search(s, i) if resync else _STRONG_CLOSER.match(s, _skip(s, end))
        if closer is not None and (
            not resync or ("name" in s[i : closer.start()] and _OPENER.search(s, i, closer.start()) is None)
        ):
            return self._block(i, i, True)  # `{...}</tool_call>`: the opening tag is missing
        if resync or not self.names or _CALLISH.search(s, i, end) is None:  # cheap: most braces are not calls
            self.parts.append(m.group() if resync else s[i:end])
            return m.end() if resync else end
        value, why, end, _ = _value(s, i, scanned)
        items = [] if why else _expand(value)
        if items and all(_is_call(x, self.names) for x in items):
            for item in items:
                self._add(_call(item))
        else:
            self.parts.append(s[i:end])
        return end


def parse_tool_calls(text: str, tool_names: Iterable[str] | None = None, dialect: str | None = None) -> ParseResult:
    """Extract the tool calls in one model reply; see the module docstring for what is understood.

    `dialect` (a dialect name) also reads that family's own variants (see `variants.py`); with
    None every family's variants are read."""
    names = None if tool_names is None else frozenset(tool_names)
    text = normalize_variants(text, dialect)
    parser = _Parser(text[(begin := prompt_opened(text)) :], names)
    if head := re.fullmatch(f"(.*)({CLOSE_PATTERN})", text[:begin], flags=re.I | re.S):
        parser._thought(head.group(1), head.group(2))  # the prompt opened the thought: all before its close
    parser.run()
    tail = _CUT_TAIL.search(parser.parts[-1])
    if tail is not None and any(t.startswith(tail.group(1).lower()) for t in ("tool_call", "function")):
        parser.dropped.append((CUT_OFF, parser.parts[-1][tail.start() :]))
        parser.parts[-1] = parser.parts[-1][: tail.start()]
        parser.errors.append(_error("the reply was cut off inside the opening tag"))
    calls, errors = parser.calls, parser.errors
    if len(calls) > MAX_CALLS:  # one reply cannot fan out into thousands of tool runs and log events
        errors = [*errors, _too_many(len(calls))]
        parser.dropped.append((OVER_LIMIT, ", ".join(c.name for c in calls[MAX_CALLS:])))
        calls = calls[:MAX_CALLS]
    if len(errors) > MAX_ERRORS:
        errors = [*errors[: MAX_ERRORS - 1], f"... and {len(errors) - MAX_ERRORS + 1} more unreadable tool calls."]
    reasoning, rehearsed = "\n\n".join(parser.thoughts), parser.rehearsed[:MAX_CALLS]
    dropped = [*parser.dropped, *((LEFTOVER, m) for m in leftovers(parser.parts))]
    kept = kept_text(parser.parts)
    return ParseResult(calls, kept, errors, reasoning, rehearsed, parser.markers, parser.echoed, dropped)


def _too_many(n: int) -> str:
    return f"Your reply held {n} tool calls; only the first {MAX_CALLS} are run. Send at most {MAX_CALLS} per reply."
