"""Long-term memory: facts and run episodes kept across sessions, recalled by words and by meaning.

`store.py` keeps them (SQLite: items, an FTS5 index, float32 vectors) and recalls them (`LongTermMemory.hits`);
`rank.py` holds the ranking pieces (stop words, exact cosine, reciprocal-rank fusion). This face adds the
`remember` tool, through which the model writes a fact (in the `memory` toolset of `tools/builtin/memory.py`; its
other traits, on its `@tool`: it needs memory on, and the goal words that call for it). At the start of a run the
agent injects the recalled lines once, as a frozen block (never re-retrieved per step, so the prompt prefix stays
stable); at the end the front door (`runtime/assemble.py`) stores the run's episode. Every item belongs to an owner
and a workspace (`items.Scope`); a fact the model writes is trusted only when the person approved that very call and
the run had read nothing untrusted (recalled untrusted items count), never because `remember` was pre-approved.
Does not decide what is worth remembering in a fact (the model does, through the tool, with a fresh approval after
untrusted content) and loads no model.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_local.longterm.items import (
    LOCAL_OWNER,
    MAX_FACT_CHARS,
    UNTRUSTED_LABEL,
    Embedder,
    Hit,
    Item,
    Scope,
    untrusted_recall,
    workspace_identity,
)
from hermes_local.longterm.store import RECALL_CHARS, LongTermMemory
from hermes_local.tools.builtin.memory import MEMORY
from hermes_local.tools.registry import Tool, ToolContext, ToolFailure, tool
from hermes_local.tools.traits import Cue, Traits

if TYPE_CHECKING:
    from hermes_local.config import Settings

__all__ = [
    "LOCAL_OWNER",
    "LONGTERM_TOOLS",
    "MAX_FACT_CHARS",
    "RECALL_CHARS",
    "UNTRUSTED_LABEL",
    "Embedder",
    "Fact",
    "Hit",
    "Item",
    "LongTermMemory",
    "Scope",
    "open_memory",
    "remember",
    "untrusted_recall",
    "workspace_identity",
]

Fact = Item  # the name callers used when memory held only facts


GOAL_WORDS = re.compile(r"\bremember\b|记住")  # call for it


# Trusted result (it echoes the fact); a fresh approval after untrusted content, so a file or page cannot
# plant an instruction that every later run recalls.
@tool(
    permission="write",
    provenance="trusted",
    fresh_after_untrusted=True,
    # it changes no workspace file: nothing to scan around its calls
    traits=Traits(toolset=MEMORY, needs="memory", cues=(Cue(90, GOAL_WORDS.search),), checkpoints_itself=True),
)
def remember(fact: str, ctx: ToolContext) -> dict:
    """Remember a fact or preference about the user for future sessions.

    Args:
        fact: One short sentence worth remembering, e.g. "Reports go in reports/ as Markdown".
    """
    store = ctx.longterm or LongTermMemory()
    # the user's own yes to this very fact, with nothing untrusted read (or recalled) before it
    trust = "trusted" if ctx.approval == "user" and not ctx.after_untrusted else "untrusted"
    try:
        return {"remembered": fact, "id": store.add(fact, trust=trust), "trust": trust}
    except ValueError as exc:
        raise ToolFailure("invalid_arguments", f"{exc}; remember one short sentence instead.") from exc
    except sqlite3.Error as exc:
        raise ToolFailure("tool_error", f"the memory store failed: {exc}; tell the user.") from exc


LONGTERM_TOOLS: list[Tool] = [remember]


# z floors of a chat model's own embeddings (SmolLM2, on tests/data/memory_recall.json): meaning alone, and with a
# word of the goal shared (an embedding model sets its own in models.toml)
CHAT_MODEL_FLOOR, CHAT_MODEL_SHARED_WORD_FLOOR = 4.0, 1.0


def open_memory(
    settings: Settings,
    load_embedder: Callable[..., Embedder],
    path: Path | None = None,
    scope: Scope | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> LongTermMemory:
    """The store of a run for `scope` (its owner and workspace), with the embedding model
    `models.embeddings.embedding_choice` finds (none: words only), loaded by `load_embedder` (the wiring hands it
    the engines' loader: this district loads no model itself). A packaged embedding model not converted yet is
    converted at the first embed (one `on_notice` line)."""
    from hermes_local.models.embeddings import convert_on_first_use, embedding_choice

    found = embedding_choice(settings.embedding_model) if settings.memory else None
    if found is None:
        return LongTermMemory(path, scope=scope)
    entry = found.choice.entry if found.choice else None
    floor = entry.similarity_floor if entry and entry.similarity_floor is not None else CHAT_MODEL_FLOOR
    shared = entry.shared_word_floor if entry and entry.shared_word_floor is not None else CHAT_MODEL_SHARED_WORD_FLOOR
    prefixes = {"query_prefix": entry.query_prefix, "document_prefix": entry.document_prefix} if entry else {}
    embedder = load_embedder(found.path, floor=floor, shared_word_floor=shared, **prefixes)
    if found.pending:  # the packaged checkpoint: converted (once) when a vector is first needed
        embedder = convert_on_first_use(embedder, found, on_notice)
    return LongTermMemory(path, embedder=embedder, scope=scope)
