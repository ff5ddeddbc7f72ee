"""Sessions: an append-only JSONL log per run under `$HERMES_LOCAL_HOME/sessions/`.

Each event is one JSON line, flushed as it is written, so a crash loses at most the event in
flight. Reading skips a torn last line with a warning. Does not run the agent.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_local.config import home_dir
from hermes_local.errors import UserError


def sessions_dir() -> Path:
    return home_dir() / "sessions"


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


class SessionLog:
    """Appends events to `<sessions>/<id>.jsonl`; usable as an agent event sink."""

    SKIPPED_KINDS = frozenset({"token"})

    def __init__(self, session_id: str | None = None) -> None:
        self.id = session_id or new_session_id()
        self.path = sessions_dir() / f"{self.id}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")

    def log(self, kind: str, payload: dict[str, Any]) -> None:
        if kind in self.SKIPPED_KINDS:
            return
        line = json.dumps({"ts": time.time(), "kind": kind, **payload}, ensure_ascii=False, default=str)
        self._fh.write(line + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    __call__ = log

    def close(self) -> None:
        self._fh.close()


@dataclass
class SessionInfo:
    id: str
    path: Path
    goal: str
    events: int
    stopped: str | None


def session_path(session_id: str) -> Path:
    path = sessions_dir() / f"{session_id}.jsonl"
    if not path.is_file():
        raise UserError(f"no session {session_id!r}; see `hermes-local sessions list`")
    return path


def read_events(path: Path, *, warn: bool = True) -> list[dict[str, Any]]:
    """All events of a log; a corrupt line (a torn write) is skipped with a warning."""
    events = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            if warn:
                print(f"warning: skipped corrupt line {lineno} of {path.name}", file=sys.stderr)
    return events


def list_sessions() -> list[SessionInfo]:
    out = []
    for path in sorted(sessions_dir().glob("*.jsonl")):
        events = read_events(path, warn=False)
        goal = next((e.get("goal", "") for e in events if e.get("kind") == "run_start"), "")
        stopped = next((e.get("stopped") for e in reversed(events) if e.get("kind") == "run_end"), None)
        out.append(SessionInfo(path.stem, path, goal, len(events), stopped))
    return out


def describe_event(e: dict[str, Any]) -> str | None:
    """One human-readable line for an event (None for kinds not worth showing, such as tokens)."""
    kind = e.get("kind")
    if kind in ("run_start", "run_resumed"):
        return f"{'goal' if kind == 'run_start' else 'resumed'}: {e.get('goal', '')}"
    if kind == "step_start":
        return f"── step {e.get('step')}"
    if kind == "llm_call":
        return (
            f"   model: {e.get('prompt_tokens')} prompt tokens ({e.get('prompt_tokens_evaluated')} evaluated), "
            f"{e.get('completion_tokens')} generated, {float(e.get('seconds', 0)):.2f}s"
        )
    if kind == "tool_call":
        return f"   → {e.get('name')}({json.dumps(e.get('arguments', {}), ensure_ascii=False)})"
    if kind == "tool_result":
        return f"     {'✓' if e.get('ok') else '✗'} {e.get('summary', '')}"
    if kind == "compaction":
        return f"   (memory compacted through step {e.get('through_step')})"
    if kind == "run_end":
        return f"stopped: {e.get('stopped')}; answer: {e.get('answer')}"
    return None


def describe_events(events: list[dict[str, Any]]) -> list[str]:
    """Human-readable lines for `sessions show`."""
    return [line for line in map(describe_event, events) if line is not None]
