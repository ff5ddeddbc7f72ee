"""Tool-call syntax: parse and repair what a model wrote, the call formats, and the grammar that constrains it.

`parse.py` finds `<tool_call>` / `[TOOL_CALLS]` blocks and repairs them (`json_repair.py`: brace balancing
and friends; `variants.py`: other spellings models use), `formats.py` names each family's call format,
`grammar.py` builds the GBNF grammar for the offered tools. Executes nothing and knows no dialect class.
"""

from hermes_local.calls.parse import ParseResult, ToolCall, parse_tool_calls

__all__ = ["ParseResult", "ToolCall", "parse_tool_calls"]
