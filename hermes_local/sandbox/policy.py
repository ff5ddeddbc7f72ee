"""The command sandbox: bubblewrap (`bwrap`) argv, the environment allow-list and resource limits.

`sandboxed_command(argv, workspace=...)` turns a program's argv into `(argv, env)` that run it inside
bwrap: a fresh root holding only the system's own directories (`/usr`, `/etc`, the `/bin`/`/lib`
links) and the Python interpreter's prefix read-only, a private size-capped `/tmp`, the workspace
read-write (or read-only; bound through its pinned fd when given), then the agent's own state hidden
and its code read-only over every bind (`protect.py`), new user/PID/IPC/UTS/network namespaces (no
network unless `allow_network`),
`--die-with-parent` and a cleared environment holding only the allow-listed variables. Limits
(processes, memory, CPU seconds, file size) ride in the argv through util-linux `prlimit`, so a
caller that can only pass argv and env (an MCP stdio client) gets them too; callers that run
`subprocess.Popen` themselves use `hermes_local.sandbox.procs.spawn`, which applies them in the child instead.
`SandboxPolicy` is the run's setting (`sandbox = auto | bwrap | off`) with the answer to "is it in
force, and why"; `SandboxPolicy.command(argv, workspace=...)` applies it to a long-lived program (an
MCP stdio server), making the program's own virtual environment visible (`program_dirs`) and raising
`SandboxRefused` when bwrap is required but missing; `find_command(name)` finds such a program beside the
running interpreter (its virtualenv's `bin/`), then on PATH. Does not start or kill processes (see
`procs.py`) and knows nothing about tools.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_local.safety import DEFAULT_ENV
from hermes_local.sandbox.protect import mask_args, program_dirs, root_only_masks
from hermes_local.sandbox.workspace import LAUNCH_FD, PinnedWorkspace

# The system's own directories, mounted read-only inside the sandbox when they exist.
SYSTEM_DIRS = ("/usr", "/etc")
# Top-level names that are links into /usr on merged-/usr systems, or real directories elsewhere.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Secrets that live among the configuration (readable when the agent runs as root): hidden inside.
HIDDEN_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/machine-id")
HIDDEN_DIRS = ("/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private", "/etc/NetworkManager/system-connections")
MB = 1024 * 1024
TMP_MB = 4096  # size cap of the sandbox's /tmp and /var/tmp (a tmpfs is half the RAM otherwise)


@dataclass(frozen=True)
class Limits:
    """Resource limits for one command (0 = no limit for that resource)."""

    processes: int = 256  # more processes (threads count) the command may have at once
    memory_mb: int = 4096  # address space per process
    cpu_seconds: int = 120  # CPU time per process
    file_size_mb: int = 1024  # largest file a process may write
    tmp_mb: int = TMP_MB  # size of the sandbox's /tmp (and /var/tmp); not an rlimit

    def rlimits(self, running_processes: int = 0) -> list[tuple[int, int]]:
        """(resource, value) pairs for setrlimit; the process cap counts the user's `running_processes` too."""
        import resource

        pairs = []
        if self.processes:
            pairs.append((resource.RLIMIT_NPROC, running_processes + self.processes))
        if self.memory_mb:
            pairs.append((resource.RLIMIT_AS, self.memory_mb * MB))
        if self.cpu_seconds:
            pairs.append((resource.RLIMIT_CPU, self.cpu_seconds))
        if self.file_size_mb:
            pairs.append((resource.RLIMIT_FSIZE, self.file_size_mb * MB))
        return pairs

    def describe(self) -> str:
        parts = [
            f"{self.processes} processes" if self.processes else "",
            f"{self.memory_mb} MB memory" if self.memory_mb else "",
            f"{self.cpu_seconds} s CPU" if self.cpu_seconds else "",
            f"{self.file_size_mb} MB files" if self.file_size_mb else "",
            f"{self.tmp_mb} MB /tmp" if self.tmp_mb else "",
        ]
        return ", ".join(p for p in parts if p) or "no limits"


def user_process_count(uid: int | None = None) -> int:
    """How many processes (threads included, as RLIMIT_NPROC counts them) the user runs now."""
    uid = os.getuid() if uid is None else uid
    count = 0
    if not os.path.isdir("/proc"):
        return 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return count


def filtered_env(allow: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Only the allow-listed variables of `environ` (default: this process's environment)."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in allow if name in source}


def interpreter_dirs() -> list[str]:
    """The running Python's prefixes (virtual environment and base install) outside the system dirs."""
    dirs: list[str] = []
    for prefix in (sys.prefix, sys.base_prefix):
        real = os.path.realpath(prefix)
        if not any(real == d or real.startswith(d + "/") for d in SYSTEM_DIRS) and real not in dirs:
            dirs.append(real)
    return dirs


def bwrap_args(
    workspace: Path | str,
    *,
    writable: bool = True,
    allow_network: bool = False,
    extra_ro: Sequence[str] = (),
    workspace_fd: int | None = None,
    tmp_mb: int = TMP_MB,
    extra_rw: Sequence[str] = (),
) -> list[str]:
    """The bwrap options (without the program) for a sandbox around `workspace` (`extra_rw`: existing paths
    bound read-write besides, e.g. a hook's audit log).

    With `workspace_fd` (an open directory fd bwrap inherits: a pinned workspace) the workspace is bound
    through it (`--bind-fd`), never by its path. The agent's own state and code (`protect.py`) are masked
    after every bind; as root, so is every file under /etc that others may not read.
    """
    ws = os.path.realpath(workspace)
    args = [
        shutil.which("bwrap") or "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--cap-drop",
        "ALL",
    ]
    if allow_network:
        args.append("--share-net")
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for name in SYSTEM_LINKS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    args += [a for f in HIDDEN_FILES if os.path.isfile(f) for a in ("--ro-bind", "/dev/null", f)]
    args += [a for d in HIDDEN_DIRS if os.path.isdir(d) for a in ("--tmpfs", d)]
    if os.geteuid() == 0:
        args += root_only_masks()  # what only root may read, by rule (the lists above are the usual ones)
    args += ["--proc", "/proc", "--dev", "/dev"]
    for tmp in ("/tmp", "/var/tmp"):
        args += [*(["--size", str(tmp_mb * MB)] if tmp_mb else []), "--tmpfs", tmp]
    visible = [d for d in [*interpreter_dirs(), *extra_ro] if os.path.exists(d)]
    for d in visible:
        args += ["--ro-bind", d, d]
    if workspace_fd is not None:
        args += ["--bind-fd" if writable else "--ro-bind-fd", str(workspace_fd), ws]
    else:
        args += ["--bind" if writable else "--ro-bind", ws, ws]
    rw = [os.path.realpath(p) for p in extra_rw if os.path.exists(p)]
    for path in rw:
        args += ["--bind", path, path]
    args += mask_args([(ws, writable), *((d, False) for d in visible), *((p, True) for p in rw)])  # nothing undoes
    args += ["--chdir", ws]
    return args


def sandbox_env(
    env_allow: Iterable[str], *, sandboxed: bool, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command gets: the allow-list, with HOME and PATH fixed up inside the sandbox."""
    env = filtered_env(env_allow, environ)
    if sandboxed:
        if "HOME" in env:
            env["HOME"] = "/tmp"  # the user's home is not mounted
        bins = [os.path.join(d, "bin") for d in interpreter_dirs()]
        path = [*bins, *(env.get("PATH") or "/usr/local/bin:/usr/bin:/bin").split(":")]
        env["PATH"] = ":".join(dict.fromkeys(p for p in path if p))
    return env


def sandboxed_command(
    argv: Sequence[str],
    *,
    workspace: Path | str,
    writable: bool = True,
    allow_network: bool = False,
    env_allow: Iterable[str] = DEFAULT_ENV,
    limits: Limits | None = None,
    use_bwrap: bool = True,
    extra_ro: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    pdeathsig: bool = True,
    workspace_fd: int | None = None,
    launcher: Sequence[str] = (),
    tmp_mb: int | None = None,
    extra_rw: Sequence[str] = (),
) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run `argv` in the sandbox (or, with `use_bwrap=False`, only limited and filtered).

    For callers that spawn with argv and env only (e.g. an MCP stdio client): the limits are applied by
    `prlimit`, and without bwrap a parent-death signal by `setpriv --pdeathsig KILL` where available
    (it fires when the *thread* that spawned the program exits: spawn long-lived servers from a
    long-lived thread). The working directory is the workspace inside bwrap; without bwrap pass
    `cwd=workspace` yourself. `workspace_fd`: bwrap binds the workspace through that inherited fd;
    `launcher`: an argv prefix run first (`PinnedWorkspace.launcher()`, which opens that fd).
    """
    prefix: list[str] = list(launcher)
    if pdeathsig and not use_bwrap and shutil.which("setpriv"):
        prefix += [shutil.which("setpriv") or "setpriv", "--pdeathsig", "KILL", "--"]
    if limits is not None and shutil.which("prlimit"):
        running = 0 if os.geteuid() == 0 else user_process_count()
        names = {"NPROC": "--nproc", "AS": "--as", "CPU": "--cpu", "FSIZE": "--fsize"}
        import resource

        by_value = {getattr(resource, "RLIMIT_" + k): v for k, v in names.items()}
        prefix += [shutil.which("prlimit") or "prlimit"]
        prefix += [f"{by_value[res]}={value}" for res, value in limits.rlimits(running)]
        prefix += ["--"]
    if use_bwrap:
        if tmp_mb is None:
            tmp_mb = limits.tmp_mb if limits is not None else TMP_MB
        options = bwrap_args(
            workspace,
            writable=writable,
            allow_network=allow_network,
            extra_ro=extra_ro,
            workspace_fd=workspace_fd,
            tmp_mb=tmp_mb,
            extra_rw=extra_rw,
        )
        prefix += [*options, "--"]
    return [*prefix, *argv], sandbox_env(env_allow, sandboxed=use_bwrap, environ=environ)


@functools.cache
def bwrap_status() -> tuple[bool, str]:
    """(works, why): whether bwrap can build this module's sandbox on this machine (checked once)."""
    path = shutil.which("bwrap")
    if path is None:
        return False, "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    probe = [*bwrap_args("/", writable=False), "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, env={"PATH": "/usr/bin:/bin"}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{path} failed to start ({exc})"
    if done.returncode != 0:
        why = " ".join(done.stderr.decode("utf-8", "replace").split())[:200] or f"exit {done.returncode}"
        return False, f"{path} cannot create namespaces here ({why})"
    return True, f"{path} works (user, PID, network namespaces)"


class SandboxRefused(Exception):
    """`sandbox = bwrap` is set but bwrap does not work: the program must not run."""


@dataclass(frozen=True)
class SandboxPolicy:
    """The run's sandbox setting (`auto`, `bwrap` or `off`), its environment allow-list and limits."""

    mode: str = "auto"
    env_allow: tuple[str, ...] = DEFAULT_ENV
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_settings(cls, settings: Any) -> SandboxPolicy:
        """From `config.Settings` (`sandbox`, `sandbox_env`, `sandbox_limits`)."""
        return cls(settings.sandbox, tuple(settings.sandbox_env), Limits(**settings.sandbox_limits.model_dump()))

    def in_force(self) -> tuple[bool, str]:
        """(sandboxed, why) for commands of this run."""
        if self.mode == "off":
            return False, "sandbox = off in the settings"
        works, why = bwrap_status()
        if works:
            return True, why
        return False, why

    def refusal(self) -> str | None:
        """Why a command must not run at all (sandbox = bwrap but bwrap does not work), else None."""
        sandboxed, why = self.in_force()
        if self.mode == "bwrap" and not sandboxed:
            return f"sandbox = bwrap is set but {why}"
        return None

    def describe(self) -> str:
        """One line for `doctor` and warnings: which sandbox is in force and why."""
        sandboxed, why = self.in_force()
        if sandboxed:
            return f"bwrap (sandbox = {self.mode}): {why}"
        if self.mode == "bwrap":
            return f"NONE, commands are refused (sandbox = bwrap): {why}"
        if self.mode == "off":
            return "none (sandbox = off): commands run with your rights, limited and with the filtered environment"
        return f"none, commands run unsandboxed (sandbox = auto): {why}"

    def command(
        self,
        argv: Sequence[str],
        *,
        workspace: Path | str,
        writable: bool = True,
        allow_network: bool = False,
        extra_ro: Sequence[str] = (),
        pin: PinnedWorkspace | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """(argv, env) for a long-lived program such as an MCP stdio server, under this policy.

        Sandboxed when bwrap is in force (its program's environment made visible by `program_dirs`),
        otherwise limited and with the filtered environment only. Raises `SandboxRefused` when
        `sandbox = bwrap` and bwrap does not work. Start it with cwd=workspace (with `pin`, the pinned
        workspace: `pin.proc_path()`; bwrap then binds it through its fd, by the launcher prefix).
        """
        refusal = self.refusal()
        if refusal:
            raise SandboxRefused(refusal)
        sandboxed, _ = self.in_force()
        visible = [*program_dirs(argv[0]), *extra_ro] if sandboxed and argv else list(extra_ro)
        return sandboxed_command(
            argv,
            workspace=workspace,
            writable=writable,
            allow_network=allow_network,
            env_allow=self.env_allow,
            limits=self.limits,
            use_bwrap=sandboxed,
            extra_ro=visible,
            workspace_fd=LAUNCH_FD if pin is not None and sandboxed else None,
            launcher=pin.launcher() if pin is not None and sandboxed else (),
        )

    def approval_note(self, *, allow_network: bool = False, writable: bool = True) -> str:
        """The line the approval prompt shows: sandboxed or not, and with which exceptions."""
        env = ", ".join(self.env_allow) or "none"
        limits = self.limits.describe()
        refusal = self.refusal()
        if refusal:
            return f"sandbox: none and the call will be refused ({refusal})"
        sandboxed, why = self.in_force()
        if not sandboxed:
            return f"sandbox: NONE, it runs with your full rights ({why}); env limited to {env}; limits {limits}"
        ws = "read-write" if writable else "read-only"
        net = "network ALLOWED" if allow_network else "no network"
        return f"sandbox: bwrap, workspace {ws}, {net}, env {env}; limits {limits}"


def find_command(command: str) -> str | None:
    """A stdio server's executable: a path as given, else beside the running interpreter (the virtualenv's `bin/`,
    where `pip install mcp-server-git` put it, active or not), else on PATH; None when it is in none of them."""
    if os.sep in command:
        return command if Path(command).expanduser().exists() else None
    beside = Path(sys.executable).parent / command  # not resolved: a venv's python is a link out of its bin/
    if command and beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(command) if command else None
