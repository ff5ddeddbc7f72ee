"""Checkpoints, diff and undo on real files, real sessions and real bwrap (issue 31, items 1-2).

A scripted model drives real runs through `build_agent` with a session log; the checkpoint store is the
real one under the test's `HERMES_LOCAL_HOME`. Trees are compared by hashing every path, type, mode and
content. Tests that need bwrap skip with the reason where it does not work.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_local.config import home_dir, load_settings
from hermes_local.errors import UserError
from hermes_local.sandbox.policy import bwrap_status
from hermes_local.session import SessionLog
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, Executor, ToolContext, ToolRegistry, default_registry, tool
from hermes_local.tools.effects.checkpoints import CheckpointStore, Recorder
from hermes_local.tools.effects.undo import diff_text, session_diff, undo_session

call = tool_call_text
BWRAP_WORKS, BWRAP_WHY = bwrap_status()
needs_bwrap = pytest.mark.skipif(not BWRAP_WORKS, reason=f"bwrap sandbox unavailable here: {BWRAP_WHY}")


def tree_hash(root: Path) -> str:
    """One hash of every path under `root`: its type, permission bits and content (links by target)."""
    h = hashlib.sha256()
    for base, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(dirs + files):
            p = Path(base, name)
            info = p.lstat()
            h.update(f"{p.relative_to(root)}\0{info.st_mode:o}\0".encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


def run_session(workspace: Path, outputs: list[str], sandbox: str = "auto", max_steps: int = 30) -> str:
    """Run the scripted outputs as a real session (writes and commands allowed); returns its ID."""
    settings = load_settings({"max_steps": max_steps, "sandbox": sandbox, "trust_content": True})
    approver = Approver(allow=["write_file", "append_to_memo", "run_shell"], interactive=False)
    with SessionLog() as log:
        agent = build_agent(
            ScriptedLLM(outputs), settings, workspace=workspace, registry=default_registry(), approver=approver,
            on_event=log, session_id=log.id,
        )  # fmt: skip
        with agent:
            result = agent.run("change files")
    assert all(c.ok for c in result.tool_calls), [c.error for c in result.tool_calls if not c.ok]
    return log.id


def seed(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("first line\nsecond line\n")
    (workspace / "data").mkdir()
    (workspace / "data" / "table.csv").write_text("a,b\n1,2\n")
    (workspace / "data" / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (workspace / "keep.sh").write_text("echo hi\n")
    (workspace / "keep.sh").chmod(0o755)


def twenty_steps() -> list[str]:
    """20 steps: 10 writes (write_file and append_to_memo), 5 shell commands, 5 reads, then the answer."""
    steps = []
    reads = [("read_file", {"path": "notes.txt"}), ("list_dir", {"path": "."}), ("list_dir", {"path": "data"}),
             ("read_file", {"path": "data/table.csv"}), ("get_current_time", {})]  # fmt: skip
    for i in range(5):
        steps.append(call("write_file", path=f"out/report{i}.md", content=f"# report {i}\n" * (i + 1)))
        steps.append(call("append_to_memo", content=f"note {i}"))
        steps.append(call(reads[i][0], **reads[i][1]))
    steps += [
        call("write_file", path="notes.txt", content="rewritten\n"),
        call("run_shell", command="echo more >> data/table.csv && rm data/blob.bin"),
        call("run_shell", command="mkdir -p made/deep && echo x > made/deep/x.txt && ln -s ../notes.txt made/link"),
        call("run_shell", command="chmod 600 keep.sh && printf 'new\\0bin' > data/new.bin"),
        call("run_shell", command="mv data/table.csv data/moved.csv"),
        call("run_shell", command="rm -r out/report0.md"),
    ]
    return steps + ["All done."]


@needs_bwrap
def test_undo_of_a_twenty_step_run_gives_a_byte_identical_tree(workspace: Path) -> None:
    seed(workspace)
    before = tree_hash(workspace)
    session = run_session(workspace, twenty_steps(), sandbox="bwrap")
    assert tree_hash(workspace) != before
    text = diff_text(session_diff(session))
    assert "+rewritten" in text and "-first line" in text and "b/out/report3.md" in text
    assert "data/blob.bin: 1024 bytes" in text and "-> absent" in text
    report = undo_session(session)
    assert not report.refused, report.refused
    assert tree_hash(workspace) == before
    assert not (workspace / "out").exists() and not (workspace / "made").exists()
    # the undo was recorded: redo brings the run's result back, and undo again restores the start
    undo_session(session, redo=True)
    assert (workspace / "notes.txt").read_text() == "rewritten\n" and (workspace / "made/deep/x.txt").exists()
    undo_session(session)
    assert tree_hash(workspace) == before


def test_undo_to_a_step_keeps_the_earlier_steps(workspace: Path) -> None:
    session = run_session(
        workspace,
        [call("write_file", path="a.txt", content="one\n"), call("write_file", path="a.txt", content="two\n"),
         call("write_file", path="b/c.txt", content="three\n"), "ok"],
    )  # fmt: skip
    step2 = session_diff(session, step=2)
    assert [d.path for d in step2] == ["a.txt"] and "-one\n+two\n" in step2[0].text
    undo_session(session, to_step=2)
    assert (workspace / "a.txt").read_text() == "one\n" and not (workspace / "b").exists()


def test_undo_refuses_a_file_the_user_edited_unless_forced(workspace: Path) -> None:
    (workspace / "mine.txt").write_text("original\n")
    session = run_session(
        workspace,
        [call("write_file", path="mine.txt", content="by the agent\n"),
         call("write_file", path="other.txt", content="new\n"), "ok"],
    )  # fmt: skip
    (workspace / "mine.txt").write_text("the user's own edit\n")
    report = undo_session(session)
    assert [p for p, _ in report.refused] == ["mine.txt"] and "changed since the run" in report.refused[0][1]
    assert (workspace / "mine.txt").read_text() == "the user's own edit\n"
    assert not (workspace / "other.txt").exists()  # the other file was still undone
    undo_session(session, force=True)
    assert (workspace / "mine.txt").read_text() == "original\n"


def test_checkpoints_live_in_the_home_and_are_deduplicated(workspace: Path) -> None:
    (workspace / "f0.txt").write_text("PREVIOUS-CONTENT-31\n")
    session = run_session(
        workspace,
        [call("write_file", path=f"f{i}.txt", content="same content\n") for i in range(3)] + ["ok"],
    )
    store = CheckpointStore()
    assert store.root == home_dir() / "checkpoints" and len(store.records(session)) == 3
    assert store.size()[0] == 2  # the previous content and the new one, kept once for three writes
    assert "PREVIOUS-CONTENT-31" not in (home_dir() / "sessions" / f"{session}.jsonl").read_text()
    assert sorted(p.name for p in workspace.iterdir()) == ["f0.txt", "f1.txt", "f2.txt"]


def test_retention_drops_the_oldest_sessions_first(workspace: Path) -> None:
    import random

    rng = random.Random(0)
    first = run_session(workspace, [call("write_file", path="x.txt", content=rng.randbytes(200_000).hex()), "ok"])
    second = run_session(workspace, [call("write_file", path="y.txt", content=rng.randbytes(200_000).hex()), "ok"])
    store = CheckpointStore()
    assert store.size()[1] > 400_000  # two objects of about 220 kB (hex digits compress to about 55%)
    assert store.prune(300_000) == []  # sessions of the last minutes may still be running: kept
    for age, session in ((7200, first), (3600, second)):  # as if the runs were two hours and one hour ago
        for record in store.records(session):
            for path in [store.index / f"{session}.jsonl", *(store._object_path(c["after"]["sha"]) for c in
                                                            record["changes"])]:  # fmt: skip
                os.utime(path, (time.time() - age,) * 2)
    dropped = store.prune(300_000)
    assert dropped == [first] and [s for s, _, _ in store.sessions()] == [second]
    assert store.size()[1] <= 300_000
    with pytest.raises(UserError, match="has no checkpoints"):
        undo_session(first)


KILLED_WRITER = """
import sys
from pathlib import Path
from hermes_local.tools.effects.checkpoints import CheckpointStore, Recorder
from hermes_local.tools.effects.confined import locate
from hermes_local.tools.effects import confined
from hermes_local.tools.registry import ToolContext

real_replace = confined.os.replace
def slow_replace(src, dst, **kwargs):
    if str(src).startswith(".hermes-write."):  # the workspace write (the store's own renames go through)
        print("ready", flush=True)
        import time; time.sleep(60)  # killed here: the new content is written, not yet renamed into place
    return real_replace(src, dst, **kwargs)
confined.os.replace = slow_replace
workspace = Path(sys.argv[1])
rec = Recorder(CheckpointStore(), "killed-session", str(workspace), step=1)
with rec.call("write_file"), locate(ToolContext(workspace=workspace), "big.txt") as loc:
    confined.write_atomically(loc, b"N" * 20_000_000)
"""


def test_kill_9_during_a_large_write_leaves_the_old_file_and_undo_restores_it(workspace: Path) -> None:
    old = b"old content\n" * 100_000
    (workspace / "big.txt").write_bytes(old)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(workspace)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert (workspace / "big.txt").read_bytes() == old  # the old content, whole
    leftovers = [p.name for p in workspace.iterdir() if p.name != "big.txt"]
    for name in leftovers:  # the temp file the killed write left: the user (or undo) may remove it
        assert name.startswith(".hermes-write.")
        (workspace / name).unlink()
    (workspace / "big.txt").write_bytes(b"N" * 20_000_000)  # as if the rename had happened
    time.sleep(0.01)
    report = undo_session("killed-session")
    assert report.restored == ["big.txt"] and (workspace / "big.txt").read_bytes() == old


WORKFLOW = """
name = "two-writes"

[[steps]]
id = "first"
tool = "write_file"
params = { path = "w/one.txt", content = "one" }

[[steps]]
id = "second"
tool = "write_file"
params = { path = "notes.txt", content = "replaced" }
"""


def test_a_workflow_run_is_checkpointed_per_step(tmp_path: Path, workspace: Path) -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    (workspace / "notes.txt").write_text("mine\n")
    spec = tmp_path / "wf.toml"
    spec.write_text(WORKFLOW)
    res = CliRunner().invoke(app, ["workflow", "run", str(spec), "--workspace", str(workspace), "--yes"])
    assert res.exit_code == 0, res.stderr
    session = res.stderr.split("(session ")[1].split(")")[0]
    assert [d.path for d in session_diff(session, step=2)] == ["notes.txt"]
    undo_session(session)
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.txt"]
    assert (workspace / "notes.txt").read_text() == "mine\n"


def test_a_command_killed_between_its_scans_is_undone_from_the_first_scan(workspace: Path) -> None:
    from hermes_local.sandbox.workspace import PinnedWorkspace
    from hermes_local.tools.effects import snapshot

    (workspace / "kept.txt").write_text("kept\n")
    rec = Recorder(CheckpointStore(), "cut-session", str(workspace.resolve()), step=1)
    with PinnedWorkspace.open(workspace) as pin, rec.call("run_shell"):
        snapshot.begin(pin)  # the record before the command; the process dies before `end`
    (workspace / "kept.txt").write_text("changed by the command\n")
    (workspace / "made.txt").write_text("made by the command\n")
    assert [d.path for d in session_diff("cut-session")] == ["kept.txt", "made.txt"]
    report = undo_session("cut-session")
    assert report.restored == ["kept.txt"] and report.removed == ["made.txt"]
    assert (workspace / "kept.txt").read_text() == "kept\n"


def test_the_approval_prompt_and_doctor_say_what_run_shell_recording_cannot_restore(workspace: Path) -> None:
    from hermes_local.tools.builtin.shell import run_shell
    from hermes_local.tools.effects.snapshot import doctor_line

    settings = load_settings({})
    with SessionLog() as log, build_agent(ScriptedLLM([]), settings, workspace=workspace, session_id=log.id) as agent:
        note = agent.executor.approver.notes(run_shell)
    assert "checkpoint: workspace scanned before and after" in note and "larger ones" in note
    with build_agent(ScriptedLLM([]), settings, workspace=workspace) as agent:  # no session: nothing recorded
        assert "checkpoint: NONE" in agent.executor.approver.notes(run_shell)
    assert "cannot be restored" in doctor_line(2048) and doctor_line(0).startswith("OFF")


@tool(permission="write")
def stamp(ctx: ToolContext) -> str:
    """Write a stamp file with plain open() (not through the confined path)."""
    (Path(ctx.workspace) / "stamp.txt").write_text("stamped\n")
    return "ok"


def test_a_module_tool_and_an_mcp_server_that_write_by_their_own_means_are_recorded(tmp_path: Path) -> None:
    from tests.tools.mcp.test_mcp import manager

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "hello.txt").write_text("hello\n")
    before = tree_hash(repo)

    server = {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)], "trusted": True}
    m = manager({"git": server})
    try:
        registry = ToolRegistry()
        registry.register(stamp)
        for t, source in m.tools():
            registry.register(t, source=source)
        ex = Executor(registry, ToolContext(workspace=repo), Approver(allow=["stamp", "git__git_add"]))
        ex.checkpoints = Recorder(CheckpointStore(), "own-means", str(repo), step=1)
        assert ex.execute("stamp", {}).ok
        ex.checkpoints.at(2)
        assert ex.execute("git__git_add", {"repo_path": str(repo), "files": ["hello.txt"]}).ok
    finally:
        m.close()
    assert [d.path for d in session_diff("own-means", step=1)] == ["stamp.txt"]
    assert ".git/index" in [d.path for d in session_diff("own-means", step=2)]  # the server staged the file
    assert not undo_session("own-means").refused
    assert tree_hash(repo) == before


def test_undo_waits_for_a_session_that_is_still_running(workspace: Path) -> None:
    session = run_session(workspace, [call("write_file", path="a.txt", content="x"), "ok"])
    with SessionLog(session):  # a resume of it is running
        with pytest.raises(UserError, match="in use by a running hermes-local"):
            undo_session(session)
    assert (workspace / "a.txt").exists()
    undo_session(session)
    assert not (workspace / "a.txt").exists()


@needs_bwrap
def test_a_home_inside_the_workspace_is_never_scanned_or_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.setenv("HERMES_LOCAL_HOME", str(workspace / ".hermes"))
    session = run_session(workspace, [call("run_shell", command="echo hi > out.txt"), "ok"], sandbox="bwrap")
    assert [d.path for d in session_diff(session)] == ["out.txt"]  # not the store's own files under .hermes
    undo_session(session)
    assert sorted(p.name for p in workspace.iterdir()) == [".hermes"]
    assert CheckpointStore().records(session)  # the checkpoints themselves survived the undo
