"""Per-call overhead of checkpoints: median wall time of write_file and run_shell with and without recording.

Runs each call N times (default 50) through the real `Executor` (validation, approval, the tool's thread),
once with no checkpoint recorder and once with one (the real store in a temporary `HERMES_LOCAL_HOME`):
`write_file` of a 10 kB file (new content each time, so each write keeps two new objects) and
`run_shell` of `echo hi` in a workspace of F small files (default 200; the command is bracketed by two
scans of the workspace). Prints figures only; asserts nothing.

    python scripts/checkpoint_overhead.py [N] [F]
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from pathlib import Path

from hermes_local.sandbox.policy import SandboxPolicy, bwrap_status
from hermes_local.tools import Approver, Executor, ToolContext, default_registry
from hermes_local.tools.effects.checkpoints import CheckpointStore, Recorder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox_overhead import median_ms  # noqa: E402 - the same median as the sandbox's overhead


def executor(workspace: Path, recorder: Recorder | None) -> Executor:
    sandbox = SandboxPolicy(mode="bwrap" if bwrap_status()[0] else "off")
    ctx = ToolContext(workspace=workspace, sandbox=sandbox, timeout=30)
    approver = Approver(allow=["write_file", "run_shell"], interactive=False, trust_content=True)
    ex = Executor(default_registry(), ctx, approver)
    ex.checkpoints = recorder
    return ex


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    print(f"bwrap: {bwrap_status()[1]}")
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as ws:
        os.environ["HERMES_LOCAL_HOME"] = home
        workspace = Path(ws)
        for i in range(files):
            (workspace / f"d{i % 10}").mkdir(exist_ok=True)
            (workspace / f"d{i % 10}" / f"f{i}.txt").write_text(f"line {i}\n" * 40)
        counter = itertools.count()
        rows = []
        for label, rec in (("off", None), ("on", Recorder(CheckpointStore(), "overhead", ws, step=1))):
            ex = executor(workspace, rec)

            def write(ex: Executor = ex) -> None:
                content = f"{next(counter)}\n" + "x" * 10_000
                assert ex.execute("write_file", {"path": "out.txt", "content": content}).ok

            def shell(ex: Executor = ex) -> None:
                assert ex.execute("run_shell", {"command": "echo hi"}).ok

            w, s = median_ms(write, n), median_ms(shell, n)
            rows.append((w, s))
            print(f"checkpoints {label:3}  write_file 10 kB median {w:7.2f} ms   run_shell echo median {s:7.2f} ms")
        (w0, s0), (w1, s1) = rows
        print(f"overhead per write_file {w1 - w0:+7.2f} ms; per run_shell ({files} files) {s1 - s0:+7.2f} ms (n={n})")
        objects, size = CheckpointStore().size()
        print(f"store after the runs: {objects} objects, {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
