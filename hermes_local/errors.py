"""The error base class: every error a person must act on carries its exit code and one line.

`HermesError` is raised anywhere in the package for a mistake the user (or their files, model or
environment) must fix; the CLI's `main()` maps it once to `error: <line>` on stderr and its exit
code. `UserError` (exit 2) is a bad flag, setting, name, file or id; `ReplayMismatch` (exit 1) is
a replay recording that does not fit the run. Model mistakes never raise: they go back to the model
as tool results. Bugs raise ordinary exceptions. Also holds `one_line()`, the single place that turns
a pydantic `ValidationError` into a readable line. Does not print anything.
"""

from __future__ import annotations

from typing import Any


class HermesError(Exception):
    """An error for a person to fix: one line of text and the process exit code."""

    exit_code: int = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def line(self) -> str:
        """The message on one line (control characters and newlines flattened)."""
        return " ".join(str(self).split())


class UserError(HermesError):
    """A mistake the user must fix (bad flag, setting, name, file, id): exit code 2."""


class ReplayMismatch(HermesError):
    """A replay recording that does not fit the run (too few or unused outputs): exit code 1."""

    exit_code = 1


class ModelLoadError(HermesError):
    """llama.cpp (or a remote engine) could not load or serve the model: exit code 2."""


def one_line(exc: Any, *, prefix: str = "") -> str:
    """`where: message` for the first problem of a pydantic ValidationError (or str(exc) otherwise)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, TypeError):
            return prefix + " ".join(str(exc).split())
        where = ".".join(str(p) for p in first.get("loc", ())) or "value"
        return f"{prefix}{where}: {first.get('msg', '')}"
    return prefix + " ".join(str(exc).split())
