"""The house rules of the package layout: districts, their import rules, module size and package faces.

The import rules themselves are import-linter contracts in pyproject.toml (`lint-imports`); this runs them
inside the suite, and checks what import-linter cannot: how many modules sit at the top, how long a module
may grow, that every package face declares `__all__`, and that `hermes_local/__init__.py` imports nothing.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
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


def test_every_package_face_declares_all_and_the_root_imports_nothing() -> None:
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
    root = ast.parse((PACKAGE / "__init__.py").read_text())
    assert not [n for n in ast.walk(root) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_every_module_has_a_docstring() -> None:
    bare = [
        p.relative_to(ROOT).as_posix()
        for p in _modules()
        if p.name != "__main__.py" and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not bare, bare
