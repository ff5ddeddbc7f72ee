"""The `qwen` dialect: Qwen 2.5 / Qwen 3 ChatML, tools in a `# Tools` section, results in user turns.

The system turn is ours (hermes-local's rules) followed by the official `# Tools` section with one
JSON schema per line; calls are `<tool_call>{"name", "arguments"}</tool_call>` as in `hermes`; tool
results go back inside a *user* turn as `<tool_response>` blocks, as the official template does. The
parser entry also reads Qwen3-Coder's `<function=N><parameter=K>V</parameter></function>` calls. Qwen3
thinks in `<think>...</think>`; its template keeps the thoughts of the turns since the last user query
(one agent run) and drops older ones. Here a kept thought is never dropped later (dropping it when a chat
message arrives would rewrite the KV prefix), so thoughts stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_local.dialects.base import ChatMLDialect, dumps

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


class QwenDialect(ChatMLDialect):
    """Qwen's ChatML tool format."""

    name = "qwen"
    template = "qwen.jinja"
    call_format = "qwen"
    roles = {"tool": "user"}
    default_system = DEFAULT_SYSTEM
    description = "Qwen 2.5 / 3: ChatML, '# Tools' in the system turn, results inside user turns"

    def offer(self, tools: Sequence[dict[str, Any]]) -> Any:
        return "\n".join(dumps(t) for t in tools)
