"""What every `hermes-local` command shares: the error mapping, `fail()`, terminal-safe text and options.

`HermesGroup` is the typer group class of the app: it maps any `HermesError` raised by a command to
`error: <one line>` on stderr and its exit code, in one place, and lets `hermes-local "task"` stand
for `hermes-local run "task"`. The `...Opt` aliases are the options several commands take, declared
once. `settings_from_flags(locals())` turns a command's flags into its settings, the same way for
every command. Does not build agents or hold command logic.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from hermes_local.config import ConfigChange, Settings, load_settings
from hermes_local.errors import HermesError, UserError
from hermes_local.textsafe import terminal_safe

if TYPE_CHECKING:  # typer >= 0.29 vendors click; only the type checker needs its Context
    from typer._click.core import Context

    from hermes_local.sandbox.workspace import PinnedWorkspace


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `error: message` (terminal-safe, one line) on stderr and exit with `code`."""
    typer.echo(f"error: {terminal_safe(' '.join(message.split()))}", err=True)
    raise typer.Exit(code)


class HermesGroup(TyperGroup):
    """The app's group: one error path for every command, and the `hermes-local TASK` shortcut."""

    default_command = "run"

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        escape_help_markup(self)  # before any --help of this group or a command below it is rendered
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            self._refuse_a_word_that_could_be_a_command(args[0])
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def _refuse_a_word_that_could_be_a_command(self, word: str) -> None:
        """`hermes-local "task"` takes only a task that cannot be a command: a single bare word (`history`,
        `sesions`) is a mistyped or future subcommand far more often than a task, so it is refused (exit 2)."""
        import difflib

        if not re.fullmatch(r"[A-Za-z][\w-]*", word):
            return
        close = difflib.get_close_matches(word.lower(), sorted(self.commands), n=1, cutoff=0.6)
        if close:
            fail(f"no command {word!r}; did you mean `hermes-local {close[0]}`? (a task: hermes-local run {word})")
        fail(f"no command {word!r} (see hermes-local --help); to give the agent this task: hermes-local run {word}")

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except HermesError as exc:
            fail(exc.line, exc.exit_code)


def escape_help_markup(command: Any) -> None:
    """Keep every literal bracket of the help texts: rich markup would swallow `[mcp.servers.NAME]`.

    Escapes (once) the help, short help and epilog of `command`, its parameters and every command below it.
    """
    from rich.markup import escape

    if getattr(command, "_markup_escaped", False):
        return
    command._markup_escaped = True
    for owner in (command, *getattr(command, "params", [])):
        for attr in ("help", "short_help", "epilog"):
            value = getattr(owner, attr, None)
            if isinstance(value, str):
                setattr(owner, attr, escape(value))
    for sub in (getattr(command, "commands", None) or {}).values():
        escape_help_markup(sub)


ModelOpt = Annotated[
    str | None,
    typer.Option(help="Registry name, path to a .gguf, or replay:FILE.jsonl (default: embedded SmolLM2)."),
]
NCtxOpt = Annotated[
    str | None,
    typer.Option(
        help="Context window in tokens (default 4096), or auto: the largest that fits, up to the trained length."
    ),
]
GpuOpt = Annotated[
    str | None,
    typer.Option(help="Layers offloaded to the GPU; -1 = all, 0 = CPU only, auto = the most that fit free memory."),
]
DraftOpt = Annotated[
    str | None,
    typer.Option(help="A small model of the same vocabulary that drafts tokens for the chat model (name or .gguf)."),
]
WorkspaceOpt = Annotated[Path, typer.Option(help="Folder the tools may read and write.")]
YesOpt = Annotated[
    bool, typer.Option("--yes", "-y", help="Approve write tool calls (dangerous ones need --allow NAME).")
]
AllowOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="Approve this tool without asking, or only where TOOL:GLOB matches, e.g. write_file:src/** (repeatable)."
    ),
]
SessionArg = Annotated[str, typer.Argument(help="A session ID from `sessions list`.")]
TrustContentOpt = Annotated[
    bool | None,
    typer.Option(
        "--trust-content",
        help="Trust what the run reads (files, web pages, command output, MCP results): --allow'ed dangerous "
        "calls then run unasked even after it, so text planted there can run them (config: trust_content).",
    ),
]
ToolsModuleOpt = Annotated[
    list[str] | None, typer.Option(help="Load @tool functions from a .py file or module (repeatable).")
]
ToolsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        help="Toolsets or tools the model may use, comma-separated or repeated, e.g. files,time__get_current_time "
        "(default: all; see `hermes-local tools list`).",
    ),
]
DbOpt = Annotated[Path | None, typer.Option(help="SQLite database for query_database (opened read-only).")]
AllowHostOpt = Annotated[
    list[str] | None, typer.Option(help="Host http_get may reach (repeatable; default: none, offline).")
]
NoPromptCacheOpt = Annotated[
    bool,
    typer.Option("--no-prompt-cache", help="Do not load or save the prompt prefix's KV state on disk."),
]
SandboxOpt = Annotated[
    str | None,
    typer.Option(help="Commands run in bubblewrap: auto (when it works), bwrap (required), off (default auto)."),
]
EngineOpt = Annotated[
    str | None,
    typer.Option(help="Where completions run: llama-cpp (in-process, default), llama-server or vllm (--engine-url)."),
]
EngineUrlOpt = Annotated[
    str | None, typer.Option(help="Base URL of the llama-server / vLLM engine (loopback or an --allow-host host).")
]
DialectOpt = Annotated[
    str | None,
    typer.Option(
        help="Prompt format: hermes, qwen, qwen3-coder, mistral, mistral-v3, llama3, gemma4, gemma3, "
        "harmony (gpt-oss), gguf (the model's own chat template), or auto (picked from the GGUF's template, and said). "
        "Default: models.toml chat_format, else detected from the GGUF."
    ),
]
InstructionsOpt = Annotated[
    str | None,
    typer.Option(help="Standing rules for the agent: TEXT, or @FILE to read them from a file (config: instructions)."),
]
TemperatureOpt = Annotated[float | None, typer.Option(help="Sampling temperature of tool-call steps (default 0.2).")]
AnswerTemperatureOpt = Annotated[
    float | None, typer.Option(help="Sampling temperature of final answers (default 0.7).")
]
ToolChoiceOpt = Annotated[
    str | None, typer.Option(help="auto: model decides; required: every step calls a tool; none: no tools.")
]
NoGrammarOpt = Annotated[bool, typer.Option("--no-grammar", help="Do not constrain tool calls with a grammar.")]
NoMemoryOpt = Annotated[
    bool, typer.Option("--no-memory", help="No long-term memory for this run: nothing recalled, no episode kept.")
]
AnswerGuardOpt = Annotated[
    bool | None,
    typer.Option(
        "--answer-guard/--no-answer-guard", help="Send back once an answer given without a tool the goal needs."
    ),
]


def confirm_on_terminal(change: ConfigChange) -> bool:
    """Ask the person at the terminal whether a safety-lowering config change made during a run is theirs."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False  # nobody to ask: refused with one line
    question = f"{terminal_safe(change.describe())}. Was that you, and should it be used?"
    return typer.confirm(question, default=False, err=True)


def read_instructions(value: str | None) -> str | None:
    """`--instructions` text, or the contents of FILE for `@FILE`; None when not given."""
    if value is None or not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--instructions {value}: cannot read {path} ({exc}); give an existing text file") from exc


SQLITE_MAGIC = b"SQLite format 3\x00"


def check_paths(
    *, workspace: Path | None = None, db: Path | None = None, tools_modules: list[str] | None = None
) -> None:
    """The paths a command line names, checked before the model loads and before any other output.

    A missing workspace, a `--db` that is not an SQLite file, or a `--tools-module` that is neither a file nor
    an importable module is one line naming the fix (UserError, exit 2), not a surprise mid-run.
    """
    import importlib.util

    if workspace is not None and not workspace.is_dir():
        raise UserError(f"workspace {workspace} is not a directory; create it or pass --workspace DIR")
    if db is not None:
        try:
            with db.expanduser().open("rb") as handle:
                head = handle.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise UserError(f"--db {db}: cannot open it ({exc.strerror}); give an existing SQLite file") from exc
        if head and head != SQLITE_MAGIC:
            raise UserError(f"--db {db} is not an SQLite database; give an SQLite file (.sqlite, .db)")
    for spec in tools_modules or []:
        if spec.endswith(".py") or "/" in spec:
            if not Path(spec).expanduser().is_file():
                raise UserError(f"--tools-module {spec} does not exist; give a .py file or an importable module")
            continue
        try:
            found = importlib.util.find_spec(spec)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise UserError(f"--tools-module {spec} is neither a .py file nor an importable module; check the name")


def _floats(text: str | None, flag: str) -> list[float] | None:
    if not text:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        fail(f"{flag} takes numbers separated by commas, e.g. 0.6,0.4")


# The flags that are not simply a setting of the same name.
OFF_FLAGS = {"no_grammar": "grammar", "no_prompt_cache": "prompt_cache", "no_memory": "memory"}  # --no-X sets X = false
ADDED_FLAGS = {  # repeatable flags that add to the configured list
    "allow": "allow_tools",
    "allow_host": "allow_hosts",
    "workspace_root": "workspace_roots",
    "cors_origin": "cors_origins",
    "serve_host": "serve_hosts",
}
RENAMED_FLAGS = {"token": "serve_token", "token_file": "serve_token_file"}


def settings_from_flags(flags: Mapping[str, Any]) -> Settings:
    """A command's settings: defaults < config file < environment < its flags.

    `flags` are the command's parameters (`locals()` at its top). Each one named like a setting sets it
    unless it is None (not given); `--no-grammar` / `--no-prompt-cache` turn theirs off; `--instructions
    @FILE` reads the file; `--tensor-split 0.6,0.4` becomes numbers; `--token` is `serve_token`
    (`--token-file`: `serve_token_file`); the repeatable `--allow`, `--allow-host`, `--workspace-root`,
    `--cors-origin` and `--serve-host` add to the configured
    lists. Parameters that are not settings (the task, --workspace, --json, ...) are left out.
    """
    overrides = {name: value for name, value in flags.items() if name in Settings.model_fields}
    overrides |= {RENAMED_FLAGS[name]: value for name, value in flags.items() if name in RENAMED_FLAGS}
    overrides |= {OFF_FLAGS[name]: False for name, value in flags.items() if name in OFF_FLAGS and value}
    if "instructions" in overrides:
        overrides["instructions"] = read_instructions(overrides["instructions"])
    if "tensor_split" in overrides:
        overrides["tensor_split"] = _floats(overrides["tensor_split"], "--tensor-split")
    settings = load_settings(overrides, confirm=confirm_on_terminal)
    added = {key: [*getattr(settings, key), *flags[name]] for name, key in ADDED_FLAGS.items() if flags.get(name)}
    return settings.model_copy(update=added) if added else settings


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def notice(line: str) -> None:
    """A one-line notice on stderr (e.g. an MCP server that did not start), terminal-safe."""
    typer.echo(terminal_safe(line), err=True)


def shielded_note(folder: Path) -> str | None:
    """One line naming the agent's own state and code a folder holds (kept from the tools), or None."""
    from hermes_local.sandbox.protect import STATE, found_in

    root = Path(os.path.realpath(folder))
    groups: dict[str, list[str]] = {}
    for item in found_in(root):
        shown = os.path.relpath(item.path, root) if item.path.startswith(f"{root}/") else item.path
        groups.setdefault(f"{item.what} [{'hidden' if item.kind == STATE else 'read-only'}]", []).append(shown)
    if not groups:
        return None
    parts = [f"{what} ({', '.join(paths)})" for what, paths in groups.items()]
    return f"the workspace {root} holds " + "; ".join(parts) + ": no tool may read or change them"


def pin_workspace(workspace: Path) -> PinnedWorkspace:
    """The run's workspace, opened once (UserError when it is missing or the agent's own)."""
    from hermes_local.sandbox.workspace import PinnedWorkspace

    return PinnedWorkspace.open(workspace)


def announce_shielded(pin: PinnedWorkspace) -> None:
    """The run's first line, when its workspace holds the agent's own state or code (kept from the tools)."""
    line = shielded_note(pin.path)
    if line:
        notice(f"note: {line}")


def parse_vars(items: list[str] | None) -> dict[str, str]:
    """`--var NAME=VALUE` options (workflow variables) as a dict; a malformed one is a one-line error."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--var {item!r}: write it as NAME=VALUE")
        out[key.strip()] = value
    return out
