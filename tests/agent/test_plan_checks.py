"""Issue 42 item 4: a plan-only run makes the checks a real run makes before recording a proposal.

Each case runs the same call twice on the same kind of workspace, once for real (approved) and once plan-only:
a call the real run refuses is refused in the plan with the same error (never `proposed`), a call the real run
does is proposed, and the plan changes nothing on disk either way.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.events import Event, Proposal
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, default_registry
from hermes_local.tools.builtin.files import MAX_WRITE_BYTES

HOOK = """import json, sys
call = json.load(sys.stdin)
if call["tool_input"].get("path", "").startswith("migrations/"):
    print("never touch migrations/", file=sys.stderr)
    sys.exit(2)
"""


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root` (links not followed) with its kind and size: what a plan must not change. The
    agent's own home is left out (its session log is written there)."""
    seen: dict[str, str] = {}
    own = Path(os.environ["HERMES_LOCAL_HOME"])
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            if path == own or own in path.parents:
                continue
            info = path.lstat()
            seen[str(path.relative_to(root))] = f"{info.st_mode:o}:{info.st_size}"
    return seen


def link_out(ws: Path, outside: Path) -> None:
    (ws / "out").symlink_to(outside, target_is_directory=True)


def leaf_link_out(ws: Path, outside: Path) -> None:
    (outside / "target.md").write_text("theirs\n")
    (ws / "notes.md").symlink_to(outside / "target.md")


def hard_link(ws: Path, outside: Path) -> None:
    (outside / "shared.md").write_text("theirs\n")
    os.link(outside / "shared.md", ws / "notes.md")


def fifo(ws: Path, outside: Path) -> None:
    os.mkfifo(ws / "notes.md")


def file_as_folder(ws: Path, outside: Path) -> None:
    (ws / "a.txt").write_text("a\n")


def agent_home_inside(ws: Path, outside: Path) -> None:
    (ws / ".hermes").mkdir()
    (ws / ".hermes" / "config.toml").write_text("")
    os.environ["HERMES_LOCAL_HOME"] = str(ws / ".hermes")  # restored by the hermetic_home fixture


def memo_link_out(ws: Path, outside: Path) -> None:
    (outside / "memo.md").write_text("theirs\n")
    (ws / "memo.md").symlink_to(outside / "memo.md")


def nothing(ws: Path, outside: Path) -> None:
    (ws / "kept.md").write_text("kept\n")


def hook_file(ws: Path, outside: Path) -> None:
    (outside / "guard.py").write_text(HOOK)


Setup = Callable[[Path, Path], None]
CASES: list[tuple[str, Setup, str, dict[str, str], dict[str, object], str]] = [
    ("a folder linking out", link_out, "write_file", {"path": "out/x.md", "content": "x"}, {}, "symlink"),
    ("a file linking out", leaf_link_out, "write_file", {"path": "notes.md", "content": "x"}, {}, "symlink"),
    ("a hard-linked file", hard_link, "write_file", {"path": "notes.md", "content": "x"}, {}, "hard links"),
    ("a FIFO", fifo, "write_file", {"path": "notes.md", "content": "x"}, {}, "not a regular file"),
    ("a file as a folder", file_as_folder, "write_file", {"path": "a.txt/x.md", "content": "x"}, {}, "not a folder"),
    ("the agent's own home", agent_home_inside, "write_file", {"path": ".hermes/config.toml", "content": "x"}, {}, ""),
    ("too long", nothing, "write_file", {"path": "big.md", "content": "x" * (MAX_WRITE_BYTES + 1)}, {}, "at most"),
    ("a deny rule", nothing, "write_file", {"path": "secret/k.md", "content": "x"},
     {"permissions": {"deny": ["write_file:secret/**"]}}, "permission rule"),
    ("a memo linking out", memo_link_out, "append_to_memo", {"content": "x"}, {}, "symlink"),
    ("a pre_tool hook", hook_file, "write_file", {"path": "migrations/1.sql", "content": "x"}, {"hooks": "guard"},
     "never touch migrations/"),
]  # fmt: skip


def run_once(ws: Path, outside: Path, name: str, args: dict[str, str], extra: dict[str, object], *, plan: bool):
    settings = dict(extra)
    if settings.get("hooks") == "guard":
        settings["hooks"] = [{"event": "pre_tool", "command": f"{sys.executable} {outside / 'guard.py'}"}]
    events: list[Event] = []
    llm = ScriptedLLM([tool_call_text(name, **args), "Done.", "Done."])
    approver = Approver(allow=["write_file", "append_to_memo"], interactive=False)
    with build_agent(
        llm, load_settings(settings), workspace=ws, registry=default_registry(), approver=approver,
        on_event=events.append, plan=plan,
    ) as agent:  # fmt: skip
        result = agent.run("Do it")
    return result.tool_calls[0], [e for e in events if isinstance(e, Proposal)]


@pytest.mark.parametrize(("case", "setup", "name", "args", "extra", "why"), CASES, ids=[c[0] for c in CASES])
def test_a_plan_refuses_what_a_real_run_refuses_with_the_same_error(
    tmp_path: Path, case: str, setup: Setup, name: str, args: dict[str, str], extra: dict[str, object], why: str
) -> None:
    outcomes = {}
    for plan in (False, True):
        ws, outside = tmp_path / f"ws-{plan}", tmp_path / f"outside-{plan}"
        ws.mkdir(), outside.mkdir()
        setup(ws, outside)
        before = snapshot(tmp_path / f"outside-{plan}") | {f"ws/{k}": v for k, v in snapshot(ws).items()}
        outcomes[plan] = run_once(ws, outside, name, args, extra, plan=plan)
        if plan:
            after = snapshot(tmp_path / f"outside-{plan}") | {f"ws/{k}": v for k, v in snapshot(ws).items()}
            assert after == before, "a plan-only run changed the disk"
    (real, _), (planned, proposals) = outcomes[False], outcomes[True]
    assert not real.ok and why in (real.error or ""), real.error  # the case is a real refusal
    assert not planned.ok and planned.approval != "proposed" and proposals == []
    assert planned.error == real.error.replace("ws-False", "ws-True").replace("outside-False", "outside-True")


def test_a_write_a_real_run_does_is_proposed_and_its_new_folders_are_not_made(workspace: Path) -> None:
    (workspace / "in").mkdir()
    (workspace / "inside.md").symlink_to("in/target.md")  # a link that stays inside is followed, as a write does
    for path in ("new/deeper/x.md", "inside.md", "in/y.md"):
        call, proposals = run_once(workspace, workspace, "write_file", {"path": path, "content": "x"}, {}, plan=True)
        assert call.ok and call.approval == "proposed" and [p.arguments["path"] for p in proposals] == [path]
    assert sorted(p.name for p in workspace.iterdir()) == ["in", "inside.md"] and not (workspace / "in/y.md").exists()
