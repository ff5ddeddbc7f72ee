"""`@tool`, the `Tool` record, the `ToolContext` a tool sees and the `ToolRegistry`.

`@tool` turns a typed, docstring-documented function into a tool: a JSON schema for the model and a
pydantic model that validates arguments before the function runs. A parameter annotated
`ToolContext` is injected, never shown to the model. Every outcome is a `ToolResult` envelope
(`hermes_local/outcome.py`), and carries its `provenance`: "trusted" for the user's own words and the
agent's own values (the clock, what a write did), "untrusted" for anything read from outside (files, query
rows, shell output, web bodies, MCP results), the tool's `provenance` stamped on every result it produced by
the executor. This module does not decide approval policy or run the agent loop; see `tools/execution.py`
for how a call is checked and run.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, create_model

from hermes_local.errors import UserError
from hermes_local.outcome import ErrorKind, Provenance
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.tools.traits import Traits

Permission = Literal["read", "write", "dangerous"]
AskUser = Callable[[str], str]  # a question -> the person's reply ("" when there is none)


class FactStore(Protocol):
    """Where `remember` writes a fact for future sessions (`longterm.LongTermMemory`)."""

    def add(self, text: str, *, trust: str = ...) -> int: ...


@dataclass
class ToolContext:
    """What a tool may know about the run: its workspace, settings and the run's own services.

    Injected, never from the model. The executor hands each call a copy (with that call's timeout);
    the objects the fields point to, `warned` included, are the run's and shared by every copy.
    """

    workspace: Path
    db_path: Path | None = None
    allow_hosts: list[str] = field(default_factory=list)
    output_cap: int = 8000
    timeout: float = 30.0
    notice: Callable[[str], None] | None = None  # where a tool's one-line notices go (the caller's sink)
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)  # how run_shell runs commands
    ask_user: AskUser | None = None  # asks the person (the caller's asker; None: nobody to ask)
    longterm: FactStore | None = None  # where `remember` writes (None: the default store)
    warned: set[str] = field(default_factory=set)  # one-time warnings already given in this run
    pin: PinnedWorkspace | None = None  # the run's workspace, opened once (every use goes through its fd)
    approval: str = ""  # how this call was approved (`Approver.decide`'s "how": "user" is the person's own yes)
    after_untrusted: bool = False  # the run had read (or recalled) untrusted content before this call


class ToolFailure(Exception):
    """Raised by a tool to report a failure with a specific kind (e.g. permission_denied)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Tool:
    """A callable tool: name, description, argument model, permission and limits."""

    name: str
    description: str
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    permission: Permission = "read"
    timeout: float | None = None
    repeatable: bool = False
    context_param: str | None = None
    volatile: bool = False  # its answer changes by itself (the clock): never served from the result cache
    cache_ttl: float | None = None  # seconds an identical read call's result is reused across runs (off: None)
    exclusive: bool = False  # never run concurrently with other calls (e.g. it talks to the user)
    # A JSON schema given as is (MCP tools); `arguments_model` then validates against it.
    input_schema: dict[str, Any] | None = None
    # Whether a read cache may serve this tool's results again (MCP tools: only with `cache = true`).
    cacheable: bool = True
    # Where its results' content comes from (see `Provenance`): tools are untrusted unless they say otherwise.
    provenance: Provenance = "untrusted"
    # After untrusted content, each call needs a fresh approval even though the tool is not dangerous
    # (dangerous tools always do): `remember` (it outlives the run), open-world MCP tools.
    fresh_after_untrusted: bool = False
    # What a call reaches, e.g. http_get's host: after untrusted content, a target already reached in this
    # run needs no fresh approval (None: every call does).
    reaches: Callable[[dict[str, Any]], str | None] | None = None
    # The argument that names a workspace file the tool writes (write_file: "path"): a file that runs code
    # later (`execute_later_files`) always asks first.
    writes_path: str | None = None
    # The hash of the definition its server gave (MCP tools; `tools/mcp/pins.py`): a changed one is refused.
    pin: str | None = None
    # What the guards, the plan, routing and the evals know about it without running it (`tools/traits.py`).
    traits: Traits = field(default_factory=Traits)

    def schema(self) -> dict[str, Any]:
        """OpenAI/Hermes function signature shown to the model inside <tools>."""
        if self.input_schema is not None:
            return {
                "type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
            }
        params = self.arguments_model.model_json_schema()
        # Validation rejects extra keys anyway; titles and additionalProperties only cost prompt tokens.
        params.pop("title", None)
        params.pop("additionalProperties", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def parameters_schema(self) -> dict[str, Any]:
        return self.schema()["function"]["parameters"]


_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Description (text before Args:) and per-argument descriptions from a Google-style docstring."""
    doc = inspect.cleandoc(doc or "")
    description_lines: list[str] = []
    arg_docs: dict[str, str] = {}
    section = "description"
    current: str | None = None
    arg_indent: int | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            section = "args"
            continue
        if stripped.lower() in ("returns:", "raises:", "examples:"):
            section = "other"
            continue
        if section == "description":
            description_lines.append(stripped)
        elif section == "args" and stripped:
            indent = len(line) - len(line.lstrip())
            m = _ARG_LINE.match(line)
            if m and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = m.group(1)
                arg_docs[current] = m.group(2).strip()
            elif current:
                arg_docs[current] += " " + stripped
    description = " ".join(" ".join(description_lines).split())
    return description, arg_docs


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    permission: Permission = "read",
    timeout: float | None = None,
    repeatable: bool = False,
    volatile: bool = False,
    cache_ttl: float | None = None,
    exclusive: bool = False,
    provenance: Provenance = "untrusted",
    fresh_after_untrusted: bool = False,
    reaches: Callable[[dict[str, Any]], str | None] | None = None,
    writes_path: str | None = None,
    validator: Callable[[Any], Any] | None = None,
    traits: Traits | None = None,
) -> Any:
    """Decorator: `@tool` or `@tool(permission="write", timeout=10)`. Returns the `Tool`.

    `volatile` read tools are never cached; `cache_ttl` (seconds) lets a read tool's results be
    reused across runs; `exclusive` tools never run concurrently with other calls of the same turn.
    `provenance="trusted"` declares results that hold no outside text (the agent's own values, the
    user's words); `fresh_after_untrusted`, `reaches` and `writes_path`: see `Tool`; `traits`: `tools/traits.py`.
    `validator(args)` checks the arguments together (a pydantic "after" model validator: `args` has one
    attribute per parameter; raise ValueError("start must be before end")); its error goes back to the
    model like any invalid argument.
    """

    def wrap(fn: Callable[..., Any]) -> Tool:
        from pydantic import Field, model_validator

        description, arg_docs = _parse_docstring(fn.__doc__ or "")
        hints = typing.get_type_hints(fn, include_extras=True)  # keeps Annotated[str, Field(max_length=...)]
        fields: dict[str, Any] = {}
        context_param = None
        for pname, param in inspect.signature(fn).parameters.items():
            annotation = hints.get(pname, str)
            if annotation is ToolContext:
                context_param = pname
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        checks: dict[str, Any] = {}
        if validator is not None:
            checks["_cross_field_check"] = model_validator(mode="after")(_returning_args(validator))
        model = create_model(  # type: ignore[call-overload]
            f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), __validators__=checks, **fields
        )
        return Tool(
            name=name or fn.__name__,
            description=description or fn.__name__,
            function=fn,
            arguments_model=model,
            permission=permission,
            timeout=timeout,
            repeatable=repeatable,
            context_param=context_param,
            volatile=volatile,
            cache_ttl=cache_ttl,
            exclusive=exclusive,
            provenance=provenance,
            fresh_after_untrusted=fresh_after_untrusted,
            reaches=reaches,
            writes_path=writes_path,
            traits=traits or Traits(),
        )

    return wrap(function) if function is not None else wrap


def _returning_args(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An "after" validator must return the model; a user's check may return None."""

    def after(args: Any) -> Any:
        result = check(args)
        return args if result is None else result

    return after


_VERB_NOUN = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def tool_warnings(t: Tool) -> list[str]:
    """What a tool author should fix: a name that is not `verb_noun`, a description that says nothing."""
    out = []
    if not _VERB_NOUN.fullmatch(t.name):
        out.append(f"tool {t.name!r}: name it verb_noun in snake case (e.g. get_weather, list_orders): models pick "
                   "tools by name")  # fmt: skip
    words = t.description.split()
    if len(words) < 3 or t.description == t.function.__name__:
        out.append(f"tool {t.name!r}: its description says nothing ({t.description!r}); write a docstring saying "
                   "what it does and returns")  # fmt: skip
    return out


class ToolRegistry:
    """The tools of one run by name, where each came from, and what to close when the run ends.

    `source` is "builtin", "module:PATH" or "mcp:SERVER"; a second tool with a taken name is refused
    with one line naming both sources. `add_closer` registers cleanup (e.g. stopping MCP servers)
    that `close()` runs once, last registered first; a `subset()` shares the cleanup of its parent.
    `failed_sources` maps a source that could not provide its tools (an MCP server that did not start)
    to its one-line reason; the agent logs each as an event.
    """

    def __init__(self, tools: Iterable[Tool] = (), *, source: str = "builtin") -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: dict[str, str] = {}
        self._closers: list[Callable[[], None]] = []
        self.failed_sources: dict[str, str] = {}
        self.left_out: dict[str, str] = {}  # tool -> why it is not offered in this run (toolsets.unusable)
        for t in tools:
            self.register(t, source=source)

    def register(self, t: Tool, *, source: str = "builtin") -> None:
        if not isinstance(t, Tool):
            raise TypeError(f"{t!r} is not a Tool; decorate the function with @tool")
        if t.input_schema is not None:  # a schema given as is (MCP): validation must never fetch a remote $ref
            from hermes_local.tools.schemas import SchemaRefused, check_refs

            try:
                check_refs(t.name, t.input_schema)
            except SchemaRefused as exc:
                raise UserError(f"{exc} (from {source})") from None
        if t.name in self._tools:
            raise UserError(
                f"tool name {t.name!r} from {source} is already taken by {self._sources[t.name]}; "
                "rename one of them (or leave one out)"
            )
        self._tools[t.name] = t
        self._sources[t.name] = source

    def source(self, name: str) -> str:
        return self._sources.get(name, "builtin")

    def subset(self, names: Iterable[str], *, share_cleanup: bool = True) -> ToolRegistry:
        """A registry with only `names` (in this registry's order), sharing this one's cleanup hooks (unless not
        `share_cleanup`: a sub-run's registry, whose end must not stop the caller's MCP servers)."""
        keep = set(names)
        out = ToolRegistry()
        for t in self._tools.values():
            if t.name in keep:
                out.register(t, source=self._sources[t.name])
        out._closers = self._closers if share_cleanup else []
        out.failed_sources = self.failed_sources
        out.left_out = self.left_out
        return out

    def add_closer(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def close(self) -> None:
        """Run the cleanup hooks (once); errors in one do not stop the others."""
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except Exception:  # noqa: BLE001 - cleanup at the end of a run must not mask its result
                pass

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]
