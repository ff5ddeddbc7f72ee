"""Tool-call formats: which call syntax a model was trained to write, and which chat formats agree with it.

A registry entry's `tool_call_format` names the syntax the model writes its calls in: `hermes`
(`<tool_call>{...}</tool_call>`), `qwen` (the same tags, plus Qwen3-Coder's `<function=...>`),
`qwen3-coder` (written as `<function=...>`), `gemma` (Gemma 4's `<|tool_call>call:NAME{...}`), `tool_code`
(Gemma 3's ```` ```tool_code\nNAME(key=value)\n``` ````), `harmony` (gpt-oss
`to=functions.NAME`), `deepseek` (`<｜tool▁call▁begin｜>`), `minimax` (`<minimax:tool_call>`),
`mistral` (`[TOOL_CALLS][...]`), `llama3` (bare JSON with `parameters`), or `none` (the model was not
trained to call tools: it runs with tool_choice "none"). Each fixed dialect has its own call format;
only `chat_format = "gguf"` (the model's own template renders the prompt) takes the call format from
here, because the template does not tell our parser and grammar what to expect. Left unset it is the
chat format's own (and `hermes` for `gguf`). Pure data and checks: no imports of the dialects, so the
registry (`models/registry.py`) can validate a pair without loading anything.
"""

from __future__ import annotations

from typing import Literal

ToolCallFormat = Literal[
    "hermes", "qwen", "mistral", "llama3", "qwen3-coder", "gemma", "tool_code", "harmony", "deepseek", "minimax",
    "none",
]  # fmt: skip
CALL_FORMATS: tuple[str, ...] = (
    "hermes", "qwen", "mistral", "llama3", "qwen3-coder", "gemma", "tool_code", "harmony", "deepseek", "minimax",
    "none",
)  # fmt: skip

# chat format (dialect name or alias) -> the call format it writes; gguf: whatever tool_call_format says
OWN_CALL_FORMAT: dict[str, str] = {
    "chatml": "hermes",
    "hermes": "hermes",
    "qwen": "qwen",
    "mistral": "mistral",
    "mistral-v3": "mistral",
    "llama3": "llama3",
    "qwen3-coder": "qwen3-coder",
    "gemma4": "gemma",
    "gemma3": "tool_code",
    "harmony": "harmony",
}


def check_pair(chat_format: str, tool_call_format: str | None) -> str | None:
    """None when the pair is coherent, else one line saying what is wrong and how to fix it."""
    own = OWN_CALL_FORMAT.get(chat_format)
    if tool_call_format in (None, "none") or own is None or tool_call_format == own:
        return None
    return (
        f"chat_format {chat_format!r} writes {own} tool calls, not {tool_call_format}; set tool_call_format = "
        f'"{own}" (or "none"), or chat_format = "gguf" (the model\'s own template) with {tool_call_format} calls'
    )


def call_format_for(chat_format: str, tool_call_format: str | None) -> str:
    """The call format in force: the explicit one, else the chat format's own, else hermes."""
    return tool_call_format or OWN_CALL_FORMAT.get(chat_format, "hermes")


_MARKERS = (
    ("tool▁calls▁begin", "deepseek"),
    ("<minimax:tool_call>", "minimax"),
    ("<function=", "qwen3-coder"),
    ("<|tool_call>", "gemma"),
    ("```tool_code", "tool_code"),
    ("to=functions.", "harmony"),
)


def detect_call_format(template: str) -> str:
    """The call syntax a GGUF chat template teaches, from its markers (hermes when none is recognised)."""
    if "[TOOL_CALLS]" in template:
        return "mistral"
    for marker, name in _MARKERS:
        if marker in template:
            return name
    if "<tool_call>" in template and "# Tools" in template:
        return "qwen"
    if "<tool_call>" in template:
        return "hermes"
    if "<|python_tag|>" in template or "ipython" in template:
        return "llama3"
    return "hermes"
