"""Path-scoped permission rules: `[permissions]` allow / ask / deny lists of `tool:glob`, and `--allow tool:glob`.

A rule is a tool name (or a glob over names, `mcp_git__*`), optionally with `:` and a pattern over what the call
touches: for a tool that writes a path (`Tool.writes_path`) or takes a `path` argument, a path glob relative to the
workspace (`write_file:src/**`, `read_file:secrets/*`; `**` spans folders, `*` and `?` stay inside one); for a tool
with a `command` argument, a glob over the whole command (`run_shell:make test`, `run_shell:pytest *`). Deny beats
ask, ask beats allow. A path is normalised first (`src/../.git/x` is `.git/x`) and its folders' symlinks resolved
inside the workspace, so each call has one or two forms: a deny or ask rule matches when any form does, an allow rule
only when every form does, and a path that leaves the workspace (`../x`, an absolute path elsewhere, a symlink out)
never matches an allow rule. An allow rule over a command matches only a command without shell control characters
(`;`, `&`, `|`, `$`, backticks, redirections, newlines), so `run_shell:make *` never allows `make x; rm -rf ~`.
The approver (`approval.py`) applies the result: the files-that-execute-later rule and provenance still ask whatever
a rule says. Does not run tools and asks nobody.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hermes_local.errors import UserError
from hermes_local.shaping import split_rule
from hermes_local.tools.registry import Tool

RuleKind = Literal["allow", "ask", "deny"]
ORDER: tuple[RuleKind, ...] = ("deny", "ask", "allow")  # deny wins, then ask, then allow
SHELL_CONTROL = re.compile(r"[;&|`$<>\n\r\\]|\(|\)")


@dataclass(frozen=True)
class Rule:
    """One rule: its kind, the tool (name or glob) and the pattern over what the call touches (None: every call)."""

    kind: RuleKind
    tool: str
    pattern: str | None = None

    @property
    def text(self) -> str:
        """How the rule is written, e.g. `allow write_file:src/**` (what the prompt and `sessions show` name)."""
        return f"{self.kind} {self.tool}" + (f":{self.pattern}" if self.pattern is not None else "")


def parse_rule(kind: RuleKind, text: str) -> Rule:
    """`write_file:src/**` -> a Rule; a malformed one is a one-line `UserError` naming the fix."""
    try:
        tool, pattern = split_rule(text)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    return Rule(kind, tool, pattern)


def is_rule(entry: str) -> bool:
    """Whether an `--allow` / `allow_tools` entry is a scoped rule (`TOOL:PATTERN`) rather than a tool name."""
    return ":" in entry


@functools.lru_cache(maxsize=256)
def path_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: `**/` any folders (or none), `**` anything, `*` and `?` within one folder."""
    out, i = [], 0
    text = pattern.replace("\\", "/").lstrip("/")
    while i < len(text):
        if text.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif text.startswith("**", i):
            out.append(".*")
            i += 2
        elif text[i] == "*":
            out.append("[^/]*")
            i += 1
        elif text[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(text[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def path_forms(path: str, workspace: Path | None) -> list[str] | None:
    """The workspace-relative forms of `path` (as written, normalised; its folders' symlinks resolved), or None
    when it leaves the workspace."""
    raw = path.replace("\\", "/")
    root = os.path.realpath(workspace) if workspace is not None else None
    if raw.startswith("/"):
        if root is None or not (raw == root or raw.startswith(root + "/")):
            return None
        raw = raw[len(root) :].lstrip("/")
    literal = posixpath.normpath(raw or ".")
    if literal == ".." or literal.startswith("../"):
        return None
    forms = [literal]
    if root is not None:
        try:
            real = os.path.realpath(os.path.join(root, literal))
        except (OSError, ValueError):
            return None
        if real != root and not real.startswith(root + os.sep):
            return None  # a symlink out of the workspace
        resolved = os.path.relpath(real, root).replace(os.sep, "/")
        if resolved != literal:
            forms.append(resolved)
    return forms


def call_subject(t: Tool, arguments: dict[str, Any]) -> tuple[str, str] | None:
    """("path", value) or ("command", value): what a pattern of a rule for `t` is matched against."""
    for key, what in ((t.writes_path, "path"), ("path", "path"), ("command", "command")):
        value = arguments.get(key) if key else None
        if isinstance(value, str):
            return what, value
    return None


class Permissions:
    """The rules in force for a run, in order of precedence (deny, ask, allow)."""

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules = sorted(rules, key=lambda r: ORDER.index(r.kind))

    @classmethod
    def from_lists(cls, *, allow: Iterable[str] = (), ask: Iterable[str] = (), deny: Iterable[str] = ()) -> Permissions:
        lists: tuple[tuple[RuleKind, Iterable[str]], ...] = (("allow", allow), ("ask", ask), ("deny", deny))
        return cls(parse_rule(kind, text) for kind, texts in lists for text in texts)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def extend(self, rules: Iterable[Rule]) -> None:
        self.rules = sorted([*self.rules, *rules], key=lambda r: ORDER.index(r.kind))

    def match(self, t: Tool, arguments: dict[str, Any], workspace: Path | None = None) -> Rule | None:
        """The rule that decides this call (the first by precedence that matches), or None."""
        subject = call_subject(t, arguments)
        for rule in self.rules:
            if not fnmatch.fnmatchcase(t.name, rule.tool):
                continue
            if rule.pattern is None or (subject is not None and _matches(rule, *subject, workspace)):
                return rule
        return None


def _matches(rule: Rule, what: str, value: str, workspace: Path | None) -> bool:
    assert rule.pattern is not None
    if what == "command":
        if rule.kind == "allow" and SHELL_CONTROL.search(value):
            return False  # chained, substituted or redirected: an allow rule never covers more than one command
        return fnmatch.fnmatchcase(value.strip(), rule.pattern)
    forms = path_forms(value, workspace)
    regex = path_regex(rule.pattern)
    if forms is None:  # outside the workspace: only a rule for every path ("**") may deny or ask
        return rule.kind != "allow" and rule.pattern in ("**", "*")
    hits = [bool(regex.match(form)) for form in forms]
    return all(hits) if rule.kind == "allow" else any(hits)
