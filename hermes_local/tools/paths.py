"""Workspace confinement: turn a path from the model into a real path inside the workspace, or refuse.

`resolve_in_workspace` resolves the path (`..` and every symlink, via `Path.resolve`) and requires
the result to be the workspace or below it. `~`, absolute paths elsewhere, `..` escapes and
symlinks (to files or directories) that lead out all raise `ToolFailure("permission_denied")`.
It does not open files and cannot stop a process outside hermes-local from swapping a directory for
a symlink between the check and the use; tools open files with `O_NOFOLLOW` to narrow that window.
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes_local.tools.registry import ToolContext, ToolFailure


def workspace_root(ctx: ToolContext) -> Path:
    return Path(ctx.workspace).resolve(strict=False)


def relative_name(ctx: ToolContext, path: Path) -> str:
    """How a resolved path inside the workspace is shown to the model ("." for the workspace)."""
    rel = path.relative_to(workspace_root(ctx))
    return rel.as_posix() if rel.parts else "."


def resolve_in_workspace(ctx: ToolContext, raw: str, *, must_exist: bool = False) -> Path:
    """The resolved path for `raw` (relative to the workspace), refusing anything outside it."""
    if not isinstance(raw, str) or "\x00" in raw:
        raise ToolFailure("invalid_arguments", "path must be a plain text path without NUL characters.")
    text = raw.strip() or "."
    outside = (
        f"path {raw!r} is outside the workspace; only paths inside the workspace are allowed. "
        "Use a relative path such as 'notes.txt' or 'data/report.csv' (list_dir shows what exists)."
    )
    if text.startswith("~"):
        raise ToolFailure("permission_denied", outside)
    root = workspace_root(ctx)
    candidate = Path(text)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops, overly long names
        raise ToolFailure("invalid_arguments", f"cannot resolve path {raw!r}: {exc}") from exc
    if resolved != root and root not in resolved.parents:
        lexical = Path(os.path.normpath(candidate))
        if lexical == root or root in lexical.parents:
            outside = f"path {raw!r} goes through a symlink that leads outside the workspace; it is refused. " + (
                "Use files that are really inside the workspace (list_dir shows what exists)."
            )
        raise ToolFailure("permission_denied", outside)
    if must_exist and not os.path.lexists(resolved):
        raise ToolFailure("not_found", f"{raw!r} does not exist in the workspace; call list_dir to see what exists.")
    return resolved
