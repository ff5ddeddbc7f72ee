"""The README's map of the files names every module, script and test helper (a newcomer finds the room)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _map_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("## Map of the files") :]


def _mapped_files() -> list[Path]:
    found = [
        p for p in (ROOT / "hermes_local").rglob("*.py") if p.name != "__init__.py" or p.parent.name != "hermes_local"
    ]
    found += [p for p in (ROOT / "scripts").rglob("*") if p.is_file() and p.suffix in (".py", ".sh", ".toml")]
    found += [p for p in (ROOT / "tests" / "fixtures").glob("*.py") if p.name != "__init__.py"]
    return [p for p in found if "__pycache__" not in p.parts]


def test_the_map_names_every_file() -> None:
    section = _map_section()
    names = set(re.findall(r"[\w./-]+\.(?:py|sh|toml)", section)) | set(re.findall(r"[\w-]+/", section))
    missing = []
    for path in _mapped_files():
        rel = path.relative_to(ROOT).as_posix()
        shown = {rel, path.name, f"{path.parent.name}/{path.name}"}
        if path.name == "__init__.py":  # a district's face: its folder, as the map names it
            shown.add(f"{path.parent.name}/")
        if not shown & names:
            missing.append(rel)
    assert not missing, f"README's map does not mention: {missing}"


# -- every command line the README shows: the names in it resolve ---------------------------------------------
def _readme_commands() -> list[str]:
    """The `hermes-local ...` lines of the README's code blocks and of tests/eval/README.md."""
    lines = []
    for doc in (ROOT / "README.md", ROOT / "tests" / "eval" / "README.md"):
        text = doc.read_text(encoding="utf-8")
        for block in re.findall(r"```(?:sh|bash)?\n(.*?)```", text, re.S) + re.findall(r"^    (.*)$", text, re.M):
            lines += [line.strip() for line in block.splitlines() if line.strip().startswith("hermes-local ")]
    return lines


def _help_texts() -> str:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    runner = CliRunner()
    return "\n".join(runner.invoke(app, [*cmd, "--help"], terminal_width=400).stdout for cmd in (["run"], ["eval"]))


def test_every_model_name_in_the_docs_and_help_resolves() -> None:
    from hermes_local.models.registry import lookup

    names = re.findall(r"--model ([\w.:/-]+)", "\n".join(_readme_commands()) + "\n" + _help_texts())
    registry_names = [n for n in names if not n.startswith("replay:") and not n.endswith(".gguf") and n != "NAME"]
    assert registry_names, "the docs name no registry model"
    assert [n for n in registry_names if lookup(n) is None] == []


def test_the_quick_start_says_how_long_the_tests_take_and_what_skips_without_llama_server() -> None:
    quick = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"test command\s+takes about \d+ minutes", quick)
    skipping = [
        name
        for name in ("tests/engines/test_engines.py", "tests/engines/test_rpc.py")
        if "needs_server" in (ROOT / name).read_text() or "rpc-server" in (ROOT / name).read_text()
    ]
    assert all(name in quick for name in skipping) and "llama-server" in quick


# -- every hermes-local line of the README names real commands and options ---------------------------------------
def _argv(line: str) -> list[str]:
    import shlex

    return shlex.split(line.split("  #", 1)[0].split(" # ", 1)[0])


def _command_path(argv: list[str]) -> list[str]:
    from typer.main import get_command

    from hermes_local.cli.app import app

    group, path = get_command(app), []
    for word in argv[1:]:
        commands = getattr(group, "commands", None)
        if not commands or word not in commands:
            assert not (commands and path), f"{' '.join(argv)}: {word!r} is not a command of {' '.join(path)}"
            break
        group = commands[word]
        path.append(word)
    return path


def test_every_readme_command_and_option_exists() -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    runner, problems = CliRunner(), []
    for line in _readme_commands():
        for alternative in line.split(" | "):  # "models list | info NAME | download NAME[:QUANT]"
            argv = _argv(alternative if alternative.startswith("hermes-local") else f"{line.split()[0]} "
                         f"{line.split()[1]} {alternative}")  # fmt: skip
            path = _command_path(argv)
            if not path:
                continue  # `hermes-local "task"`: the run shortcut
            shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
            flags = [a.split("=")[0] for a in argv if a.startswith("--")]
            missing = [f for f in flags if f not in shown.stdout]
            if shown.exit_code != 0 or missing:
                problems.append((line, missing))
    assert problems == []


# -- the workflow example runs as written; the library snippets are complete -------------------------------------
def test_the_workflow_example_runs_as_the_readme_writes_it(tmp_path: Path, monkeypatch) -> None:
    import shutil
    import subprocess
    import sys

    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    make = next(line for line in text.splitlines() if line.startswith("python scripts/examples/make_orders_db.py"))
    run = next(line for line in _readme_commands() if line.startswith("hermes-local workflow run"))
    shutil.copytree(ROOT / "scripts" / "examples", tmp_path / "scripts" / "examples")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    before = runner.invoke(app, _argv(run)[1:])  # without the sample database: one line saying how to make it
    assert before.exit_code == 2 and "make_orders_db.py" in before.stderr and "tell the user" not in before.stderr
    subprocess.run([sys.executable, *_argv(make)[1:]], check=True, cwd=tmp_path, timeout=120)
    res = runner.invoke(app, _argv(run)[1:])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert list(tmp_path.glob("reports/daily-*.md")), "the workflow wrote no report"


def test_the_library_snippets_are_complete_and_their_imports_work() -> None:
    import ast
    import builtins

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        tree = ast.parse(block)
        defined = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                exec(compile(ast.Module([node], []), "<README>", "exec"), {})  # the import works
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.FunctionDef):
                defined |= {node.name, *(a.arg for a in node.args.args)}
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assert used - defined == set(), block


def test_the_eval_example_runs_as_written(monkeypatch) -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    line = next(line for line in _readme_commands() if "eval tests/eval/starter.jsonl --model replay:" in line)
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(app, _argv(line)[1:])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert not (ROOT / "eval-report.json").exists()  # the report went under $HERMES_LOCAL_HOME
