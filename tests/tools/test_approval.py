"""Approval: who may run write/dangerous tools, and what the model is told when a call is denied."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.testing import ScriptedLLM, build_agent
from hermes_local.tools import Approver, Executor, ToolContext, default_registry
from hermes_local.tools.approval import ApprovalRequest
from hermes_local.tools.builtin.clock import get_current_time
from hermes_local.tools.builtin.files import write_file
from hermes_local.tools.builtin.memory import append_to_memo
from hermes_local.tools.builtin.shell import run_shell
from hermes_local.tools.execution import denial_message


class Asker:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def __call__(self, request: ApprovalRequest) -> str:
        self.asked.append(request.tool.name)
        return self.answers.pop(0)


def test_read_tools_always_run_and_are_never_asked() -> None:
    ask = Asker()
    assert Approver(interactive=True, ask=ask).decide(get_current_time, {}) == (True, "read")
    assert ask.asked == []


def test_deny_list_beats_everything() -> None:
    approver = Approver(approve_all=True, allow=["run_shell"], deny=["run_shell", "get_current_time"])
    assert approver.decide(run_shell, {"command": "ls"}) == (False, "denied_by_policy")
    assert approver.decide(get_current_time, {}) == (False, "denied_by_policy")


def test_flags_and_policy() -> None:
    assert Approver(approve_all=True, interactive=False).decide(write_file, {}) == (True, "flag")
    # --yes covers read and write tools; dangerous ones need --allow NAME (or a yes on a terminal)
    assert Approver(approve_all=True, interactive=False).decide(run_shell, {}) == (False, "needs_allow")
    assert Approver(allow=["run_shell"], interactive=False).decide(run_shell, {}) == (True, "policy")
    assert Approver(allow=["append_to_memo"], interactive=False).decide(run_shell, {}) == (False, "needs_allow")
    assert Approver(interactive=False).decide(write_file, {}) == (False, "no_terminal")


def test_interactive_yes_no_always() -> None:
    ask = Asker("n", "y", "a")
    approver = Approver(interactive=True, ask=ask)
    assert approver.decide(run_shell, {}) == (False, "user")
    assert approver.decide(run_shell, {}) == (True, "user")
    assert approver.decide(run_shell, {}) == (True, "user")  # "always" ...
    assert approver.decide(run_shell, {}) == (True, "policy")  # ... is remembered for this tool
    assert ask.asked == ["run_shell"] * 3


def test_default_config_pre_approves_only_the_memo() -> None:
    settings = load_settings()
    approver = Approver(allow=settings.allow_tools, deny=settings.deny_tools, interactive=False)
    assert approver.decide(append_to_memo, {"content": "x"})[0]
    for name, how in (("write_file", "no_terminal"), ("run_shell", "needs_allow"), ("http_get", "needs_allow")):
        t = default_registry().get(name)
        assert t is not None and approver.decide(t, {}) == (False, how)


@pytest.mark.parametrize(
    ("how", "must_say"),
    [
        ("no_terminal", ["denied", "no terminal", "--allow run_shell", "--yes"]),
        ("timeout", ["denied", "nobody answered", "approval"]),
        ("needs_allow", ["denied", "dangerous", "--allow run_shell", "--yes does not cover"]),
        ("denied_by_policy", ["denied", "deny_tools"]),
        ("user", ["denied", "said no", "--allow run_shell"]),
    ],
)
def test_denial_messages_say_why_and_how_to_fix(how: str, must_say: list[str]) -> None:
    message = denial_message("run_shell", how)
    assert all(part in message for part in must_say) and len(message) < 300


def test_denied_call_is_not_run_and_not_remembered(workspace: Path) -> None:
    approver = Approver(interactive=False)
    ex = Executor(default_registry(), ToolContext(workspace=workspace, timeout=2), approver)
    denied = ex.execute("write_file", {"path": "x.txt", "content": "hi"})
    assert denied.error_kind == "permission_denied" and "no terminal" in denied.error
    assert "--allow write_file" in denied.error and "--yes" in denied.error
    assert denied.approval == "no_terminal" and not (workspace / "x.txt").exists()
    approver.allowed.add("write_file")
    allowed = ex.execute("write_file", {"path": "x.txt", "content": "hi"})
    assert allowed.ok
    assert allowed.approval == "policy" and (workspace / "x.txt").read_text() == "hi"


def test_agent_feeds_the_denial_back_and_still_answers(workspace: Path) -> None:
    shell_call = '<tool_call>\n{"name": "run_shell", "arguments": {"command": "touch x"}}\n</tool_call>'
    llm = ScriptedLLM([shell_call, "I could not run it."], n_ctx=200_000)
    settings = load_settings({"tool_timeout": 2})
    approver = Approver(allow=settings.allow_tools, interactive=False)
    agent = build_agent(llm, settings, workspace=workspace, approver=approver)
    result = agent.run("touch x")
    assert result.stopped == "answer" and result.tool_calls[0].error_kind == "permission_denied"
    assert "no terminal" in llm.prompt_texts[1] and "--allow run_shell" in llm.prompt_texts[1]
    assert not (workspace / "x").exists()


def test_the_asker_gets_the_note_and_the_view_and_no_asker_means_no_question() -> None:
    asked: list[ApprovalRequest] = []
    approver = Approver(ask=lambda request: asked.append(request) or "n")
    approver.notes = lambda t: "sandbox: NONE" if t.name == "run_shell" else ""
    assert approver.decide(run_shell, {"command": "ls"}) == (False, "user")
    assert approver.decide(write_file, {"path": "a.txt", "content": "hi"}) == (False, "user")
    assert [(r.tool.name, r.note) for r in asked] == [("run_shell", "sandbox: NONE"), ("write_file", "")]
    assert asked[0].view == "run_shell (dangerous) wants to run with:\n  command: ls"
    # nobody to ask (no terminal, CI): denied without a question; interactive=False never asks
    assert Approver().decide(write_file, {}) == (False, "no_terminal")
    never = Approver(interactive=False, ask=lambda request: asked.append(request) or "y")
    assert never.decide(run_shell, {}) == (False, "needs_allow") and len(asked) == 2
