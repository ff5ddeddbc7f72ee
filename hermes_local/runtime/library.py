"""The library's `Agent`: one model and the settings its runs share, each run started through `start_run`.

`Agent(model, settings=..., tools=[...], allow=[...])` keeps what every run of a Python caller has in common;
`agent.run(task, workspace=...)` opens a run (`RunSpec`) and runs it to its end, `agent.start(task, ...)` hands
back the open `RunHandle` (to resume, chat, or read its executor). A library caller is asked nothing: write and
dangerous tools run only when `allow` (or the settings' `allow_tools`) names them, or an `ask` callable says yes.
Does not print; the loop itself is `agent.loop.Agent`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hermes_local.agent.loop import EventSink
from hermes_local.agent.result import RunResult
from hermes_local.config import Settings, load_settings
from hermes_local.runtime.model import Model, load_model
from hermes_local.runtime.run import RunHandle, RunSpec, Sinks, start_run
from hermes_local.runtime.tools import build_registry
from hermes_local.tools import Approver, Tool
from hermes_local.tools.approval import AskFunction
from hermes_local.tools.registry import AskUser


class Agent:
    """A model and the settings, tools and approval rules its runs share (see the module docstring)."""

    def __init__(
        self,
        model: Model | str | None = None,
        *,
        settings: Settings | Mapping[str, Any] | None = None,
        tools: Sequence[Tool] = (),
        allow: Sequence[str] = (),
        ask: AskFunction | None = None,
        ask_user: AskUser | None = None,
        on_event: EventSink | None = None,
    ) -> None:
        """`model`: a loaded `Model`, a models.toml name or GGUF path (loaded now), or None (the configured one);
        `settings`: `Settings` or overrides (`{"max_steps": 5}`); `tools`: your `@tool` functions, beside the
        built-ins; `allow`: write/dangerous tools that run unasked; `ask(request) -> "y" | "n"` decides the rest;
        `ask_user(question) -> str` answers the `ask_user` tool; `on_event` sees every event of every run."""
        self.settings = settings if isinstance(settings, Settings) else load_settings(dict(settings or {}))
        self.model = model if isinstance(model, Model) else load_model(model, self.settings)
        self.tools = list(tools)
        self.allow = list(allow)
        self.ask = ask
        self.ask_user = ask_user
        self.on_event = on_event

    def start(
        self,
        task: str,
        *,
        workspace: Path | str = ".",
        plan: bool = False,
        db: Path | None = None,
        instructions: str | None = None,
        session_id: str | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> RunHandle:
        """Open a run of `task` in `workspace` (a session log is kept, as for `hermes-local run`)."""
        registry = build_registry((), self.settings, on_notice=on_notice)
        for t in self.tools:
            registry.register(t, source="library")
        approver = Approver(
            allow=[*self.settings.allow_tools, *self.allow], deny=self.settings.deny_tools, ask=self.ask
        )
        spec = RunSpec(
            task=task, settings=self.settings, workspace=workspace, tools=registry, approver=approver,
            ask_user=self.ask_user, plan=plan, db=db, session_id=session_id, instructions=instructions,
            on_notice=on_notice,
        )  # fmt: skip
        try:
            handle = start_run(spec, self.model, Sinks(display=self.on_event))
        except BaseException:
            registry.close()
            raise
        handle.own(registry.close)  # the MCP servers started for this run stop with it
        return handle

    def run(self, task: str, *, workspace: Path | str = ".", plan: bool = False, db: Path | None = None) -> RunResult:
        """Run `task` to its end in `workspace`; the result's `answer`, `stopped`, `tool_calls` and `session_id`
        say what happened."""
        with self.start(task, workspace=workspace, plan=plan, db=db) as handle:
            return handle.run()
