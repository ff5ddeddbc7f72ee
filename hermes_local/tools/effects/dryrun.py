"""What a write would refuse, found without changing anything: a plan-only run's check before a proposal.

`check_target(ctx, raw)` walks `raw` exactly as a write does (`confined.locate`: the pinned workspace root,
symlinks followed by hand only while they stay inside, the agent's own state and code refused) but creates no
folder, and checks the existing leaf as `write_atomically` and `append_line` would (`check_writable`: a regular
file with one name). A folder that does not exist ends the walk: the write would create it, so nothing below
it can be a link, a protected file or a special file (`..` above the root is `check_inside`'s, run first).
Raises the write's own `ToolFailure`, so a plan gets the same error a real run would. Does not write, does
not decide approvals, and cannot see what the tool itself would refuse later (its own argument checks are the
tool's `Traits.dry_run`).
"""

from __future__ import annotations

from hermes_local.tools.effects.confined import check_inside, check_writable, locate
from hermes_local.tools.registry import ToolContext, ToolFailure


def check_target(ctx: ToolContext, raw: str) -> None:
    """Refuse (the write's own ToolFailure) what a write to `raw` would refuse; return when it would proceed."""
    check_inside(ctx, raw)
    try:
        with locate(ctx, raw) as loc:
            if not loc.leaf:
                raise ToolFailure("invalid_arguments", "'.' is a directory; give a file path inside it.")
            info = loc.lstat()
            if info is not None:
                check_writable(loc.name, info)
    except ToolFailure as exc:
        if exc.kind != "not_found":  # a missing folder on the way: the write creates it
            raise
