"""The safety defaults that the settings and the sandbox share: the agent's home, a command's environment, and
the workspace files that run code later.

`agent_home()` is the one rule for `$HERMES_LOCAL_HOME` (default `~/.hermes-local`): `config.home_dir()` reads
it, and `sandbox/protect.py` hides that folder from every tool. `DEFAULT_ENV` is the environment allow-list a
sandboxed command sees unless the `sandbox_env` setting says otherwise (`sandbox/policy.py` applies it).
`EXECUTE_LATER_FILES` is the default of the `execute_later_files` setting: workspace files whose writing always
asks (`tools/approval.py`). A ground module, so that `config.py` reads these without importing the sandbox;
imports nothing of the package and does nothing but name them.
"""

from __future__ import annotations

import os
from pathlib import Path

# Variables a command sees by default; everything else in the agent's environment (tokens, keys) is dropped.
DEFAULT_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME")

# Workspace files that run code later, unsandboxed and unasked (a git hook at the next commit, .envrc on `cd`, VS
# Code tasks on opening the folder, shell rc files, *.pth at the next Python start, CI workflows on push): writing
# one always asks, even under --yes / --allow. Globs, matched case-insensitively against the path and every trailing
# part of it. Not a Makefile: it runs only when the user types `make`, like any script (add "Makefile" to ask).
EXECUTE_LATER_FILES = tuple(
    """
    .git/* .husky/* .pre-commit-config.yaml .envrc .vscode/tasks.json .vscode/settings.json .vscode/launch.json .idea/*
    .bashrc .bash_profile .bash_login .bash_logout .profile .zshrc .zshenv .zprofile .zlogin .config/fish/*
    *.pth sitecustomize.py usercustomize.py
    .github/workflows/* .gitlab-ci.yml .circleci/* .travis.yml azure-pipelines.yml Jenkinsfile
""".split()
)


def agent_home() -> Path:
    """`HERMES_LOCAL_HOME`, default `~/.hermes-local` (not resolved)."""
    return Path(os.environ.get("HERMES_LOCAL_HOME") or Path.home() / ".hermes-local").expanduser()
