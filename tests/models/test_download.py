"""Downloads through huggingface-hub against the stand-in hub on 127.0.0.1 (tests/fixtures/hub_server.py).

Covers: a download into the HF cache (HF_HOME, HF_TOKEN), a dropped connection that resumes with a
Range request, checksum mismatches (hub sha256 and pinned sha256) that delete the file, an unreachable
hub, a full disk, offline mode, missing file/revision, `--local-dir`, the CLI and the script.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import huggingface_hub.constants
import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.errors import UserError
from hermes_local.models.download import download_model
from hermes_local.models.registry import embedded_model_path, resolve_model
from tests.fixtures.hub_server import COMMIT, HubServer
from tests.models.test_gguf import make_gguf

REPO, FILE = "test-org/Tiny-GGUF", "tiny.Q8_0.gguf"
DATA = make_gguf()
ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def write_registry(home: Path, sha256: str | None = None, file: str = FILE) -> None:
    pin = f', sha256 = "{sha256}"' if sha256 else ""
    folder = home / "hermes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.toml").write_text(
        f'[models.tiny]\nrepo = "{REPO}"\ndefault_quant = "Q8_0"\naliases = ["tiny-test"]\n'
        f'[models.tiny.quants]\nQ8_0 = {{ file = "{file}", size = {len(DATA)}{pin} }}\n',
        encoding="utf-8",
    )


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch, hermetic_home: Path) -> Path:
    """Downloads allowed (the conftest sets HF_HUB_OFFLINE=1; huggingface-hub also reads it at import)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    write_registry(hermetic_home)
    return hermetic_home


def start_hub(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, **knobs: object) -> HubServer:
    lfs = bool(knobs.pop("lfs_redirect", True))
    hub = HubServer(lfs_redirect=lfs).start()
    request.addfinalizer(hub.stop)
    hub.add(REPO, FILE, DATA, **knobs)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    return hub


def blobs(home: Path) -> list[Path]:
    folder = home / "hf" / "hub" / "models--test-org--Tiny-GGUF" / "blobs"
    return [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []


def test_download_into_the_hf_cache_with_token(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    hub = start_hub(monkeypatch, request)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    messages: list[str] = []
    path = download_model("tiny", log=messages.append)
    assert path == online / "hf" / "hub" / "models--test-org--Tiny-GGUF" / "snapshots" / COMMIT / FILE
    assert path.read_bytes() == DATA and len(blobs(online)) == 1
    assert any("verifying sha256" in m for m in messages)
    heads = [r for r in hub.requests if r.method == "HEAD"]
    assert heads and all(r.authorization == "Bearer hf_test_token" for r in heads)
    gets = [r for r in hub.requests if r.method == "GET"]
    assert len(gets) == 1 and gets[0].path.startswith("/cdn/") and gets[0].authorization is None  # LFS redirect
    assert resolve_model("tiny") == path and resolve_model("tiny-test:q8_0") == path
    res = runner.invoke(app, ["models", "download", "tiny"])  # already there: no second transfer
    assert res.exit_code == 0 and res.stdout.strip() == str(path)
    assert len([r for r in hub.requests if r.method == "GET"]) == 1
    res = runner.invoke(app, ["models", "list"])
    assert res.exit_code == 0 and "tiny:Q8_0" in res.stdout and str(path) in res.stdout


def test_interrupted_transfer_resumes_with_range(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # huggingface-hub writes (and resumes) at DOWNLOAD_CHUNK_SIZE granularity: shrink it for a small file.
    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 1024)
    hub = start_hub(monkeypatch, request, lfs_redirect=False, drop_first_get_after=5000)
    path = download_model("tiny")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(DATA).hexdigest()
    gets = [r for r in hub.requests if r.method == "GET"]
    assert len(gets) == 2 and gets[0].range is None and gets[1].range == "bytes=4096-"
    assert hub.files[(REPO, FILE)].gets == 2


def test_hub_checksum_mismatch_is_refused_and_deleted(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    start_hub(monkeypatch, request, etag_override="0" * 64)
    with pytest.raises(UserError) as info:
        download_model("tiny")
    assert "sha256 mismatch" in str(info.value) and "the hub says" in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2
    assert blobs(online) == []
    snapshot = online / "hf" / "hub" / "models--test-org--Tiny-GGUF" / "snapshots" / COMMIT / FILE
    assert not snapshot.exists() and not snapshot.is_symlink()


def test_pinned_checksum_mismatch_through_the_cli(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    start_hub(monkeypatch, request)
    write_registry(online, sha256="ab" * 32)
    res = runner.invoke(app, ["models", "download", "tiny"])
    assert res.exit_code == 2 and "Traceback" not in res.stderr + res.stdout
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "sha256 mismatch" in errors[0] and "models.toml says" in errors[0]
    assert blobs(online) == []


def test_unreachable_hub_is_one_line(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(UserError, match="cannot reach the model hub at http://127.0.0.1") as info:
        download_model("tiny")
    assert "\n" not in str(info.value) and info.value.exit_code == 2
    res = runner.invoke(app, ["models", "download", "tiny"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith("error: cannot reach the model hub") and "Traceback" not in res.stderr


def test_disk_space_check_happens_before_the_transfer(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    hub = start_hub(monkeypatch, request)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**9, 10**9 - 100, 100))
    with pytest.raises(UserError, match="not enough disk space") as info:
        download_model("tiny")
    assert "41.86 KB" in str(info.value) and "100 B free" in str(info.value)
    assert not [r for r in hub.requests if r.method == "GET"] and blobs(online) == []


def test_offline_mode_never_touches_the_network(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    hub = start_hub(monkeypatch, request)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="HF_HUB_OFFLINE"):
        download_model("tiny")
    assert hub.requests == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    path = download_model("tiny", revision=COMMIT)  # a commit pin: refs/main never gets written
    seen = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert download_model("tiny") == path == resolve_model("tiny") and len(hub.requests) == seen


def test_missing_file_revision_and_names(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    start_hub(monkeypatch, request)
    with pytest.raises(UserError, match="revision 'v9' does not exist"):
        download_model("tiny", revision="v9")
    with pytest.raises(UserError, match="unknown model 'nope'"):
        download_model("nope")
    with pytest.raises(UserError, match="no quant 'Q2_K'"):
        download_model("tiny:Q2_K")
    assert download_model("smollm2") == embedded_model_path()  # a pip package, nothing to download
    write_registry(online, file="gone.gguf")
    with pytest.raises(UserError, match="gone.gguf is not in test-org/Tiny-GGUF@main"):
        download_model("tiny")


def test_local_dir_download_is_found_later(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    start_hub(monkeypatch, request)
    target = tmp_path / "models"
    res = runner.invoke(app, ["models", "download", "tiny:Q8_0", "--local-dir", str(target), "--revision", COMMIT])
    assert res.exit_code == 0, res.stderr
    assert (target / FILE).read_bytes() == DATA and blobs(online) == []
    assert resolve_model("tiny") == target / FILE


def test_script_wrapper_downloads(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    hub = start_hub(monkeypatch, request)
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    proc = subprocess.run(
        [sys.executable, "scripts/download_model.py", "tiny"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).read_bytes() == DATA and hub.files[(REPO, FILE)].gets == 1
    proc = subprocess.run(
        [sys.executable, "scripts/download_model.py", "nope"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown model 'nope'")


def test_a_stream_longer_than_the_declared_size_is_cut_there_and_refused(
    online: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Issue 26 item 8 (resources): a hub declaring 1,000 bytes made us write all 64 MB before refusing."""
    big = DATA + b"\0" * (64 * 1024 * 1024)
    write_registry(online)
    hub = start_hub(monkeypatch, request)
    hosted = hub.add(REPO, FILE, big, declared_size=1000)
    with pytest.raises(UserError) as info:
        download_model("tiny")
    assert "declared" in str(info.value) and "\n" not in str(info.value)
    assert all(p.stat().st_size <= 1000 for p in blobs(online))  # nothing past the declared size on disk
    assert hosted.sent < 16 * 1024 * 1024, hosted.sent  # the transfer stopped early (socket buffers aside)
