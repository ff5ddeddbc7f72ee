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
