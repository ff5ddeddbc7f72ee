"""Long-term memory: facts and run episodes kept across sessions, recalled by words and by meaning.

`store.py` keeps them (SQLite: items, an FTS5 index, float32 vectors) and recalls them (`LongTermMemory.hits`);
`rank.py` holds the ranking pieces (stop words, exact cosine, reciprocal-rank fusion). This face adds the
`remember` tool, through which the model writes a fact. At the start of a run the agent injects the recalled
lines once, as a frozen block (never re-retrieved per step, so the prompt prefix stays stable); at the end
the wiring (`runtime.py`) stores the run's episode. Does not decide what is worth remembering in a fact
(the model does, through the tool, with a fresh approval after untrusted content) and loads no model.
"""

from __future__ import annotations

import sqlite3

from hermes_local.longterm.store import (
    MAX_FACT_CHARS,
    RECALL_CHARS,
    Embedder,
    Fact,
    Hit,
    Item,
    LongTermMemory,
)
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool

__all__ = [
    "LONGTERM_TOOLS",
    "MAX_FACT_CHARS",
    "RECALL_CHARS",
    "Embedder",
    "Fact",
    "Hit",
    "Item",
    "LongTermMemory",
    "remember",
]


# Trusted result (it echoes the fact); a fresh approval after untrusted content, so a file or page cannot
# plant an instruction that every later run recalls.
@tool(permission="write", provenance="trusted", fresh_after_untrusted=True)
def remember(fact: str, ctx: ToolContext) -> dict:
    """Remember a fact or preference about the user for future sessions.

    Args:
        fact: One short sentence worth remembering, e.g. "Reports go in reports/ as Markdown".
    """
    store = ctx.longterm or LongTermMemory()
    try:
        return {"remembered": fact, "id": store.add(fact)}
    except ValueError as exc:
        raise ToolFailure("invalid_arguments", f"{exc}; remember one short sentence instead.") from exc
    except sqlite3.Error as exc:
        raise ToolFailure("tool_error", f"the memory store failed: {exc}; tell the user.") from exc


LONGTERM_TOOLS: list[Tool] = [remember]
