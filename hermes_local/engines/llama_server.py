"""The llama-server engine: llama.cpp's HTTP server behind the `LLM` protocol.

Completes from token ids (`POST /completion` with a token-array prompt), so hermes-local's own rendering
and the injection rule stay in charge: `/tokenize` is called with `parse_special=false` for content and
special ids come only from framing (`special_token_id`). Sends our GBNF grammar (lazy, with the
`<tool_call>` trigger, when the model may also answer in prose), asks for `cache_prompt` and reports the
server's processed-token count as `prompt_tokens_evaluated`, and streams pieces to `on_token`.
Sampling runs in the server with the same chain as the in-process engine (repeat penalty, top-k,
top-p, min-p, temperature). In-process features (fast-forward, drafting, the persistent prefix cache)
do not apply here. Does not start servers (`engines/binaries.py` does, for tests and the benchmark).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from hermes_local.engines.common import RemoteLLM, RemoteTokenizer, Streamed, model_matches
from hermes_local.errors import EngineError
from hermes_local.llm import CallOptions, Usage

# llama.cpp's common_grammar_trigger_type: a trigger word (a single-token word becomes a token trigger)
TRIGGER_WORD = 1


def lazy_grammar(grammar: str, trigger: str) -> str:
    """Our grammar covers what follows the trigger; a lazy llama.cpp grammar starts at the trigger itself.

    The result also allows further calls after the first (whitespace, trigger, call), as the
    in-process engine does; after the last call only end-of-generation is allowed.
    """
    body = re.sub(r"^root ::=", "hermes-call ::=", grammar, count=1, flags=re.MULTILINE)
    literal = '"' + trigger.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"root ::= {literal} hermes-call ( [ \\n]* {literal} hermes-call )*\n{body}"


class LlamaServerLLM(RemoteLLM):
    """A model served by a llama-server at `base_url` (loopback or an allow-listed host)."""

    server_name = "llama-server"
    completion_path = "/completion"

    def identify(self, base_url: str, expected_model: Sequence[str]) -> None:
        props = self.http.get("/props")
        if not isinstance(props, dict):
            raise EngineError(f"{base_url} does not look like a llama-server (GET /props)")
        self.model_path = str(props.get("model_path") or "")
        alias = str(props.get("model_alias") or "")
        if not model_matches(expected_model, [self.model_path, alias]):
            raise EngineError(
                f"llama-server at {base_url} serves {PurePath(self.model_path).name or alias or 'an unknown model'}, "
                f"not {expected_model[0]}; start it with that model or drop --model"
            )
        settings = props.get("default_generation_settings") or {}
        self.n_ctx = int(settings.get("n_ctx") or props.get("n_ctx") or 0)
        if self.n_ctx <= 0:
            raise EngineError(f"llama-server at {base_url} did not report its context size (GET /props)")
        self.description = f"llama-server {PurePath(self.model_path).name} at {base_url}"
        self.tokenizer = RemoteTokenizer(self._tokenize)

    # -- tokenizer -------------------------------------------------------------------------
    def _tokenize(self, text: str, special: bool, add_special: bool = False) -> list[int]:
        body = {"content": text, "add_special": add_special, "parse_special": special}
        reply = self.http.post("/tokenize", body)
        return [int(t["id"]) if isinstance(t, dict) else int(t) for t in reply.get("tokens", [])]

    def bos_tokens(self) -> list[int]:
        if self._bos is None:
            self._bos = self._tokenize("", False, add_special=True)[:1]
        return list(self._bos)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return str(self.http.post("/detokenize", {"tokens": list(tokens)}).get("content", ""))

    # -- completion ------------------------------------------------------------------------
    def request_body(self, prompt: list[int], options: CallOptions) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": prompt,
            "n_predict": options.max_tokens,
            "temperature": max(options.temperature, 0.0),
            "top_k": 40,
            "top_p": 0.95,
            "min_p": 0.05,
            "repeat_penalty": 1.1,
            "repeat_last_n": 64,
            "samplers": ["penalties", "top_k", "top_p", "min_p", "temperature"],
            "seed": self.seed,
            "stop": list(options.stop),
            "cache_prompt": True,
            "stream": True,
            "return_tokens": True,
        }
        grammar, trigger = options.grammar, options.grammar_trigger
        if grammar and trigger:
            body["grammar"] = lazy_grammar(grammar, trigger)
            body["grammar_lazy"] = True
            body["grammar_triggers"] = [{"type": TRIGGER_WORD, "value": trigger}]
            body["preserved_tokens"] = [trigger]
        elif grammar:
            body["grammar"] = grammar
        return body

    @staticmethod
    def read_event(event: dict[str, Any], out: Streamed) -> bool:
        """One `/completion` stream event: a piece with its tokens; `stop` ends the stream."""
        out.add(str(event.get("content") or ""), event.get("tokens") or [])
        if event.get("stop"):
            out.final = event
            out.finish = "length" if event.get("stop_type") == "limit" else "stop"
            return True
        return False

    def usage(self, prompt: list[int], out: Streamed) -> tuple[list[int], Usage]:
        """From the last event's `timings`: `cache_n` prompt tokens came from the slot's KV cache."""
        timings = (out.final or {}).get("timings") or {}
        cached = int(timings.get("cache_n") or 0)
        prompt_ms = timings.get("prompt_ms")
        usage = Usage(
            prompt_tokens=len(prompt),
            prompt_tokens_evaluated=int(timings.get("prompt_n", len(prompt) - min(cached, len(prompt)))),
            completion_tokens=int(timings.get("predicted_n", len(out.tokens))),
            seconds=out.seconds,
            prompt_seconds=float(prompt_ms) / 1000 if prompt_ms is not None else out.to_first_piece,
        )
        return out.tokens, usage
