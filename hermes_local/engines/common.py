"""What the HTTP engines share above the transport: token caches, the special-token test, the model check, and
the one completion path.

`RemoteTokenizer` keeps the `LLM` protocol's tokenizer contract for a remote engine: `tokenize(text,
special=False)` never yields a special id (the injection rule), `special_token_id` answers from two
tokenizations, and results are cached (the agent re-tokenizes the same system prompt every step).
`model_matches` decides whether a server serves the model the user asked for. `RemoteLLM` is the one constructor
of both engines (the transport, the seed, then the engine's `identify()` of what its server serves) and the `LLM`
protocol's completion for both (prompt checks, the budget the context leaves, the streaming
request loop with pieces to `on_token`, token ids, timing, the error for a stream that ends early (tried
again, as a dropped connection is, while nothing has been shown), the evaluated-token count); each
engine gives its request body, its stream event reader and how its server reports usage. Does not do
HTTP itself (it iterates what `EngineHTTP.stream` yields).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from hermes_local.engines.http import EngineHTTP, with_retries
from hermes_local.errors import EngineError
from hermes_local.llm import DEFAULT_OPTIONS, CallOptions, Completion, TokenCallback, Usage, check_prompt

TokenizeFn = Callable[[str, bool], list[int]]


class RemoteTokenizer:
    """Cached tokenization through an engine's own tokenizer endpoint."""

    def __init__(
        self, tokenize: TokenizeFn, *, size: int = 512, special_probe: Callable[[str], int | None] | None = None
    ) -> None:
        self._tokenize = tokenize
        self._probe = special_probe
        self._size = size
        self._cache: OrderedDict[tuple[str, bool], list[int]] = OrderedDict()
        self._special: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        if not text:
            return []
        key = (text, special)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return list(self._cache[key])
        ids = self._tokenize(text, special)
        with self._lock:
            self._cache[key] = list(ids)
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return list(ids)

    def special_token_id(self, text: str) -> int | None:
        if text not in self._special and self._probe is not None:
            self._special[text] = self._probe(text)
        if text not in self._special:
            ids = self.tokenize(text, special=True)
            plain = self.tokenize(text, special=False)
            self._special[text] = ids[0] if len(ids) == 1 and plain != ids else None
        return self._special[text]

    def known_special_ids(self) -> set[int]:
        return {i for i in self._special.values() if i is not None}


def model_matches(expected: Iterable[str], served: Iterable[str]) -> bool:
    """True when nothing is expected, or one `expected` name names a served model (path, file or alias)."""
    want: set[str] = set()
    for name in expected:
        want |= {name, PurePath(name).name, PurePath(name).stem}
    if not want:
        return True
    for name in served:
        if not name:
            continue
        if name in want or PurePath(name).name in want or PurePath(name).stem in want:
            return True
    return False


# -- the completion path ---------------------------------------------------------------------------
@dataclass
class Streamed:
    """What one streamed completion produced so far: text, token ids, timing and how it ended."""

    on_token: TokenCallback | None = None
    text: str = ""
    tokens: list[int] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)
    first: float | None = None  # when the first piece of text arrived
    finish: str | None = None  # set by the engine's `read_event` when the server says the completion ended
    final: dict[str, Any] | None = None  # the event that carried the end (timings, usage)

    def add(self, piece: str, ids: Iterable[Any] = ()) -> None:
        """One streamed piece: its token ids are kept, its text passed on to `on_token`."""
        self.tokens.extend(int(t) for t in ids)
        if piece:
            self.first = self.first or time.perf_counter()
            self.text += piece
            if self.on_token:
                self.on_token(piece)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start

    @property
    def to_first_piece(self) -> float:
        """Seconds until the first piece (the prompt's evaluation, roughly), or until now."""
        return (self.first or time.perf_counter()) - self.start


class RemoteLLM(ABC):
    """The `LLM` protocol over an HTTP engine's streaming completion endpoint, `completion_path`.

    Constructed the same way for every engine: the transport to `base_url` (loopback or an allow-listed host),
    the seed, then `identify()` asks the server what it serves."""

    http: EngineHTTP
    tokenizer: RemoteTokenizer
    n_ctx: int
    description: str
    server_name: str  # in messages and the transport's errors: "llama-server", "vLLM"
    completion_path: str
    tokens_evaluated_total: int = 0  # prompt and completion tokens the server evaluated for this process

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        expected_model: Sequence[str] = (),
        seed: int = 0,
    ) -> None:
        self.http = EngineHTTP(base_url, token=token, timeout=timeout, name=self.server_name)
        self.seed = seed
        self._bos: list[int] | None = None
        self.identify(base_url, expected_model)

    @abstractmethod
    def identify(self, base_url: str, expected_model: Sequence[str]) -> None:
        """Ask the server what it serves: an EngineError (one line) for another model than `expected_model` (any
        model when empty) or a server that is not this engine; else set `n_ctx`, `description` and `tokenizer`."""

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        return self.tokenizer.tokenize(text, special=special)

    def special_token_id(self, text: str) -> int | None:
        return self.tokenizer.special_token_id(text)

    @abstractmethod
    def request_body(self, prompt: list[int], options: CallOptions) -> dict[str, Any]:
        """The streaming request for `prompt` (options.max_tokens already fits the context)."""

    @staticmethod
    @abstractmethod
    def read_event(event: dict[str, Any], out: Streamed) -> bool:
        """Add one stream event's pieces to `out`, set `out.finish`/`out.final`; True to stop reading."""

    @abstractmethod
    def usage(self, prompt: list[int], out: Streamed) -> tuple[list[int], Usage]:
        """The completion's token ids and its usage, as the server reported them in `out`."""

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        prompt = check_prompt(tokens, self.n_ctx)
        body = self.request_body(prompt, options.replace(max_tokens=min(options.max_tokens, self.n_ctx - len(prompt))))
        outs: list[Streamed] = []

        def attempt() -> Streamed:
            out = Streamed(on_token)
            outs.append(out)
            try:
                for event in self.http.stream(self.completion_path, body):
                    if self.read_event(event, out):
                        break
            except EngineError as exc:
                exc.retriable = exc.retriable and not out.text  # pieces already shown are not shown twice
                raise
            if out.finish is None:
                raise EngineError(
                    f"{self.http.name} at {self.http.base_url} closed the stream before the completion finished; "
                    "check the server, then resume the run",
                    retriable=not out.text,
                )
            return out

        out = with_retries(attempt, self.http.backoff)
        generated, usage = self.usage(prompt, out)
        self.tokens_evaluated_total += usage.prompt_tokens_evaluated + len(generated)
        finish = "length" if out.finish == "length" else "stop"
        return Completion(text=out.text, tokens=generated, usage=usage, finish_reason=finish)
