"""A pinned workspace and the sandbox's bounds, with real folders, a real bwrap sandbox and a real `serve`.

Issue 26 item 3: a queued run's workspace swapped for a symlink by another run (sandboxed, allowed
`run_shell`) must be refused, never redirected. Item 8, sandbox: /tmp is size-capped, root-only files
are masked by rule, set-id bits a command leaves in the workspace are stripped. Each failed before.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.engines.replay import tool_call_text
from hermes_local.sandbox.workspace import PinnedWorkspace
from hermes_local.session import read_events, sessions_dir
from hermes_local.testing import ScriptedLLM, build_agent
from tests.fixtures.service_server import http, served, wait_status
from tests.sandbox.test_sandbox import needs_bwrap, shell

SECRET = "TOPSECRET-pinned-3f0a"


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    parent, outside = tmp_path / "parent", tmp_path / "outside"
    (parent / "b").mkdir(parents=True)
    outside.mkdir()
    (parent / "b" / "secret.txt").write_text("b's own file\n", encoding="utf-8")
    (outside / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    return {"parent": parent, "b": parent / "b", "outside": outside}


@needs_bwrap
def test_a_queued_runs_workspace_swapped_by_another_run_is_refused_not_followed(roots: dict[str, Path]) -> None:
    swap = f"sleep 1; mv b b.orig && ln -s {roots['outside']} b && echo swapped"
    llm = ScriptedLLM(
        [
            tool_call_text("run_shell", command=swap),  # run A, in the parent folder
            "A done.",
            tool_call_text("read_file", path="secret.txt"),  # run B, queued meanwhile, in parent/b
            tool_call_text("run_shell", command="echo planted > planted.txt"),
            "B done.",
        ],
        n_ctx=100_000,
    )
    settings = {"allow_tools": ["run_shell"], "workspace_roots": [str(roots["parent"])], "tool_timeout": 8.0}
    with served(llm, roots["parent"], **settings) as (base, _):
        _, run_a = http("POST", f"{base}/v1/runs", {"task": "Tidy up."})
        status, run_b = http("POST", f"{base}/v1/runs", {"task": "Read the secret.", "workspace": "b"})
        assert status == 202, run_b
        view_a = wait_status(base, run_a["id"], {"done", "error"})
        view_b = wait_status(base, run_b["id"], {"done", "error"})
    assert "swapped" in str(view_a["result"]), view_a  # run A did swap the folder
    assert (roots["parent"] / "b").is_symlink()
    assert view_b["status"] == "error" and "changed after the run was accepted" in view_b["error"], view_b
    assert not (roots["outside"] / "planted.txt").exists()
    logged = sessions_dir() / f"{run_b['id']}.jsonl"  # a refused run may leave no log at all
    assert not logged.exists() or SECRET not in "".join(str(e.to_dict()) for e in read_events(logged))


@needs_bwrap
def test_a_pinned_workspace_is_used_through_its_fd_after_a_swap(roots: dict[str, Path]) -> None:
    pin = PinnedWorkspace.open(roots["b"])
    try:
        roots["b"].rename(roots["parent"] / "b.orig")
        roots["b"].symlink_to(roots["outside"])
        llm = ScriptedLLM([tool_call_text("read_file", path="secret.txt"), "Done."])
        with pytest.raises(Exception, match="changed after the run was accepted"):
            build_agent(llm, load_settings({}), workspace=pin)
        from hermes_local.tools import ToolContext
        from hermes_local.tools.builtin.files import read_file
        from hermes_local.tools.builtin.shell import run_shell

        ctx = ToolContext(workspace=roots["b"], pin=pin)
        assert "b's own file" in str(read_file.function(path="secret.txt", ctx=ctx).data)  # never the outside
        refused = None
        try:
            run_shell.function(command="echo planted > planted.txt", ctx=ctx)
        except Exception as exc:  # noqa: BLE001 - the ToolFailure the executor would report
            refused = str(exc)
        assert refused and "changed after the run was accepted" in refused
        assert not (roots["outside"] / "planted.txt").exists()
    finally:
        pin.close()


@needs_bwrap
def test_sandbox_tmp_is_size_capped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _, responses = shell(ws, "df -k /tmp /var/tmp | tail -n 2")
    sizes = [int(kb) for kb in re.findall(r"tmpfs +(\d+)", responses[0].split("</tool_response>")[0])]
    assert len(sizes) == 2 and all(kb <= 4096 * 1024 for kb in sizes), responses[0]


def _root_only_file() -> Path | None:
    from hermes_local.sandbox.policy import HIDDEN_FILES

    for folder, _, files in os.walk("/etc"):
        for name in files:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if (
                stat.S_ISREG(info.st_mode)
                and not info.st_mode & 0o004
                and info.st_size
                and str(path) not in HIDDEN_FILES
            ):
                return path
    return None


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="only a root agent can read root-only files")
def test_root_only_files_outside_the_hide_list_are_masked_by_rule(tmp_path: Path) -> None:
    target = _root_only_file()
    if target is None:
        pytest.skip("no root-only file under /etc on this machine")
    ws = tmp_path / "ws"
    ws.mkdir()
    _, responses = shell(ws, f"wc -c < {target}")
    size = target.stat().st_size  # what a root command could read before: the file's real length
    assert f'"stdout": "{size}\\n"' not in responses[0], (target, responses[0])
    assert '"stdout": "0\\n"' in responses[0] or "Permission denied" in responses[0]  # /dev/null over it


@needs_bwrap
def test_set_id_bits_a_command_leaves_in_the_workspace_are_stripped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    mine = ws / "kept"
    mine.write_text("x")
    mine.chmod(0o755)
    make = "cp /bin/true sub/rootshell && chmod 4755 sub/rootshell && touch g && chmod 2755 g && ls -l sub/rootshell"
    _, responses = shell(ws, make)
    assert "rws" in responses[0]  # inside, the bit was set
    assert not (ws / "sub" / "rootshell").stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert not (ws / "g").stat().st_mode & stat.S_ISGID
    assert "Set-user/group-ID bits were removed from" in responses[0]


@needs_bwrap
def test_a_sandboxed_mcp_server_starts_in_the_pinned_folder_not_the_swapped_path(roots: dict[str, Path]) -> None:
    import sys

    from hermes_local.config import McpServerConfig
    from hermes_local.sandbox.policy import SandboxPolicy
    from hermes_local.tools.mcp import McpManager

    pin = PinnedWorkspace.open(roots["b"])
    original = roots["parent"] / "b.orig"
    try:
        roots["b"].rename(original)
        roots["b"].symlink_to(roots["outside"])  # swapped after the run was accepted
        script = f"echo marker > planted.txt; cat secret.txt > seen.txt; exec {sys.executable} -m mcp_server_time"
        config = McpServerConfig(command="/bin/sh", args=["-c", script])
        manager = McpManager({"time": config}, sandbox=SandboxPolicy("bwrap"), workspace=pin)
        try:
            names = [tool.name for tool, _ in manager.tools()]
        finally:
            manager.close()
    finally:
        pin.close()
    assert "time__get_current_time" in names  # started through the launcher and --bind-fd
    assert (original / "planted.txt").exists() and not (roots["outside"] / "planted.txt").exists()
    assert (original / "seen.txt").read_text(encoding="utf-8") == "b's own file\n"


def _cgroup_roots() -> list[str]:
    """Mount points of the pids (v1) and unified (v2) cgroup hierarchies, from /proc/self/mountinfo."""
    roots = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _, options = (right.split(" ") + ["", "", ""])[:3]
        if fstype == "cgroup2" or (fstype == "cgroup" and "pids" in options.split(",")):
            roots.append(left.split(" ")[4])
    return roots


@pytest.mark.skipif(os.geteuid() != 0, reason="the escape needs a root command")
def test_a_root_command_outside_bwrap_cannot_leave_its_pids_cgroup(tmp_path: Path) -> None:
    from hermes_local.sandbox import cgroup

    if cgroup.cage_root() is None:
        pytest.skip("no writable pids cgroup here: commands have no cage")
    ws = tmp_path / "ws"
    ws.mkdir()
    roots = _cgroup_roots()
    moves = " ; ".join(
        f"echo $$ > {root}/cgroup.procs && echo MOVED; echo $$ > /proc/1/root{root}/cgroup.procs && echo MOVED"
        for root in roots
    )
    remount = f"mount -o remount,rw {roots[0]} && echo REMOUNTED"
    _, responses = shell(ws, f"{moves}; {remount}; echo kept > ok.txt", sandbox="off")
    assert "MOVED" not in responses[0].split("Done so far")[0] and "REMOUNTED" not in responses[0], responses[0]
    assert (ws / "ok.txt").read_text() == "kept\n"  # an ordinary command still works
