"""Wiring: settings -> an LLM, a tool registry, an executor and an `Agent`.

Shared by the CLI and Python callers so both build runs the same way. Holds one loaded model per
process (llama.cpp weights are expensive to load twice). Does not print anything.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from hermes_local.agent import Agent, AgentConfig, EventSink
from hermes_local.config import Settings
from hermes_local.errors import UserError
from hermes_local.llm import LLM, LlamaParams
from hermes_local.replay import is_replay_spec, load_replay
from hermes_local.tools import Approver, Executor, Tool, ToolContext, ToolRegistry, default_registry

_loaded: dict[tuple, LLM] = {}


def llama_params(settings: Settings) -> LlamaParams:
    return LlamaParams(
        n_ctx=settings.n_ctx,
        n_gpu_layers=settings.n_gpu_layers,
        n_threads=settings.n_threads,
        n_batch=settings.n_batch,
        seed=settings.seed,
        flash_attn=settings.flash_attn,
        main_gpu=settings.main_gpu,
        tensor_split=settings.tensor_split,
        rpc_servers=settings.rpc_servers,
        prompt_cache=settings.prompt_cache,
    )


def load_llm(settings: Settings, on_info: Callable[[str], None] | None = None) -> LLM:
    """`replay:FILE` -> ScriptedLLM; otherwise resolve and load the GGUF (once per process).

    A registry entry's `n_ctx`, `n_gpu_layers`, `main_gpu`, `tensor_split` and `rpc_servers` apply unless
    the user set them (flag, env or config file).
    `on_info` receives the memory estimate before the weights are loaded.
    """
    spec = settings.model
    if is_replay_spec(spec):
        return load_replay(spec or "", n_ctx=settings.n_ctx)
    from hermes_local.llm import LlamaCppLLM, ModelLoadError
    from hermes_local.models import memory_line, resolve_choice

    path, choice = resolve_choice(spec)
    params = llama_params(settings)
    if choice is not None:
        for name in ("n_ctx", "n_gpu_layers", "main_gpu", "tensor_split", "rpc_servers"):
            value = getattr(choice.entry, name)
            if name not in settings.model_fields_set and value is not None:
                setattr(params, name, value)
    key = (str(path.resolve()), repr(sorted(vars(params).items())))
    if key not in _loaded:
        if on_info:
            on_info(memory_line(path, params.n_ctx, params.n_gpu_layers))
        try:
            _loaded[key] = LlamaCppLLM(path, params)
        except ModelLoadError as exc:
            raise UserError(f"{exc}; check the file or re-download it") from exc
    if settings.parallel > 1:  # concurrent runs share the model as sequences of one batched context
        from hermes_local.batching import BatchedLLM

        batched_key = (*key, "parallel", settings.parallel)
        if batched_key not in _loaded:
            _loaded[batched_key] = BatchedLLM(_loaded[key], settings.parallel)  # type: ignore[arg-type]
        return _loaded[batched_key]
    return _loaded[key]


def load_tools_module(spec: str) -> list[Tool]:
    """`@tool` objects from a Python file path or an importable module name."""
    path = Path(spec)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UserError(f"tools module {spec} does not exist")
        module_name = f"hermes_user_tools_{abs(hash(str(path.resolve())))}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise UserError(f"cannot load tools module {spec}")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - a broken user file is the user's to fix
            raise UserError(f"tools module {spec} failed to import: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            module = importlib.import_module(spec)
        except ImportError as exc:
            raise UserError(f"cannot import tools module {spec!r}: {exc}") from exc
    found = [v for v in vars(module).values() if isinstance(v, Tool)]
    if not found:
        raise UserError(f"tools module {spec} defines no @tool functions")
    return found


def build_registry(tools_modules: Iterable[str] = ()) -> ToolRegistry:
    from hermes_local.longterm import LONGTERM_TOOLS

    registry = default_registry()
    for t in LONGTERM_TOOLS:
        registry.register(t)
    for spec in tools_modules:
        for t in load_tools_module(spec):
            registry.register(t)
    return registry


def build_agent(
    llm: LLM,
    settings: Settings,
    *,
    workspace: Path,
    registry: ToolRegistry | None = None,
    approver: Approver | None = None,
    on_event: EventSink | None = None,
    db_path: Path | None = None,
) -> Agent:
    from hermes_local.longterm import LongTermMemory

    if not workspace.is_dir():
        raise UserError(f"workspace {workspace} is not a directory; create it or pass --workspace DIR")
    context = ToolContext(
        workspace=workspace.resolve(),
        db_path=db_path,
        allow_hosts=list(settings.allow_hosts),
        output_cap=max(1000, min(8000, llm.n_ctx)),
        timeout=settings.tool_timeout,
    )
    longterm = LongTermMemory()
    context.extras["longterm"] = longterm
    executor = Executor(
        registry=registry or default_registry(),
        context=context,
        approver=approver or Approver(allow=settings.allow_tools, deny=settings.deny_tools),
    )
    config = AgentConfig(
        max_steps=settings.max_steps,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        tool_choice=settings.tool_choice,
        grammar=settings.grammar,
        reminder_every=settings.reminder_every,
    )
    return Agent(
        llm, executor, config, on_event=on_event, recall=lambda goal: [f.text for f in longterm.search(goal, limit=3)]
    )
