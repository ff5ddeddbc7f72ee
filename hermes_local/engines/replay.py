"""The replay model: `--model replay:FILE|DIR` replays recorded assistant replies instead of a model.

A replay file is JSON Lines, one `{"text": "..."}` object per model call (`write_replay` writes
it; `sessions export` produces it from a session). `ReplayLLM` implements the `LLM` protocol: it
hands out the outputs in order, raises `ReplayMismatch` (exit 1) when the run asks for more than
were recorded, and reports `remaining` so the CLI can say when outputs were left unused. Usage is
simulated with a word-level tokenizer (or a real one passed in) and a simulated KV cache, so the
prefix-reuse accounting of the agent is testable without a model. Lines are split on `\n` only, so
any string (U+2028, form feeds, ...) round-trips. Does not run tools or know about prompts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hermes_local.errors import ReplayExhausted, UserError
from hermes_local.llm import (
    DEFAULT_OPTIONS,
    CallOptions,
    Completion,
    DelegatingTokenizer,
    TokenCallback,
    Usage,
    common_prefix_length,
)

REPLAY_PREFIX = "replay:"

_FAKE_SPECIALS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def tool_call_text(name: str, **arguments: Any) -> str:
    """An assistant reply making one Hermes-format tool call (for scripts and replay files)."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def write_replay(path: str | Path, texts: Iterable[str]) -> Path:
    """Write assistant replies as a replay file (`{"text": ...}` per line), the format `from_jsonl` reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


class WordTokenizer:
    """A stand-in tokenizer with BPE-like counts: a word with its leading space is one token.

    ChatML specials get fixed ids when tokenized with special=True; other pieces get ids on first
    sight (stable within one instance), so `detokenize(tokenize(x)) == x`.
    """

    _PIECE = re.compile(r" ?[^\W_]+| ?[^\w\s]|\s+|_", re.UNICODE)

    def __init__(self) -> None:
        self._ids: dict[str, int] = {sp: i for i, sp in enumerate(_FAKE_SPECIALS)}
        self._pieces: list[str] = list(_FAKE_SPECIALS)

    def _id(self, piece: str) -> int:
        if piece not in self._ids:
            self._ids[piece] = len(self._pieces)
            self._pieces.append(piece)
        return self._ids[piece]

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        ids: list[int] = []
        parts = re.split("(" + "|".join(re.escape(s) for s in _FAKE_SPECIALS) + ")", text) if special else [text]
        for part in parts:
            if special and part in _FAKE_SPECIALS:
                ids.append(self._ids[part])
            else:
                # Pieces never span "<|...|>", so plain text never maps to a special id.
                ids.extend(self._id(p) for p in self._PIECE.findall(part))
        return ids

    def special_token_id(self, text: str) -> int | None:
        return self._ids[text] if text in _FAKE_SPECIALS else None

    def bos_tokens(self) -> list[int]:
        return []

    def detokenize(self, tokens: Sequence[int]) -> str:
        return "".join(self._pieces[t] for t in tokens)


class ReplayLLM(DelegatingTokenizer):
    """Replays `outputs` (full assistant replies) one per `complete()` call; tokenizes with `tokenizer`."""

    def __init__(
        self,
        outputs: Iterable[str],
        *,
        n_ctx: int = 32768,
        tokenizer: Any | None = None,
        description: str = "scripted",
    ) -> None:
        super().__init__(tokenizer or WordTokenizer())
        self.outputs = list(outputs)
        self.n_ctx = n_ctx
        self.description = description
        self.prompts: list[list[int]] = []
        self.prompt_texts: list[str] = []
        self.calls: list[CallOptions] = []  # the options of every call, in order
        self._cursor = 0
        self._cache: list[int] = []

    @classmethod
    def from_jsonl(cls, path: str | Path, **kwargs: Any) -> ReplayLLM:
        """Load `{"text": ...}` lines (one per assistant turn) from a replay file."""
        path = Path(path)
        if not path.is_file():
            raise UserError(f"replay file {path} does not exist; pass --model replay:PATH_TO.jsonl")
        outputs = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                outputs.append(str(obj["text"]))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise UserError(
                    f'{path}:{lineno}: each line must be a JSON object like {{"text": "..."}} ({exc})'
                ) from exc
        return cls(outputs, description=f"replay:{path.name}", **kwargs)

    @property
    def remaining(self) -> int:
        return len(self.outputs) - self._cursor

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        prompt = list(tokens)
        if len(prompt) + 1 > self.n_ctx:
            raise ValueError(f"prompt of {len(prompt)} tokens does not fit n_ctx={self.n_ctx}")
        if self._cursor >= len(self.outputs):
            raise ReplayExhausted(
                f"replay model: call {self._cursor + 1} but only {len(self.outputs)} output(s) were scripted"
            )
        text = self.outputs[self._cursor]
        self._cursor += 1
        prompt_text = self.detokenize(prompt)
        self.prompts.append(prompt)
        self.prompt_texts.append(prompt_text)
        self.calls.append(options)
        prefill = prompt_text.rsplit("<|im_start|>assistant\n", 1)[-1]
        if prefill and text.startswith(prefill):
            text = text[len(prefill) :]
        for s in options.stop:
            if s and s in text:
                text = text[: text.index(s)]
        completion = self.tokenize(text, special=False)[: options.max_tokens]
        evaluated = max(1, len(prompt) - common_prefix_length(prompt, self._cache)) if prompt else 0
        self._cache = prompt + completion
        if on_token:
            for word in text.split(" "):
                on_token(word + " ")
        return Completion(
            text=text,
            tokens=completion,
            usage=Usage(len(prompt), evaluated, len(completion), 0.0),
            finish_reason="stop",
        )


def is_replay_spec(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(REPLAY_PREFIX)


def load_replay(spec: str, *, n_ctx: int = 32768, case_id: str | None = None) -> ReplayLLM:
    """`replay:FILE` -> that recording; `replay:DIR` -> `DIR/<case_id>.jsonl` (one recording per eval case)."""
    target = Path(spec[len(REPLAY_PREFIX) :] if is_replay_spec(spec) else spec)
    if target.is_dir():
        if case_id is None:
            raise UserError(f"replay folder {target} needs a case; pass --model replay:FILE.jsonl for a single run")
        target = target / f"{case_id}.jsonl"
        if not target.is_file():
            raise UserError(f"no replay file {target} for case {case_id!r}")
    return ReplayLLM.from_jsonl(target, n_ctx=n_ctx)
