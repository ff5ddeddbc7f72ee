"""Loading `--tools-module` files: the `@tool` objects of a Python file or an importable module.

A file is imported under a name of its own (so two files named alike do not collide); a module that fails to
import, exits while importing or defines no `@tool` is one line naming the fix (`UserError`, exit 2). Does not
register the tools (`runtime.build_registry` does) or run them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from hermes_local.errors import UserError
from hermes_local.tools.registry import Tool


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
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken user file is the user's to fix
            sys.modules.pop(module_name, None)
            raise UserError(f"tools module {spec} failed to import: {_describe(exc)}") from exc
    else:
        try:
            module = importlib.import_module(spec)
        except ImportError as exc:
            raise UserError(f"cannot import tools module {spec!r}: {exc}") from exc
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - raised by the module's own code
            raise UserError(f"tools module {spec!r} failed to import: {_describe(exc)}") from exc
    found = [v for v in vars(module).values() if isinstance(v, Tool)]
    if not found:
        raise UserError(f"tools module {spec} defines no @tool functions")
    return found


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called exit({exc.code!r}) while being imported"
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
