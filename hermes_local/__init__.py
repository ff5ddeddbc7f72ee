"""hermes-local: a local, offline task agent on llama.cpp.

The library's API is what `__all__` names, importable from here: `Agent` (a model and the settings its runs share;
`Agent().run("What time is it?")`), `RunSpec` + `start_run` (the one front door every command uses, for callers who
want the open `RunHandle`), `load_model`, `tool` (your own tools), `Approver`, `RunResult`, `Settings` and
`load_settings`, and the errors a caller may catch (`HermesError`, `UserError`). Every other module is internal and
may change between releases. Importing this package is cheap: the names load on first use (only
`hermes_local.engines.inprocess` imports llama_cpp, lazily).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_WHERE = {
    "Agent": "hermes_local.runtime.library",
    "Approver": "hermes_local.tools",
    "HermesError": "hermes_local.errors",
    "Model": "hermes_local.runtime.model",
    "RunHandle": "hermes_local.runtime.run",
    "RunResult": "hermes_local.agent.result",
    "RunSpec": "hermes_local.runtime.run",
    "Settings": "hermes_local.config",
    "Sinks": "hermes_local.runtime.run",
    "UserError": "hermes_local.errors",
    "load_model": "hermes_local.runtime.model",
    "load_settings": "hermes_local.config",
    "start_run": "hermes_local.runtime.run",
    "tool": "hermes_local.tools",
}
__all__ = [
    "Agent",
    "Approver",
    "HermesError",
    "Model",
    "RunHandle",
    "RunResult",
    "RunSpec",
    "Settings",
    "Sinks",
    "UserError",
    "load_model",
    "load_settings",
    "start_run",
    "tool",
]

if TYPE_CHECKING:
    from hermes_local.agent.result import RunResult
    from hermes_local.config import Settings, load_settings
    from hermes_local.errors import HermesError, UserError
    from hermes_local.runtime.library import Agent
    from hermes_local.runtime.model import Model, load_model
    from hermes_local.runtime.run import RunHandle, RunSpec, Sinks, start_run
    from hermes_local.tools import Approver, tool


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562), so `import hermes_local` stays cheap."""
    if name not in _WHERE:
        raise AttributeError(f"module 'hermes_local' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
