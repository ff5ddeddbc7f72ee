"""The runtime: how a run is started, the one front door (`start_run`), and the model and tools it is given.

`run.py` holds `RunSpec`, `Sinks`, `RunHandle` and `start_run`; `model.py` finds and loads the model and chooses
its prompt format; `tools.py` builds the tool registry and the team's checks and router; `assemble.py` builds the
agent of one seat of a run (the run's own or a specialist's). Every command, the service, evals, workflows and the
team's children start their runs through `start_run`; nothing else assembles an agent. Does not print.
"""

from hermes_local.runtime.model import (
    Model,
    ModelSource,
    check_tool_use,
    dialect_for,
    find_model,
    load_llm,
    load_model,
    load_tokenizer,
)
from hermes_local.runtime.run import LOCAL_OWNER, RunHandle, RunSpec, Sinks, start_run
from hermes_local.runtime.tools import build_registry, check_team, memory_scope, memory_store, role_catalog

__all__ = [
    "LOCAL_OWNER",
    "Model",
    "ModelSource",
    "RunHandle",
    "RunSpec",
    "Sinks",
    "build_registry",
    "check_team",
    "check_tool_use",
    "dialect_for",
    "find_model",
    "load_llm",
    "load_model",
    "load_tokenizer",
    "memory_scope",
    "memory_store",
    "role_catalog",
    "start_run",
]
