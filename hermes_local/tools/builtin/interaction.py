"""Tools that talk to the people around the run: `ask_user` and `final_answer`.

`ask_user(question)` is a read tool: when the caller gives a person to ask (the CLI's terminal prompt,
`cli/asker.py`, reaches it as `ToolContext.ask_user`) it asks and returns the reply; with nobody to ask
(no terminal, or the service) it succeeds with "no user available: proceed on a stated assumption" so
the run goes on.
`final_answer(answer)` is offered only under `--tool-choice required`, where every step must call a
tool: calling it ends the run with that answer (the agent loop sees the call and stops). Neither
decides approval, runs the loop or writes to a terminal.
"""

from __future__ import annotations

from hermes_local.outcome import ToolResult
from hermes_local.tools.registry import Tool, ToolContext, tool
from hermes_local.tools.traits import Toolset, Traits

NO_USER = "no user available: proceed on a stated assumption (say in the answer what you assumed)"
FINAL_ANSWER = "final_answer"


USER = Toolset("user", "ask the user a question; end the run with the final answer")


@tool(  # the user's own words
    volatile=True,
    exclusive=True,
    timeout=600,
    provenance="trusted",
    traits=Traits(toolset=USER, needs="person", steers_run=True),
)
def ask_user(question: str, ctx: ToolContext) -> ToolResult:
    """Ask the user a question when the goal is ambiguous and return the reply.

    Args:
        question: One short question for the user.
    """
    if ctx.ask_user is None:
        return ToolResult.success(NO_USER, "ask_user: no user available")
    reply = ctx.ask_user(question)
    if not reply:
        return ToolResult.success(NO_USER, "ask_user: no reply")
    return ToolResult.success(reply, f"ask_user: the user replied {reply[:80]!r}")


@tool(
    name=FINAL_ANSWER,
    volatile=True,
    provenance="trusted",
    traits=Traits(toolset=USER, steers_run=True, ends_run=True),
)
def final_answer(answer: str) -> str:
    """Give the final answer to the user's goal and end the task. Call this once the goal is met.

    Args:
        answer: The complete answer for the user.
    """
    return answer


TOOLS: list[Tool] = [ask_user]  # the registry's built-ins; `final_answer` is offered by the loop when required
