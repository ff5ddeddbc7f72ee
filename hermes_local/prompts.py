"""Jinja templates from `prompts/` rendered into trusted/untrusted segments, then token ids.

Template text is trusted framing; every `{{ expression }}` is untrusted content unless it is
already a `Segments` value rendered by another template. A `NAME.jinja` in
`$HERMES_LOCAL_HOME/prompts/` overrides the shipped template of that name (`check_overrides`
validates them at start and takes the snapshot every later render uses: a file written there during a run
changes nothing until the next run). Every template, shipped or not, renders in `BoundedSandbox`: Jinja's
immutable sandbox (no `__globals__`, no mutation of passed values) with a time and output budget
(`TemplateBudget`), bounded `*`/`**`/`%` and filter arguments, and no `lipsum`; going over the budget,
a runaway recursion or a security violation is a `TemplateRefused` (one line). The GGUF chat templates
and workflow parameters use the same environment. Tokenization turns only the special-token
strings found in *framing* (`<|im_start|>`, `<|eot_id|>`, `[INST]`, `</s>`, and `<tool_call>`-style tags,
where the vocabulary has them as special tokens) into special ids; all other text, including content that
spells `<|im_end|>`, is tokenized as plain text. Plain runs between special tokens are tokenized
together, so the ids equal what llama.cpp gives a clean prompt. Does not parse model output.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from hermes_local.config import data_path, home_dir
from hermes_local.errors import UserError
from hermes_local.llm import LLM, SPECIAL_CANDIDATE
from hermes_local.textsafe import scrub_surrogates

_SENTINEL = re.compile("\ue000(\\d+)\ue001")
_HUGE_NUMBER = re.compile(r"\d{7,}")  # a width or precision of a million or more in a format string


@dataclass(frozen=True)
class Segment:
    """A piece of prompt text and whether it is trusted framing."""

    text: str
    trusted: bool


class Segments(tuple):
    """An immutable sequence of `Segment`; rendering one inside a template keeps its trust flags."""

    @property
    def text(self) -> str:
        return "".join(seg.text for seg in self)

    def __add__(self, other: Iterable[Segment]) -> Segments:  # type: ignore[override]
        return Segments(tuple(self) + tuple(other))

    @staticmethod
    def untrusted(text: str) -> Segments:
        return Segments((Segment(text, False),))


class _RenderState:
    def __init__(self) -> None:
        self.values: list[Segments] = []

    def finalize(self, value: Any) -> str:
        if isinstance(value, Segments):
            segs = value
        else:
            segs = Segments.untrusted("" if value is None else str(value))
        self.values.append(segs)
        return f"\ue000{len(self.values) - 1}\ue001"


class TemplateRefused(jinja2.TemplateError):
    """A template that broke the sandbox's rules or went over its time or output budget."""


@dataclass(frozen=True)
class TemplateBudget:
    """How long one render may take and how much text it may produce."""

    seconds: float = 2.0
    chars: int = 2_000_000


_render_clock = threading.local()  # the deadline of the render running on this thread


def _tick() -> None:
    deadline = getattr(_render_clock, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise TemplateRefused("the template ran past its time budget (an endless or very long loop?)")


def _check_argument(value: Any, limit: int) -> None:
    """A size passed to a filter or method (a width, a count, a text) must fit the budget."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > limit:
        raise TemplateRefused(f"the template asked for a size of {value} (more than {limit})")
    _check_result(value, limit)


def _check_result(value: Any, limit: int) -> Any:
    if isinstance(value, (str, list, tuple)) and len(value) > limit:
        raise TemplateRefused(f"the template built a value of {len(value)} items or characters (more than {limit})")
    return value


def _bounded_filter(func: Callable[..., Any], limit: int) -> Callable[..., Any]:
    @functools.wraps(func)  # keeps jinja's pass_context / pass_environment marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        for value in (*args[1:], *kwargs.values()):
            _check_argument(value, limit)
        return _check_result(func(*args, **kwargs), limit)

    return bounded


class BoundedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with a time and output budget; render with `render_bounded`."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, budget: TemplateBudget = TemplateBudget(), **options: Any) -> None:
        super().__init__(**options)
        self.budget = budget
        self.globals.pop("lipsum", None)
        self.filters = {name: _bounded_filter(f, budget.chars) for name, f in self.filters.items()}

    def add_filter(self, name: str, func: Callable[..., Any]) -> None:
        """Register a filter under the same budget as the built-in ones."""
        self.filters[name] = _bounded_filter(func, self.budget.chars)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _tick()
        limit = self.budget.chars
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and len(seq) * times > limit:
                    raise TemplateRefused(f"the template repeats a value {times} times (more than the budget)")
        elif operator == "**" and isinstance(left, (int, float)) and isinstance(right, (int, float)):
            if abs(left) > 1 and right * math.log2(abs(left)) > 4096:
                raise TemplateRefused(f"the template raises {left} to the power {right} (too large)")
        elif operator == "%" and isinstance(left, str) and _HUGE_NUMBER.search(left):
            raise TemplateRefused("the template formats with a width of a million or more")
        return _check_result(super().call_binop(context, operator, left, right), limit)

    def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _tick()
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str) and _HUGE_NUMBER.search(owner):
            raise TemplateRefused("the template formats with a width of a million or more")
        for value in (*args, *kwargs.values()):
            _check_argument(value, self.budget.chars)
        return _check_result(super().call(__context, __obj, *args, **kwargs), self.budget.chars)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        return super().getitem(obj, argument)


@contextmanager
def within_budget(budget: TemplateBudget) -> Iterator[None]:
    """Run a render (or an expression of a `BoundedSandbox`) under `budget`'s clock.

    A security violation, a runaway recursion or a failure inside the template comes out as
    `TemplateRefused` with one line.
    """
    outer = getattr(_render_clock, "deadline", None)
    _render_clock.deadline = time.monotonic() + budget.seconds
    try:
        yield
    except TemplateRefused:
        raise
    except jinja2.sandbox.SecurityError as exc:
        raise TemplateRefused(f"the template tried something the sandbox forbids: {exc}") from None
    except RecursionError:
        raise TemplateRefused("the template recurses without end (a macro calling itself?)") from None
    except (OverflowError, MemoryError, ValueError, TypeError, ArithmeticError, UnicodeError) as exc:
        line = " ".join(str(exc).split())[:200]
        raise TemplateRefused(f"the template failed: {type(exc).__name__}: {line}") from None
    finally:
        _render_clock.deadline = outer


def render_bounded(template: jinja2.Template, **context: Any) -> str:
    """Render `template` (of a `BoundedSandbox`) within its budget; `TemplateRefused` when it breaks it."""
    env = template.environment
    budget = env.budget if isinstance(env, BoundedSandbox) else TemplateBudget()
    size, parts = 0, []
    with within_budget(budget):
        for part in template.generate(**context):
            _tick()
            size += len(part)
            if size > budget.chars:
                raise TemplateRefused(f"the template produced more than {budget.chars} characters")
            parts.append(part)
    return "".join(parts)


@lru_cache(maxsize=4)
def _loader_root() -> str:
    return str(data_path("prompts"))


def overrides_dir() -> Path:
    """`$HERMES_LOCAL_HOME/prompts/`: a NAME.jinja there replaces the shipped template of that name."""
    return home_dir() / "prompts"


_override_snapshots: dict[Path, dict[str, str]] = {}  # home prompts folder -> {name: source} at run start


def _read_overrides(folder: Path) -> dict[str, str]:
    found = {}
    if folder.is_dir():
        for path in sorted(folder.glob("*.jinja")):
            try:
                found[path.name] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"prompt override {path} cannot be read ({exc}); fix or delete it") from exc
    _override_snapshots[folder] = found
    return found


def _overrides() -> dict[str, str]:
    folder = overrides_dir()
    snapshot = _override_snapshots.get(folder)
    return snapshot if snapshot is not None else _read_overrides(folder)


def _environment(state: _RenderState) -> BoundedSandbox:
    env = BoundedSandbox(
        loader=jinja2.ChoiceLoader([jinja2.DictLoader(_overrides()), jinja2.FileSystemLoader(_loader_root())]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        finalize=state.finalize,
    )
    env.add_filter("tojson", lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent))
    return env


def render(template_name: str, **context: Any) -> Segments:
    """Render `prompts/<template_name>` into segments (framing trusted, expressions untrusted)."""
    state = _RenderState()
    try:
        rendered = render_bounded(_environment(state).get_template(template_name), **context)
    except jinja2.TemplateError as exc:
        if template_name in _overrides():  # the user's file: one line naming it
            path = overrides_dir() / template_name
            raise UserError(f"prompt override {path}: {' '.join(str(exc).split())}; fix or delete it") from None
        if isinstance(exc, TemplateRefused):
            raise UserError(f"prompt {template_name}: {' '.join(str(exc).split())}") from None
        raise  # a shipped template that fails is a bug
    out: list[Segment] = []
    pos = 0
    for m in _SENTINEL.finditer(rendered):
        if m.start() > pos:
            out.append(Segment(rendered[pos : m.start()], True))
        out.extend(state.values[int(m.group(1))])
        pos = m.end()
    if pos < len(rendered):
        out.append(Segment(rendered[pos:], True))
    return Segments(seg for seg in out if seg.text)


def template_names() -> list[str]:
    return sorted(p.name for p in data_path("prompts").glob("*.jinja"))


def check_overrides() -> list[str]:
    """Names of the user's template overrides; a misnamed or unparsable one is a `UserError` (one line)."""
    folder = overrides_dir()
    sources = _read_overrides(folder)  # the snapshot this run renders from
    shipped = set(template_names())
    found = []
    for name, source in sources.items():
        path = folder / name
        if name not in shipped:
            raise UserError(
                f"prompt override {path} does not replace a shipped template ({', '.join(sorted(shipped))})"
            )
        try:
            _environment(_RenderState()).parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(f"prompt override {path} line {exc.lineno}: {exc.message}; fix or delete it") from exc
        found.append(name)
    return found


def to_tokens(segments: Sequence[Segment], llm: LLM, *, add_bos: bool = True) -> list[int]:
    """Token ids for `segments`: special ids only from framing, plain runs tokenized whole."""
    ids: list[int] = list(llm.bos_tokens()) if add_bos else []
    run: list[str] = []

    def flush() -> None:
        if run:
            ids.extend(llm.tokenize(scrub_surrogates("".join(run)), special=False))
            run.clear()

    for seg in segments:
        if not seg.trusted:
            run.append(seg.text)
            continue
        pos = 0
        for m in SPECIAL_CANDIDATE.finditer(seg.text):
            special = llm.special_token_id(m.group(0))
            if special is None:
                continue
            run.append(seg.text[pos : m.start()])
            flush()
            ids.append(special)
            pos = m.end()
        run.append(seg.text[pos:])
    flush()
    return ids


def chat_tokens(messages: Sequence[dict[str, Any]], llm: LLM, *, prefill: str = "") -> list[int]:
    """Token ids of a ChatML conversation ending in an open assistant turn (optionally pre-filled)."""
    segments = render("chatml.jinja", messages=list(messages), add_generation_prompt=True, prefill=prefill)
    return to_tokens(segments, llm)
