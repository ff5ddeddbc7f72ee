"""The result cache for read tools: identical read calls within a run are answered without running.

`ResultCache` keys results by `arguments_digest(name, arguments)`. Within a run, an identical call
to a `read` tool that is not `volatile` gets the earlier successful result back, marked
`cached=True`; any `write` or `dangerous` call clears the per-run cache (it may have changed what a
read would see). A tool declared with `cache_ttl` (or given one in config `cache_ttl = {NAME =
SECONDS}`) also keeps its results on disk under `$HERMES_LOCAL_HOME/cache/` for that many seconds,
so later runs reuse them; that is off by default. Does not run tools or decide approval; the
executor calls `get`/`put`/`invalidate`.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

from hermes_local.outcome import ToolResult, arguments_digest
from hermes_local.tools.registry import Tool


@dataclasses.dataclass
class ResultCache:
    """Per-run results of read calls, plus an optional on-disk store for tools with a TTL."""

    ttl: dict[str, float] = dataclasses.field(default_factory=dict)  # config overrides of `Tool.cache_ttl`
    store: Path | None = None  # folder for cross-run entries; None = per-run only
    _entries: dict[str, ToolResult] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @staticmethod
    def cacheable(t: Tool) -> bool:
        return t.permission == "read" and t.cacheable and not t.volatile and not t.exclusive

    def _ttl(self, t: Tool) -> float | None:
        value = self.ttl.get(t.name, t.cache_ttl)
        return value if value and value > 0 else None

    def get(self, t: Tool, arguments: dict[str, Any]) -> ToolResult | None:
        """The earlier result of this exact call (marked cached), or None."""
        if not self.cacheable(t):
            return None
        key = arguments_digest(t.name, arguments)
        with self._lock:
            hit = self._entries.get(key)
        if hit is None:
            hit = self._load(t, key)
        return dataclasses.replace(hit, cached=True) if hit is not None else None

    def put(self, t: Tool, arguments: dict[str, Any], result: ToolResult) -> None:
        if not self.cacheable(t) or not result.ok:
            return
        key = arguments_digest(t.name, arguments)
        with self._lock:
            self._entries[key] = result
        self._save(t, key, result)

    def invalidate(self) -> None:
        """Forget this run's results (a write or dangerous call ran). Disk entries expire by their TTL."""
        with self._lock:
            self._entries.clear()

    # -- cross-run store ---------------------------------------------------------------------
    def _path(self, key: str) -> Path | None:
        return self.store / f"{key}.json" if self.store is not None else None

    def _load(self, t: Tool, key: str) -> ToolResult | None:
        ttl, path = self._ttl(t), self._path(key)
        if ttl is None or path is None or not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if time.time() - float(entry["time"]) > ttl:
                return None
            return ToolResult.from_envelope(entry["result"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is a miss

    def _save(self, t: Tool, key: str, result: ToolResult) -> None:
        ttl, path = self._ttl(t), self._path(key)
        if ttl is None or path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"time": time.time(), "result": result.envelope()}, default=str), encoding="utf-8")
        tmp.replace(path)
