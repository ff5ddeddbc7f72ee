"""What the serve process shares between requests: the one loaded model, and its child processes.

`SharedModel` wraps the loaded `LLM` so runs and chat completions take turns (one `complete()` at a
time; with a replay model that is one queue of outputs in arrival order), unless the model decodes
concurrent calls together (`concurrent = True`: `batching.BatchedLLM`, loaded with `parallel` > 1).
`kill_child_process_groups` ends every process this process started (tool commands run in their own
process groups), for cancel and shutdown of `hermes-local serve`. Linux `/proc` only. Does not queue runs or speak HTTP.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_local.llm import DEFAULT_OPTIONS, CallOptions, Completion, DelegatingLLM, TokenCallback


class SharedModel(DelegatingLLM):
    """The one loaded model, shared by runs and chat completions: one `complete()` at a time, or all at
    once when the model batches concurrent calls itself."""

    def __init__(self, llm: Any) -> None:
        super().__init__(llm)
        self.lock: Any = contextlib.nullcontext() if getattr(llm, "concurrent", False) else threading.Lock()

    def complete(
        self, tokens: Sequence[int], options: CallOptions = DEFAULT_OPTIONS, *, on_token: TokenCallback | None = None
    ) -> Completion:
        with self.lock:
            return super().complete(tokens, options, on_token=on_token)

    def __getattr__(self, name: str) -> Any:  # e.g. `remaining` of a replay model
        return getattr(self.inner, name)


def kill_child_process_groups() -> int:
    """SIGKILL every child process of this process (and its process group if it leads its own); Linux /proc."""
    me, my_group = os.getpid(), os.getpgrp()
    killed = 0
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid != me:
            continue
        pid = int(entry.name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group != my_group:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed
