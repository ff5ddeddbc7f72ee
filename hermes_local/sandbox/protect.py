"""The agent's own state and code: where they are, and the bwrap masks that keep every tool away from them.

Two kinds of protected path. **State** is `$HERMES_LOCAL_HOME` (config, prompt overrides, sessions, memory,
caches, checkpoints): hidden, replaced by an empty read-only tmpfs inside the sandbox. **Code** is what
runs the agent: the interpreter's prefixes (the virtual environment and its base install), its
`site-packages` folders (the user site too, when Python reads it), the `hermes_local` package folder and,
in a source checkout, its `prompts/` and `models.toml`: bound read-only, never hidden (MCP servers run
from there). `protected()` lists them (real paths, computed on each call: the home may be set late),
`covering(path)` says which one holds a path, `found_in(folder)` which ones a folder contains (for
`doctor` and the run's first line), and `mask_args(roots)` gives the bwrap options that apply them over
the bound `roots`; the policy appends them *after* every bind, shallowest first, so no later bind
undoes them. `root_only_masks()` hides, for an agent running as root, every file under /etc that
"others" may not read (by rule, not by a list). The home is `safety.agent_home()`, the one rule for
`$HERMES_LOCAL_HOME`. `program_dirs(program)` is the other side: what of a program's own code
(its virtual environment, its interpreter) must be visible read-only for it to start in the sandbox.
Refusing file-tool paths is `tools/effects/confined.py`'s job; this module only knows the paths.
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# EXECUTE_LATER_FILES and agent_home live in the ground module safety.py (config.py reads them there); tools/ still
# imports them from here until tools/ moves into rooms and imports them from safety.py.
from hermes_local.safety import EXECUTE_LATER_FILES as EXECUTE_LATER_FILES
from hermes_local.safety import agent_home

STATE, CODE = "state", "code"
_PACKAGE = Path(__file__).resolve().parents[1]  # hermes_local/
STATE_TMPFS_BYTES = 1024 * 1024  # the empty stand-in for the home needs no room


@dataclass(frozen=True)
class Protected:
    """One protected path: its real path, its kind (`state` or `code`) and what it is, for messages."""

    path: str
    kind: str
    what: str


def _code_paths() -> list[tuple[str, str]]:
    found = [
        (sys.prefix, "the Python environment running hermes-local"),
        (sys.exec_prefix, "the Python environment running hermes-local"),
        (sys.base_prefix, "the Python installation running hermes-local"),
        (sys.base_exec_prefix, "the Python installation running hermes-local"),
        (sys.executable, "the Python interpreter running hermes-local"),
    ]
    found += [(p, "the site-packages of the Python running hermes-local") for p in site.getsitepackages()]
    if site.ENABLE_USER_SITE:  # Python reads ~/.local/lib/pythonX.Y/site-packages/*.pth at every start
        found.append((site.getusersitepackages(), "the user site-packages Python reads at start"))
    found.append((str(_PACKAGE), "hermes-local's own code"))
    checkout = _PACKAGE.parent
    if not (_PACKAGE / "_data").exists():  # a source checkout: the shipped data lives beside the package
        what = "hermes-local's own prompts and model registry"
        found += [(str(checkout / name), what) for name in ("prompts", "models.toml")]
    return found


def protected() -> list[Protected]:
    """Every protected path (real paths, de-duplicated; code paths that do not exist are kept: see mask_args)."""
    out: dict[str, Protected] = {}
    home = os.path.realpath(agent_home())
    out[home] = Protected(home, STATE, "hermes-local's own home ($HERMES_LOCAL_HOME)")
    for raw, what in _code_paths():
        if not raw:
            continue
        real = os.path.realpath(raw)
        if real in ("/", "") or real in out or (what.startswith("the Python ") and _system(real)):
            continue  # a system Python (/usr): its site-packages stay protected, not all of /usr
        out[real] = Protected(real, CODE, what)
    return list(out.values())


_SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # = policy.py SYSTEM_DIRS + LINKS


def _system(path: str) -> bool:
    """Under the system directories, which the sandbox binds read-only anyway."""
    return any(path == d or path.startswith(d + "/") for d in _SYSTEM)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def covering(path: str | os.PathLike[str], paths: Sequence[Protected] | None = None) -> Protected | None:
    """The protected path that holds `path` (given resolved, or resolved here), or None."""
    real = os.path.realpath(path)
    best = None
    for item in protected() if paths is None else paths:
        if _under(real, item.path) and (best is None or len(item.path) > len(best.path)):
            best = item
    return best


def found_in(folder: str | os.PathLike[str]) -> list[Protected]:
    """The protected paths that exist inside `folder`, or that hold it (doctor and the run's first line say so)."""
    root = os.path.realpath(folder)
    return [p for p in protected() if os.path.lexists(p.path) and (_under(p.path, root) or _under(root, p.path))]


def mask_args(roots: Iterable[tuple[str, bool]]) -> list[str]:
    """bwrap options that hide the state and freeze the code wherever a bound root (path, writable) shows them.

    To be appended after every other bind. A missing path under a writable root is masked too (bwrap
    creates an empty folder for it), so a command cannot plant a home or a user site the agent reads later.
    """
    bound = [(os.path.realpath(r), w) for r, w in roots]
    args: list[str] = []
    for item in sorted(protected(), key=lambda p: p.path.count("/")):  # deeper masks win
        over = [w for r, w in bound if _under(item.path, r) or _under(r, item.path)]
        if not over:
            continue
        exists = os.path.lexists(item.path)
        writable_over = any(over)
        if item.kind == STATE:
            if exists and not os.path.isdir(item.path):
                args += ["--ro-bind", "/dev/null", item.path]
            elif exists or writable_over:
                args += ["--size", str(STATE_TMPFS_BYTES), "--tmpfs", item.path, "--remount-ro", item.path]
        elif not writable_over:
            continue  # code under read-only binds only is read-only already
        elif exists:
            args += ["--ro-bind", item.path, item.path]
        elif not os.path.splitext(item.path)[1]:  # a missing folder (not models.toml)
            args += ["--size", str(STATE_TMPFS_BYTES), "--tmpfs", item.path, "--remount-ro", item.path]
    return args


MAX_SCAN = 20_000  # entries of /etc looked at for root-only files


@functools.cache
def root_only_masks(root: str = "/etc") -> tuple[str, ...]:
    """bwrap options masking what only root may read under `root` (once per process; for a root agent).

    By rule, not by list: a file that "others" cannot read becomes /dev/null, a folder "others" cannot
    list or enter becomes an empty tmpfs (and is not looked into). Symlinks are left alone (their target
    is judged where it lies).
    """
    args: list[str] = []
    stack, seen = [root], 0
    while stack and seen < MAX_SCAN:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if mode & 0o005 != 0o005:
                    args += ["--tmpfs", entry.path]
                else:
                    stack.append(entry.path)
            elif stat.S_ISREG(mode) and not mode & 0o004:
                args += ["--ro-bind", "/dev/null", entry.path]
    return tuple(args)


def _outside_system(path: str) -> bool:
    return not any(path == d or path.startswith(d + "/") for d in _SYSTEM)


def _python_prefix(path: str) -> str | None:
    """The virtual environment or Python installation holding `path` (…/bin/x → …), if it is one.

    Only a venv (`pyvenv.cfg`) or a prefix with its own `bin/python3` counts, so `~/.local/bin/x`
    never exposes `~/.local`, and `/` or a system directory is never returned.
    """
    root = os.path.dirname(os.path.dirname(path))
    if root in ("/", "") or not _outside_system(root) or os.path.dirname(path) != os.path.join(root, "bin"):
        return None
    if os.path.isfile(os.path.join(root, "pyvenv.cfg")) or os.path.exists(os.path.join(root, "bin", "python3")):
        return root
    return None


def program_dirs(program: str) -> list[str]:
    """What must be visible (read-only) inside the sandbox for `program` to start, beyond the system dirs.

    For a program inside a Python virtual environment or install (e.g. `~/.venvs/x/bin/mcp-server-time`),
    that environment's root, the base installation its `pyvenv.cfg` points at, and the same for the
    interpreter named on its `#!` line; for any other program outside the system directories, the
    file itself. Nothing else of the user's home becomes visible.
    """
    found = shutil.which(program) or program
    if not os.path.exists(found):
        return []
    exe = os.path.realpath(found)
    candidates = [os.path.abspath(found), exe]
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        first = b""
    if first.startswith(b"#!"):
        words = first[2:].decode("utf-8", "replace").split()
        if words and os.path.basename(words[0]) == "env" and len(words) > 1:
            words = [shutil.which(words[1]) or words[1]]
        if words and os.path.exists(words[0]):
            candidates += [os.path.abspath(words[0]), os.path.realpath(words[0])]
    dirs: list[str] = []
    for path in candidates:
        if not _outside_system(path):
            continue
        root = _python_prefix(path)
        extra = [root] if root else [path]
        cfg = os.path.join(root, "pyvenv.cfg") if root else ""
        if cfg and os.path.isfile(cfg):
            for line in Path(cfg).read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    base = os.path.dirname(os.path.realpath(value.strip()))
                    if _outside_system(base):
                        extra.append(base)
        dirs += [d for d in extra if d not in dirs]
    return dirs
