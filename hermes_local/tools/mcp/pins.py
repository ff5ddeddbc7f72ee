"""Pinned MCP tool definitions: a server cannot change a tool under a name the user already let in.

The first time a run sees an MCP tool, the server's own definition of it (name, title, description, input
schema, annotations: `definition_hash`, kept on the tool as `Tool.pin`) is hashed and stored in
`$HERMES_LOCAL_HOME/mcp_pins.json`. A later run that gets a different definition under the same name (a
new description with instructions in it, an argument added, annotations that lower its permission) leaves
that tool out, with one notice per server naming the command that accepts it: `hermes-local mcp trust
NAME` (`cli/mcp.py`, through `PinStore.trust`), NAME a server (all its tools) or one `SERVER__TOOL`. New
tools are pinned as they appear; removed ones keep their pin. Does not talk to servers or decide approval.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hermes_local.config import home_dir
from hermes_local.errors import UserError
from hermes_local.tools.registry import Tool

PINS_FILE = "mcp_pins.json"


def definition_hash(spec: Any) -> str:
    """The hash of a server's definition of one tool (an `mcp.types.Tool`): name, title, description, input
    schema and annotations as the server sent them (so our own rendering of them may change freely)."""
    annotations = spec.annotations.model_dump(mode="json", exclude_none=True) if spec.annotations else None
    blob = json.dumps(
        [spec.name, spec.title, spec.description, spec.input_schema, annotations],
        sort_keys=True,
        default=str,
        ensure_ascii=True,
    )
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def server_of(source: str) -> str:
    """`mcp:NAME` -> NAME."""
    return source.removeprefix("mcp:")


class PinStore:
    """The pins file: tool name (`SERVER__TOOL`) -> definition hash."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or home_dir() / PINS_FILE
        self._lock = threading.Lock()

    def load(self) -> dict[str, str]:
        if not self.path.is_file():
            return {}
        try:
            pins = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(
                f"MCP pin file {self.path} cannot be read ({exc}); delete it to pin every MCP tool again"
            ) from exc
        if not isinstance(pins, dict) or not all(isinstance(v, str) for v in pins.values()):
            raise UserError(f"MCP pin file {self.path} is not a JSON object of hashes; delete it to pin again")
        return pins

    def _save(self, pins: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(pins, fh, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def admit(
        self, found: Iterable[tuple[Tool, str]], on_notice: Callable[[str], None] | None = None
    ) -> list[tuple[Tool, str]]:
        """The (tool, source) pairs whose definition matches its pin; new tools are pinned now, changed ones
        left out with one `on_notice` line per server."""
        found = list(found)
        with self._lock:
            pins = self.load()
            kept: list[tuple[Tool, str]] = []
            changed: dict[str, list[str]] = {}
            new = False
            for t, source in found:
                digest = t.pin
                if digest is None:  # not a pinned kind of tool
                    kept.append((t, source))
                    continue
                if pins.get(t.name, digest) != digest:
                    changed.setdefault(server_of(source), []).append(t.name)
                    continue
                new = new or t.name not in pins
                pins[t.name] = digest
                kept.append((t, source))
            if new:
                self._save(pins)
        for server, names in changed.items():
            if on_notice is not None:
                on_notice(
                    f"MCP server {server}: {', '.join(names)} changed since first used (description, arguments "
                    f"or annotations) and {'is' if len(names) == 1 else 'are'} left out; review it and accept "
                    f"with: hermes-local mcp trust {server}"
                )
        return kept

    def changed(self, found: Iterable[tuple[Tool, str]]) -> list[str]:
        """Names of the tools whose definition differs from their pin (nothing is pinned)."""
        pins = self.load()
        return [t.name for t, _ in found if t.pin is not None and pins.get(t.name, t.pin) != t.pin]

    def trust(self, found: Iterable[tuple[Tool, str]], name: str) -> list[str]:
        """Pin the current definitions of server `name`'s tools (or of the one tool `name`); the names re-pinned
        because they had changed."""
        with self._lock:
            pins = self.load()
            accepted = []
            for t, source in found:
                digest = t.pin
                if digest is None or name not in (server_of(source), t.name):
                    continue
                if pins.get(t.name, digest) != digest:
                    accepted.append(t.name)
                pins[t.name] = digest
            self._save(pins)
        return accepted
