"""The LLM boundary: the `LLM` protocol, `CallOptions`, `Completion`, `Usage`, and what every engine shares.

An `LLM` tokenizes text (special tokens on or off), completes from token ids with one `CallOptions`
value (token budget, temperature, stop strings, grammar and its trigger), and reports usage: prompt
tokens, prompt tokens actually evaluated (the rest came from the KV cache), completion tokens and
seconds. `DelegatingTokenizer` and `DelegatingLLM` are the bases of wrappers that hand the protocol to
an inner model and override only what they change. `SPECIAL_CANDIDATE` is the special-token rule: only
strings it matches, found in trusted framing, may become one special token. `check_prompt` is every
engine's first check and `common_prefix_length` what a KV cache can reuse. Knows nothing of tools,
dialects, prompts or llama_cpp; the engines live in `hermes_local.engines`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

TokenCallback = Callable[[str], None]
DEFAULT_STOP = ("<|im_end|>", "<|im_start|>", "<|endoftext|>")
# Strings in framing that may be one special token: ChatML/Llama-3 `<|...|>`, tags such as `<tool_call>`,
# `<start_of_turn>` or `</s>`, Mistral's `[INST]`/`[TOOL_CALLS]`, DeepSeek's full-width `<｜...｜>`.
SPECIAL_CANDIDATE = re.compile(
    r"<\|[^|<>\s]{1,40}\|>|</?[a-z][a-z_]{0,30}>|\[/?[A-Z][A-Z_]{1,30}\]|<｜[^｜<>]{1,40}｜>"
)


@dataclass(frozen=True)
class CallOptions:
    """How one model call samples and when it stops. A `grammar` alone constrains the whole output; with a
    `grammar_trigger` it applies only after the trigger text appears (a lazy grammar), and never inside a
    thought (`thoughts`: (opening, closing) marker pairs). A thought longer than `max_reasoning_tokens`
    (0: half of `max_tokens`) is ended by writing its closing marker for the model."""

    max_tokens: int = 512
    temperature: float = 0.2
    stop: Sequence[str] = DEFAULT_STOP
    grammar: str | None = None
    grammar_trigger: str | None = None
    thoughts: Sequence[tuple[str, str]] = ()
    max_reasoning_tokens: int = 0

    @property
    def reasoning_budget(self) -> int:
        """Tokens one thought may take before its closing marker is forced."""
        return self.max_reasoning_tokens or max(1, self.max_tokens // 2)

    def replace(self, **changes: Any) -> CallOptions:
        return dataclasses.replace(self, **changes)

    @property
    def constrained(self) -> bool:
        """The grammar applies from the first token."""
        return self.grammar is not None and self.grammar_trigger is None

    @property
    def lazy(self) -> bool:
        """The grammar waits for its trigger."""
        return bool(self.grammar and self.grammar_trigger)


DEFAULT_OPTIONS = CallOptions()


@dataclass
class Usage:
    """Token counts and timing of one or more model calls."""

    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    prompt_seconds: float = 0.0  # until the first token was sampled (prompt evaluation)


@dataclass
class Completion:
    """What one model call produced: text, token ids, usage and why it stopped."""

    text: str
    tokens: list[int] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"  # "stop" (eos or stop string) or "length"
    truncated: str | None = None  # closing mode ended the call early: "budget" | "loop" | "max_length"


@runtime_checkable
class LLM(Protocol):
    """What the agent needs from a model. Every engine and `testing.ScriptedLLM` implement it."""

    n_ctx: int
    description: str

    def tokenize(self, text: str, *, special: bool) -> list[int]: ...

    def special_token_id(self, text: str) -> int | None:
        """The id when `text` is exactly one special/control token of this vocabulary, else None."""
        ...

    def bos_tokens(self) -> list[int]: ...

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion: ...


class DelegatingTokenizer:
    """The tokenizer half of the `LLM` protocol (and `detokenize`), handed to `inner`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        return self.inner.tokenize(text, special=special)

    def special_token_id(self, text: str) -> int | None:
        return self.inner.special_token_id(text)

    def bos_tokens(self) -> list[int]:
        return self.inner.bos_tokens()

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.inner.detokenize(tokens)


class DelegatingLLM(DelegatingTokenizer):
    """An `LLM` that hands everything to the `inner` one; subclasses override only what they change."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.n_ctx: int = inner.n_ctx
        self.description: str = inner.description

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        return self.inner.complete(tokens, options, on_token=on_token)


def check_prompt(tokens: Sequence[int], n_ctx: int) -> list[int]:
    """The prompt as a list; ValueError when it is empty or leaves no room in `n_ctx` (every LLM's first check)."""
    prompt = list(tokens)
    if not prompt:
        raise ValueError("complete() needs at least one prompt token")
    if len(prompt) + 1 > n_ctx:
        raise ValueError(f"prompt of {len(prompt)} tokens does not fit n_ctx={n_ctx}")
    return prompt


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share (what a KV cache can reuse)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
