"""Jinja templates from `prompts/` rendered into trusted/untrusted segments, then token ids.

Template text is trusted framing; every `{{ expression }}` is untrusted content unless it is
already a `Segments` value rendered by another template. A `NAME.jinja` in
`$HERMES_LOCAL_HOME/prompts/` overrides the shipped template of that name (`check_overrides`
validates them at start). Tokenization turns only the special-token
strings found in *framing* (`<|im_start|>`, `<|eot_id|>`, `[INST]`, `</s>`, and `<tool_call>`-style tags,
where the vocabulary has them as special tokens) into special ids; all other text, including content that
spells `<|im_end|>`, is tokenized as plain text. Plain runs between special tokens are tokenized
together, so the ids equal what llama.cpp gives a clean prompt. Does not parse model output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from hermes_local.config import data_path, home_dir
from hermes_local.errors import UserError
from hermes_local.llm import LLM, SPECIAL_CANDIDATE
from hermes_local.textsafe import scrub_surrogates

_SENTINEL = re.compile("\ue000(\\d+)\ue001")



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


@lru_cache(maxsize=4)
def _loader_root() -> str:
    return str(data_path("prompts"))


def overrides_dir() -> Path:
    """`$HERMES_LOCAL_HOME/prompts/`: a NAME.jinja there replaces the shipped template of that name."""
    return home_dir() / "prompts"


def _environment(state: _RenderState) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(str(overrides_dir())), jinja2.FileSystemLoader(_loader_root())]
        ),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        finalize=state.finalize,
    )
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    return env


def render(template_name: str, **context: Any) -> Segments:
    """Render `prompts/<template_name>` into segments (framing trusted, expressions untrusted)."""
    state = _RenderState()
    rendered = _environment(state).get_template(template_name).render(**context)
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
    if not folder.is_dir():
        return []
    shipped = set(template_names())
    found = []
    for path in sorted(folder.glob("*.jinja")):
        if path.name not in shipped:
            raise UserError(
                f"prompt override {path} does not replace a shipped template ({', '.join(sorted(shipped))})"
            )
        try:
            _environment(_RenderState()).parse(path.read_text(encoding="utf-8"))
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(f"prompt override {path} line {exc.lineno}: {exc.message}; fix or delete it") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"prompt override {path} cannot be read ({exc}); fix or delete it") from exc
        found.append(path.name)
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
