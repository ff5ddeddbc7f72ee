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
