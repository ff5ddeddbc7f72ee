"""Dialects: how each model family frames turns, offers tools, writes calls and receives results.

`get_dialect(name)` returns one by name; `detect_dialect(header)` picks one from a GGUF's metadata
(its chat template's markers, architecture and tokenizer; a Gemma template without tool support of its
own gets `gemma3`); `select_dialect` applies the precedence `--dialect` > models.toml `chat_format` > GGUF
metadata > `hermes`. `missing_framing(dialect, llm)` lists the framing tokens the model's vocabulary lacks
and `require_framing` turns that into the one-line refusal `run`, `chat` (and later `serve`) give;
`require_same_dialect` refuses resuming a session in another dialect. Does not render prompts itself.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_local.dialects.base import Dialect, result_content
from hermes_local.dialects.gemma import Gemma4Dialect
from hermes_local.dialects.gemma3 import Gemma3Dialect
from hermes_local.dialects.gguf import GGUFDialect
from hermes_local.dialects.harmony import HarmonyDialect
from hermes_local.dialects.hermes import HermesDialect
from hermes_local.dialects.llama3 import Llama3Dialect
from hermes_local.dialects.mistral import MistralDialect, MistralV3Dialect
from hermes_local.dialects.qwen import QwenDialect
from hermes_local.dialects.qwen3coder import Qwen3CoderDialect
from hermes_local.errors import UserError
from hermes_local.llm import LLM

__all__ = [
    "DIALECT_NAMES",
    "Dialect",
    "detect_dialect",
    "detect_dialect_and_basis",
    "get_dialect",
    "missing_framing",
    "require_framing",
    "require_same_dialect",
    "result_content",
    "select_dialect",
]

_FIXED: dict[str, type[Dialect]] = {
    "hermes": HermesDialect,
    "qwen": QwenDialect,
    "mistral": MistralDialect,
    "mistral-v3": MistralV3Dialect,
    "llama3": Llama3Dialect,
    "qwen3-coder": Qwen3CoderDialect,
    "gemma4": Gemma4Dialect,
    "gemma3": Gemma3Dialect,
    "harmony": HarmonyDialect,
}
ALIASES = {
    "chatml": "hermes",
    "llama-3": "llama3",
    "tekken": "mistral",
    "qwen3coder": "qwen3-coder",
    "gemma": "gemma4",
    "gemma-4": "gemma4",
    "gemma-3": "gemma3",
    "gpt-oss": "harmony",
}
DIALECT_NAMES = (*_FIXED, "gguf")


def _gguf_dialect(header: Any | None, call_format: str | None = None) -> GGUFDialect:
    if header is None:
        return GGUFDialect(call_format=call_format)
    meta = header.metadata
    template = meta.get("tokenizer.chat_template.tool_use") or meta.get("tokenizer.chat_template") or ""
    tokens = meta.get("tokenizer.ggml.tokens")
    values = getattr(tokens, "values", None) or []

    def token_text(key: str) -> str:
        idx = meta.get(key)
        return values[idx] if isinstance(idx, int) and 0 <= idx < len(values) else ""

    eos, eot = token_text("tokenizer.ggml.eos_token_id"), token_text("tokenizer.ggml.eot_token_id")
    return GGUFDialect(str(template), eos_token=eos, stop=[s for s in (eot,) if s], call_format=call_format)


def get_dialect(name: str, header: Any | None = None, *, tool_call_format: str | None = None) -> Dialect:
    """The dialect called `name` (or an alias); `gguf` reads its template from `header`.

    `tool_call_format` (models.toml) picks the call syntax of `gguf`; "none" marks any dialect's model as
    unable to call tools. A fixed dialect with another call syntax is refused (one line).
    """
    key = ALIASES.get(name.lower(), name.lower())
    if key == "gguf":
        return _gguf_dialect(header, tool_call_format)
    if key not in _FIXED:
        names = ", ".join((*DIALECT_NAMES, "auto"))
        raise UserError(f"unknown dialect {name!r}; use --dialect with one of: {names}")
    dialect = _FIXED[key]()
    if tool_call_format == "none":
        dialect.call_format = "none"
    elif tool_call_format not in (None, dialect.call_format):
        raise UserError(
            f"the {key} dialect writes {dialect.call_format} tool calls but the model's tool_call_format is "
            f"{tool_call_format}; use --dialect gguf (the model's own template) or a dialect of that family"
        )
    return dialect


_TEMPLATE_MARKERS = (  # checked before the ChatML ones: Qwen3-Coder and DeepSeek/MiniMax templates hold them too
    ("<function=", "qwen3-coder"),
    ("<|tool_call>", "gemma4"),
    ("<|turn>", "gemma4"),
    ("<|channel|>", "harmony"),
    ("tool▁calls▁begin", "gguf"),  # DeepSeek: its own template, its call format
    ("<minimax:tool_call>", "gguf"),  # MiniMax M2
)
_VOCAB_PROBES = (
    ("<|im_start|>", "hermes"),
    ("<|start_header_id|>", "llama3"),
    ("[AVAILABLE_TOOLS]", "mistral"),
    ("<start_of_turn>", "gemma3"),
    ("<|turn>", "gemma4"),
    ("<|channel|>", "harmony"),
)
# llama.cpp's architecture names (src/llama-arch.cpp) whose family has one format whatever the template says
_ARCHITECTURES = {
    "gemma": "gemma3",
    "gemma2": "gemma3",
    "gemma3": "gemma3",
    "gemma3n": "gemma3",
    "gemma4": "gemma4",
    "gpt-oss": "harmony",
}


def detect_dialect(header: Any | None, llm: LLM | None = None) -> str:
    """A dialect name from GGUF metadata: template markers first, then tokenizer and architecture, then
    the special tokens of the vocabulary (when `llm` is given)."""
    return detect_dialect_and_basis(header, llm)[0]


def detect_dialect_and_basis(header: Any | None, llm: LLM | None = None) -> tuple[str, str]:
    """`detect_dialect`'s name and what it was read from, in words (`--dialect auto` says it): "the model's
    template", "its architecture (gemma3; the GGUF has no chat template)", "its vocabulary (<start_of_turn>)",
    or that nothing in the GGUF named a format and the default was taken."""
    if header is None:
        return "hermes", "the default (no GGUF header to read)"
    meta = header.metadata
    template = str(meta.get("tokenizer.chat_template.tool_use") or meta.get("tokenizer.chat_template") or "")
    pre = str(meta.get("tokenizer.ggml.pre") or "")
    arch = str(header.architecture or "")
    from_template = "the model's template"
    for marker, name in _TEMPLATE_MARKERS:
        if marker in template:
            return name, from_template
    if "<start_of_turn>" in template and not re.search(r"\btools\b", template):
        return "gemma3", from_template  # Gemma 2/3 turns with no tool support of their own: the ```tool_code recipe
    if "<|im_start|>" in template:
        return ("qwen" if "# Tools" in template else "hermes"), from_template
    if "<|start_header_id|>" in template:
        return "llama3", from_template
    if "[INST]" in template or "[AVAILABLE_TOOLS]" in template:
        return ("mistral" if pre == "tekken" else "mistral-v3"), from_template
    if template:
        return "gguf", from_template
    from_arch = f"its architecture ({arch}; the GGUF has no chat template)"
    if arch in _ARCHITECTURES:
        return _ARCHITECTURES[arch], from_arch
    if arch.startswith("qwen"):
        return "qwen", from_arch
    if pre == "llama-bpe" or arch == "llama" and pre.startswith("llama3"):
        return "llama3", f"its tokenizer ({pre}; the GGUF has no chat template)"
    for token, name in _VOCAB_PROBES:
        if llm is not None and llm.special_token_id(token) is not None:
            chosen = name if name != "mistral" or pre == "tekken" else "mistral-v3"
            return chosen, f"its vocabulary ({token}; the GGUF has no chat template)"
    return "hermes", "the default: the GGUF names no format it knows (no chat template, architecture or special tokens)"


def select_dialect(
    name: str | None,
    *,
    chat_format: str | None = None,
    header: Any | None = None,
    llm: LLM | None = None,
    tool_call_format: str | None = None,
) -> Dialect:
    """`--dialect` wins, then the registry's `chat_format`, then the GGUF's metadata and vocabulary;
    `--dialect auto` skips the registry: the GGUF's template alone picks.

    `tool_call_format` is the registry's: it applies to the registry's own chat format and to `gguf`, and
    "none" to any; an explicit `--dialect` of a fixed family uses that family's call syntax.
    """
    if name is not None and name.lower() == "auto":
        name = detect_dialect(header, llm)
        tool_call_format = tool_call_format if tool_call_format == "none" else None
    chosen = name or chat_format or detect_dialect(header, llm)
    key = ALIASES.get(chosen.lower(), chosen.lower())
    fmt = tool_call_format
    if name and key != "gguf" and fmt != "none":
        fmt = None  # --dialect llama3 on a registry model: that family's calls, as the user asked
    return get_dialect(chosen, header, tool_call_format=fmt)


def missing_framing(dialect: Dialect, llm: LLM) -> list[str]:
    """The dialect's framing tokens that are not single special tokens of `llm`'s vocabulary."""
    return [t for t in dialect.framing_tokens if llm.special_token_id(t) is None]


def require_framing(dialect: Dialect, llm: LLM) -> None:
    """Refuse (exit 2, one line) a model whose vocabulary cannot frame `dialect`."""
    missing = missing_framing(dialect, llm)
    if missing:
        raise UserError(
            f"{llm.description} has no {' '.join(missing)} special token(s), so the {dialect.name} format "
            f"would reach it as plain text; pick its format with --dialect NAME ({', '.join(DIALECT_NAMES)})"
        )


def require_same_dialect(recorded: str, recorded_calls: str, dialect: Dialect) -> None:
    """Refuse (one line) resuming a session logged in another dialect or call format: its logged turns
    hold that dialect's framing and calls, and replaying them in another would garble them. Logs written
    before the dialect was recorded (`recorded` empty) are not checked."""
    calls = recorded_calls or dialect.call_format
    if recorded and (recorded, calls) != (dialect.name, dialect.call_format):
        raise UserError(
            f"this session was run in the {recorded} dialect ({calls} calls), not {dialect.name} "
            f"({dialect.call_format} calls); resume it with --dialect {recorded} and the same --model"
        )
