"""`FolderId` and `PinnedWorkspace.reopen`: a recorded folder is opened again by its identity, never through a link."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_local.errors import WorkspaceSwapped
from hermes_local.sandbox.workspace import FolderId, PinnedWorkspace, pin_recorded


def _recorded(folder: Path) -> FolderId:
    with PinnedWorkspace.open(folder) as pin:
        return pin.identity


def test_the_same_folder_reopens_and_a_folder_put_back_is_still_itself(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "proj"
    folder.mkdir(parents=True)
    recorded = _recorded(folder)
    assert FolderId.from_dict(recorded.to_dict()) == recorded
    (tmp_path / "a").rename(tmp_path / "b")
    with pytest.raises(WorkspaceSwapped, match=r"a is gone"):
        PinnedWorkspace.reopen(recorded, "session X")
    (tmp_path / "b").rename(tmp_path / "a")
    with PinnedWorkspace.reopen(recorded, "session X") as pin:
        assert pin.path == folder and (pin.dev, pin.ino) == (recorded.dev, recorded.ino)


def test_a_link_anywhere_on_the_path_is_refused_even_to_the_same_folder(tmp_path: Path) -> None:
    (tmp_path / "real" / "proj").mkdir(parents=True)
    recorded = _recorded(tmp_path / "real" / "proj")
    (tmp_path / "real").rename(tmp_path / "elsewhere")
    (tmp_path / "real").symlink_to(tmp_path / "elsewhere")  # the same folder, reached through a link now
    with pytest.raises(WorkspaceSwapped) as caught:
        PinnedWorkspace.reopen(recorded, "schedule nightly")
    line = caught.value.line
    assert f"workspace {tmp_path}/real/proj of schedule nightly" in line and f"{tmp_path}/real is a symlink now" in line
    assert f"leads to {tmp_path}/elsewhere/proj now" in line and "\n" not in line


def test_a_tampered_or_missing_identity(tmp_path: Path) -> None:
    for bad in (None, "x", {"path": "rel", "dev": 1, "ino": 2}, {"path": "/x", "dev": "1", "ino": 2}, {"path": "/x"}):
        assert FolderId.from_dict(bad) is None
    notes: list[str] = []
    with pin_recorded(None, tmp_path, "session old", notes.append) as pin:
        assert pin.path == tmp_path
    assert notes == [f"note: session old recorded no folder identity (an older version wrote it); using {tmp_path} "
                     "as it is now"]  # fmt: skip
