"""The built wheel carries prompts/, models.toml and the page of `serve`, and renders a prompt outside the checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_wheel_installs_and_renders_a_prompt(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = dist.glob("hermes_local-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hermes_local/_data/models.toml" in names
    assert "hermes_local/_data/prompts/chatml.jinja" in names and "hermes_local/_data/prompts/system.jinja" in names
    page = {f"hermes_local/service/static/{name}" for name in ("index.html", "app.js", "app.css")}
    assert page <= set(names), "the web page of `serve` must ship in the wheel"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    script = (
        "import hermes_local, hermes_local.prompts as p, hermes_local.config as c;"
        "assert '/venv/' in hermes_local.__file__, hermes_local.__file__;"
        "assert '_data' in str(c.data_path('prompts')), c.data_path('prompts');"
        "msgs = [{'role': 'user', 'content': 'hi'}];"
        "s = p.render('chatml.jinja', messages=msgs, add_generation_prompt=True, prefill='');"
        "print(s.text)"
    )
    out = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
