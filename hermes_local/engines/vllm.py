"""The vLLM engine: vLLM's OpenAI-compatible server behind the `LLM` protocol.

The path for multi-GPU serving and many concurrent users: hermes-local keeps the agent (tools,
approval, memory, sessions) and sends token ids to `POST /v1/completions`. A grammar-constrained step
(`tool_choice=required`) sends our GBNF as `structured_outputs.grammar` (vLLM >= 0.12; older servers
called it `guided_grammar`); vLLM has no lazy GBNF trigger, so `auto` steps run unconstrained and rely
on hermes-local's parser and repair. Prefix caching is reported when the server is started with
`--enable-prompt-tokens-details` (`usage.prompt_tokens_details.cached_tokens`); otherwise every prompt
token counts as evaluated. Written from vLLM's documented API and tested against a loopback stand-in,
not a real vLLM (no GPU here).

vLLM's `/tokenize` always parses special-token spellings, so content is tokenized with every special
spelling split in two (it then cannot match a special token), and a result holding a known special id is
refused: the injection rule holds. Does not start servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_local.engines.common import RemoteLLM, RemoteTokenizer, Streamed, model_matches
from hermes_local.errors import EngineError
from hermes_local.llm import SPECIAL_CANDIDATE, CallOptions, Usage


class VLLMEngine(RemoteLLM):
    """A model served by vLLM at `base_url` (loopback or an allow-listed host)."""

    server_name = "vLLM"
    completion_path = "/v1/completions"

    def __init__(self, base_url: str, *, n_ctx: int | None = None, **options: Any) -> None:
        """`n_ctx`: the context size when the server's listing does not give `max_model_len` (default 4096);
        `options` as for every remote engine (`RemoteLLM`)."""
        self.assumed_n_ctx = n_ctx or 4096
        super().__init__(base_url, **options)

    def identify(self, base_url: str, expected_model: Sequence[str]) -> None:
        listing = self.http.get("/v1/models")
        models = [m for m in (listing.get("data") or []) if isinstance(m, dict)] if isinstance(listing, dict) else []
        if not models:
            raise EngineError(f"vLLM at {base_url} lists no models (GET /v1/models)")
        chosen = next((m for m in models if model_matches(expected_model, [str(m.get("id", ""))])), None)
        if chosen is None:
            served = ", ".join(str(m.get("id")) for m in models)
            raise EngineError(
                f"vLLM at {base_url} serves {served}, not {expected_model[0]}; start it with that model or drop --model"
            )
        self.model = str(chosen["id"])
        self.n_ctx = int(chosen.get("max_model_len") or self.assumed_n_ctx)
        self.description = f"vLLM {self.model} at {base_url}"
        self.tokenizer = RemoteTokenizer(self._tokenize, special_probe=self._special_probe)

    # -- tokenizer -------------------------------------------------------------------------
    def _server_tokenize(self, text: str, add_special: bool = False) -> list[int]:
        reply = self.http.post("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": add_special})
        return [int(t) for t in reply.get("tokens", [])]

    def _tokenize(self, text: str, special: bool) -> list[int]:
        if special:
            return self._server_tokenize(text)
        ids: list[int] = []
        pos = 0
        for m in SPECIAL_CANDIDATE.finditer(text):
            if self.tokenizer.special_token_id(m.group(0)) is None:
                continue
            ids += self._server_tokenize(text[pos : m.start()]) if m.start() > pos else []
            half = len(m.group(0)) // 2
            ids += self._server_tokenize(m.group(0)[:half]) + self._server_tokenize(m.group(0)[half:])
            pos = m.end()
        if pos < len(text):
            ids += self._server_tokenize(text[pos:])
        bad = self.tokenizer.known_special_ids() & set(ids)
        if bad:
            raise EngineError(f"vLLM tokenized plain text into special token(s) {sorted(bad)}; refusing the prompt")
        return ids

    def _special_probe(self, text: str) -> int | None:
        """One id for `text` whole, and other ids when it is split in two: a special token."""
        whole = self._server_tokenize(text)
        half = len(text) // 2
        split = self._server_tokenize(text[:half]) + self._server_tokenize(text[half:]) if half else whole
        return whole[0] if len(whole) == 1 and split != whole else None

    def bos_tokens(self) -> list[int]:
        if self._bos is None:
            self._bos = self._server_tokenize("", add_special=True)[:1]
        return list(self._bos)

    # -- completion ------------------------------------------------------------------------
    def request_body(self, prompt: list[int], options: CallOptions) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": options.max_tokens,
            "temperature": max(options.temperature, 0.0),
            "top_k": 40,
            "top_p": 0.95,
            "min_p": 0.05,
            "repetition_penalty": 1.1,
            "seed": self.seed,
            "stop": list(options.stop),
            "skip_special_tokens": False,
            "return_token_ids": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if options.grammar and not options.grammar_trigger:  # no lazy grammar: `auto` steps run free
            body["structured_outputs"] = {"grammar": options.grammar}
        return body

    @staticmethod
    def read_event(event: dict[str, Any], out: Streamed) -> bool:
        """One `/v1/completions` stream event: choices with text and token ids; usage comes in a last event."""
        for choice in event.get("choices") or []:
            out.add(str(choice.get("text") or ""), choice.get("token_ids") or [])
            out.finish = choice.get("finish_reason") or out.finish
        if event.get("usage"):
            out.final = event
        return False

    def usage(self, prompt: list[int], out: Streamed) -> tuple[list[int], Usage]:
        """From the last event's `usage`; a server that sent no token ids has its text tokenized here."""
        usage_json = (out.final or {}).get("usage") or {}
        generated = out.tokens
        if not generated and out.text:
            generated = self.tokenize(out.text, special=True)
        details = usage_json.get("prompt_tokens_details") or {}
        cached = int(details.get("cached_tokens") or 0)
        usage = Usage(
            prompt_tokens=len(prompt),
            prompt_tokens_evaluated=len(prompt) - min(cached, len(prompt)),
            completion_tokens=int(usage_json.get("completion_tokens") or len(generated)),
            seconds=out.seconds,
            prompt_seconds=out.to_first_piece,
        )
        return generated, usage
