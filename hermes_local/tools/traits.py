"""What a tool says about itself for the parts that reason about tools without running them: its `Traits`.

The answer guard (`agent/guards.py`) asks which tool a goal needs and how to tell the model to call it; a plan
(`agent/plan.py`) and the user's verdict on a run (`evals/verdict.py`) ask what a call does to a file before or
after it ran; routing and `tools list` (`toolsets.py`) ask which toolset a tool is in and what a run must give it;
the executor and the approval note ask whether it runs a command in the sandbox or checkpoints its own writes;
session export (`evals/export.py`) asks what a case needs among its fixtures. Each built-in answers on its own
`@tool(traits=Traits(...))`, so no list of tool names is kept anywhere else: a tool module's or an MCP server's
tool has the defaults. Does not run tools or decide anything itself: the readers do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# What a run must give a tool for it to work, else it is left out of the prompt and the grammar
# (`toolsets.unusable`; `memory`: long-term memory is on).
Need = Literal["database", "host", "person", "memory"]

# A file name as goals write it ("notes.txt", "reports/q3.md"): the files tools' cues and the guard's test for a
# goal about this user's own things share it.
FILE_IN_GOAL = r"[\w./-]*[\w-]\.(?:txt|md|csv|json|log|py|toml|yaml|yml|ini|cfg|html|xml|tsv|sqlite|db)\b"


@dataclass(frozen=True)
class Toolset:
    """A built-in toolset: its name (`--tools files`) and what it is for (a routed prompt's line)."""

    name: str
    about: str


@dataclass(frozen=True)
class Cue:
    """Goal words that call for a tool: `matches(goal)` on the lowercased goal.

    The answer guard tries every cue of the run's tools in `rank` order (lower first; ties in registry order) and
    names the first tool whose cue matches: sources of facts rank 10-70 (a database, a URL, a command, the clock,
    a folder, a file, rows), sinks 80-100 (the memo, long-term memory, a file written). A `last_resort` cue counts
    only when no cue and no tool's own words matched.
    """

    rank: int
    matches: Callable[[str], object]
    last_resort: bool = False


@dataclass(frozen=True)
class FileEffect:
    """What one call does to one workspace file, known from its arguments before it runs.

    `text` is the file's whole new content, or (`append`) what is added at its end; `argument` names the argument
    that carries it (a plan shows a long one by its size; a log that abbreviated it is compared by the call's
    digest with that argument replaced).
    """

    path: str  # as the call names it, relative to the workspace
    text: str
    append: bool = False
    argument: str = "content"


@dataclass(frozen=True)
class Traits:
    """A tool's declared traits; a tool module's or an MCP server's tool has none (the defaults)."""

    toolset: Toolset | None = None  # its built-in toolset (`--tools NAME`, routing, `tools list`)
    needs: Need | None = None  # left out of a run that lacks it, with what turns it on
    cues: tuple[Cue, ...] = ()  # the goal words that call for it (a tool with none is matched by its own words)
    call_hint: str = ""  # how a guard's note tells the model to call it (empty: "call NAME")
    # It steers the run rather than doing the goal's work (asks the person, ends the run, opens a toolset): the
    # answer guard never names it as the tool a goal needs.
    steers_run: bool = False
    # Calling it ends the run with its argument as the answer (`final_answer`): routing always keeps it and the
    # loop guard never refuses it.
    ends_run: bool = False
    file_effect: Callable[[dict[str, Any]], FileEffect] | None = None  # what a call does to a file (plans, verdicts)
    # The refusals a call would meet when it runs, checked without acting (raises the tool's own `ToolFailure`):
    # a plan-only run records a proposal only when this passes (`tools/effects/dryrun.py` for file targets).
    dry_run: Callable[[dict[str, Any], Any], None] | None = None
    reads_path: str | None = None  # the argument naming the workspace file whose text its result is (a fixture)
    lists_path: str | None = None  # the argument naming a workspace folder its result lists
    sandboxed: bool = False  # it runs a command in the command sandbox: its approval shows the sandbox note
    # Its workspace changes are checkpointed by the tool itself (through `effects/confined.py`, or its own scans),
    # or it changes no workspace file: its write or dangerous calls are not bracketed by two workspace scans.
    checkpoints_itself: bool = False
    # Each result says its own provenance (`open_skill`: a user's skill is trusted, a project's is not); the
    # executor keeps it instead of stamping the tool's (its failures still get the tool's own).
    stamps_provenance: bool = False
