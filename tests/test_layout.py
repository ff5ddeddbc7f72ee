"""The house rules of the package layout: districts, their import rules, terminal writes, module size, faces.

The import rules themselves are import-linter contracts in pyproject.toml (`lint-imports`); this runs them
inside the suite, and checks on the source (`ast`) what import-linter cannot: that only `cli/` writes to
the terminal (rule 1: `tools/`, `session/`, `workflow/`, `service/` and the rest receive an asker or a
notice sink from the caller, or log), how many modules sit at the top, how long a module may grow, that
every package face declares `__all__`, and that `import hermes_local` loads nothing else of the package (its
public names load on first use).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hermes_local"
MAX_MODULE_LINES = 400
DISTRICTS = {
    "cli",
    "service",
    "agent",
    "dialects",
    "calls",
    "engines",
    "models",
    "tools",
    "evals",
    "workflow",
    "sandbox",
    "longterm",
    "runtime",
    "session",
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter is not installed (the test extra)")
def test_the_import_rules_between_districts_hold() -> None:
    res = subprocess.run(["lint-imports", "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_the_top_holds_only_ground_modules_and_districts() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 14, top
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == DISTRICTS
    top_tests = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert len(top_tests) <= 8, top_tests


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these along a seam (over {MAX_MODULE_LINES} lines): {long}"


def test_every_package_face_declares_all_and_importing_the_root_loads_nothing() -> None:
    missing = []
    for init in PACKAGE.rglob("__init__.py"):
        if init.parent == PACKAGE:
            continue
        names = {
            t.id
            for node in ast.parse(init.read_text()).body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        if "__all__" not in names:
            missing.append(init.relative_to(ROOT).as_posix())
    assert not missing, f"no __all__ in {missing}"
    probe = "import sys, hermes_local; print(sorted(m for m in sys.modules if m.startswith('hermes_local.')))"
    res = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr  # cheap: nothing loaded yet


def test_every_module_has_a_docstring() -> None:
    bare = [
        p.relative_to(ROOT).as_posix()
        for p in _modules()
        if p.name != "__main__.py" and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not bare, bare


# Names that reach the terminal: called as `print(...)`, or referenced as `sys.stdout` and the like.
TERMINAL_CALLS = {"print", "input"}
TERMINAL_ATTRIBUTES = {
    ("sys", name) for name in ("stdout", "stderr", "stdin", "__stdout__", "__stderr__", "__stdin__")
} | {
    ("typer", "echo"),
    ("typer", "secho"),
    ("typer", "prompt"),
    ("typer", "confirm"),
    ("click", "echo"),
    ("click", "secho"),
    ("traceback", "print_exc"),
    ("traceback", "print_exception"),
    ("traceback", "print_stack"),
    ("contextlib", "redirect_stdout"),
    ("contextlib", "redirect_stderr"),
}
# os calls whose file descriptor argument (`position`) is the terminal's when it is 0, 1 or 2.
FD_CALLS = {("os", "write"): 0, ("os", "read"): 0, ("os", "dup2"): 1}

# (file under hermes_local/, enclosing function): places outside cli/ allowed to touch the terminal streams.
ALLOWED = {
    # llama.cpp logs to fd 2 from C and through sys.stderr; this hides that output while the model runs
    # (it redirects the stream to /dev/null and back): it writes nothing.
    ("engines/inprocess/sampling.py", "quiet_stderr"),
}


def _dotted(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def terminal_uses(source: str) -> list[tuple[int, str, str]]:
    """(line, enclosing function, what) for each terminal write, read or redirection in `source`."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TERMINAL_CALLS:
            found.append((node.lineno, function, f"{node.func.id}()"))
        if isinstance(node, ast.Attribute) and _dotted(node) in TERMINAL_ATTRIBUTES:
            found.append((node.lineno, function, ".".join(_dotted(node) or ())))
        if isinstance(node, ast.ImportFrom) and node.module in {m for m, _ in TERMINAL_ATTRIBUTES}:
            for alias in node.names:
                if (node.module, alias.name) in TERMINAL_ATTRIBUTES:
                    found.append((node.lineno, function, f"from {node.module} import {alias.name}"))
        if isinstance(node, ast.Call) and (key := _dotted(node.func)) in FD_CALLS:
            position = FD_CALLS[key]  # type: ignore[index]
            fd = node.args[position] if len(node.args) > position else None
            if isinstance(fd, ast.Constant) and fd.value in (0, 1, 2):
                found.append((node.lineno, function, f"{'.'.join(key or ())}(fd {fd.value})"))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "")
    return found


_SAMPLE = (  # one of each kind, so a scan that finds nothing has looked
    "import sys, os, typer, traceback\nfrom sys import stderr\n"
    "def f():\n    print('x')\n    sys.stderr.write('x')\n    typer.echo('x')\n"
    "    traceback.print_exc()\n    os.write(2, b'x')\n    input()\n"
)
_SAMPLE_KINDS = [
    "from sys import stderr",
    "print()",
    "sys.stderr",
    "typer.echo",
    "traceback.print_exc",
    "os.write(fd 2)",
    "input()",
]


def test_only_cli_writes_to_the_terminal() -> None:
    assert [what for _, _, what in terminal_uses(_SAMPLE)] == _SAMPLE_KINDS
    assert terminal_uses("x = 'print(1); sys.stderr.write(2)'\nproc.stdout.read()\nos.write(fd, b'')\n") == []
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("cli/"):
            continue
        for line, function, what in terminal_uses(path.read_text(encoding="utf-8")):
            if (relative, function) not in ALLOWED:
                offenders.append(f"hermes_local/{relative}:{line}: {what} (in {function or 'the module'})")
    assert not offenders, "only cli/ writes to the terminal; pass an asker or a notice sink instead:\n" + "\n".join(
        offenders
    )
