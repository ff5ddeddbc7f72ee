"""`hermes-local prompt TASK`: print the exact first prompt a model would receive, without running.

It opens the run as `run` does, through `runtime.start_run` without a session log (tools, `--tools-module`,
`--instructions`, `--tool-choice`, recalled facts, the dialect chosen by `--dialect` / models.toml / the GGUF),
renders the first
prompt and counts its tokens with the model's own tokenizer (loaded vocabulary-only: no weights).
Special tokens are shown as their text. A vocabulary lacking the dialect's framing tokens is only a
warning here (one line on stderr, exit 0): rendering any format for any model is how users debug a
model that will not call tools. Does not load weights, run the model or call tools.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hermes_local.cli.common import (
    DialectOpt,
    InstructionsOpt,
    ModelOpt,
    ToolsModuleOpt,
    ToolsOpt,
    fail,
    notice,
    settings_from_flags,
)
from hermes_local.textsafe import terminal_safe

if TYPE_CHECKING:
    from hermes_local.agent.loop import Agent
    from hermes_local.config import Settings
    from hermes_local.dialects import Dialect
    from hermes_local.llm import LLM
    from hermes_local.tools import ToolRegistry


def prompt_command(
    task: Annotated[str | None, typer.Argument(help="The task, as you would give it to `run`.")] = None,
    model: ModelOpt = None,
    dialect: DialectOpt = None,
    tools_module: ToolsModuleOpt = None,
    tools: ToolsOpt = None,
    instructions: InstructionsOpt = None,
    tool_choice: Annotated[str | None, typer.Option(help="auto, required or none (as for `run`).")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"dialect", "tool_call_format", "text", "token_count"}.')
    ] = False,
    session: Annotated[
        str | None, typer.Option(help="Show a recorded session's prompt instead (see `sessions list`).")
    ] = None,
    step: Annotated[int, typer.Option(min=1, help="With --session: the prompt the model got at this step.")] = 1,
) -> None:
    """Print the exact first prompt for TASK (special tokens as text) and its token count; runs nothing.

    With --session ID --step N: the prompt of step N of that recorded run, rebuilt from its log.
    """
    from hermes_local.dialects import missing_framing
    from hermes_local.prompts import to_tokens
    from hermes_local.runtime import build_registry, dialect_for, find_model, load_tokenizer

    if (task is None) == (session is None):
        fail("give a TASK, or --session ID (with --step N) for a recorded run's prompt")
    events = _recorded(session) if session else []
    if events and dialect is None:
        from hermes_local.session import recorded_dialect

        dialect = recorded_dialect(events)
    settings = settings_from_flags(locals())  # the run joins the instructions with the routing note, as in `run`
    source = find_model(settings)
    llm = load_tokenizer(settings, source)
    chosen = dialect_for(settings, llm, source)
    missing = missing_framing(chosen, llm)
    if missing:
        typer.echo(
            f"warning: {llm.description} has no {' '.join(missing)} special token(s): the {chosen.name} framing "
            "below reaches this model as plain text; try another --dialect",
            err=True,
        )
    from hermes_local.tools.toolsets import check_spec

    registry = build_registry(tools_module or [], settings, workspace=Path(".").resolve())  # MCP tools too
    check_spec(registry, settings.tools)  # a mistyped --tools name is one line, exit 2
    with _preview(llm, chosen, settings, registry) as agent:
        memory = agent.new_memory(task or "") if not events else _memory_at(agent, events, step, session or "")
    prefill = chosen.required_prefill if agent.config.tool_choice == "required" else ""
    if events:
        prefill = recorded_prefill(events, step)
    segments = chosen.render(memory.messages(), agent.tool_schemas(), prefill=prefill)
    count = len(to_tokens(segments, llm))
    if as_json:
        shown = {"dialect": chosen.name, "tool_call_format": chosen.call_format, "text": segments.text}
        typer.echo(json.dumps(shown | {"token_count": count}, ensure_ascii=False))
        return
    text = terminal_safe(segments.text, keep_newlines=True) if sys.stdout.isatty() else segments.text
    typer.echo(text, nl=False)
    calls = f" ({chosen.call_format} calls)" if chosen.call_format != chosen.name else ""
    typer.echo(f"\n-- {count} tokens, dialect {chosen.name}{calls}, model {llm.description}", err=True)


@contextlib.contextmanager
def _preview(llm: LLM, dialect: Dialect, settings: Settings, registry: ToolRegistry) -> Iterator[Agent]:
    """The agent a run in this folder would have (through `runtime.start_run`, logged nothing), to render its
    prompts; nothing of it runs."""
    from hermes_local.runtime import Model, RunSpec, start_run

    spec = RunSpec(settings=settings, workspace=Path("."), tools=registry, log=False)
    with start_run(spec, Model(llm, dialect)) as handle:
        assert handle.agent is not None
        yield handle.agent


def _recorded(session_id: str) -> list:
    from hermes_local.session import read_events, session_path

    return read_events(session_path(session_id), on_skip=notice)


def _memory_at(agent, events: list, step: int, session_id: str):
    """The memory of a recorded run at `step` (its tools and settings as given to this command)."""
    from hermes_local.agent.resume import memory_at_step

    memory = memory_at_step(events, step, agent.system_prompt(), agent.dialect, agent.executor)
    if memory is None:
        fail(f"session {session_id} has no model reply at step {step}; see `hermes-local sessions show {session_id}`")
    return memory


def step_prompts(session_id: str) -> dict[int, str]:
    """Each step's exact prompt text of a recorded run (`sessions show --raw`), built as `prompt --session` does."""
    from hermes_local.agent.resume import memory_at_step
    from hermes_local.events import AssistantText
    from hermes_local.runtime import build_registry, dialect_for, find_model, load_tokenizer
    from hermes_local.session import recorded_dialect

    events = _recorded(session_id)
    settings = settings_from_flags({"dialect": recorded_dialect(events)})
    source = find_model(settings)
    llm = load_tokenizer(settings, source)
    chosen = dialect_for(settings, llm, source)
    registry = build_registry([], settings, workspace=Path(".").resolve())
    out: dict[int, str] = {}
    with _preview(llm, chosen, settings, registry) as agent:
        for step in sorted({e.step for e in events if isinstance(e, AssistantText)}):
            memory = memory_at_step(events, step, agent.system_prompt(), chosen, agent.executor)
            if memory is not None:
                prefill = recorded_prefill(events, step)
                out[step] = chosen.render(memory.messages(), agent.tool_schemas(), prefill=prefill).text
    return out


def recorded_prefill(events: list, step: int) -> str:
    """The call prefill step `step` of a recorded run began with (a forced or required call), or ""."""
    from hermes_local.events import LLMCall

    return next((e.prefill for e in events if isinstance(e, LLMCall) and e.step == step), "")
