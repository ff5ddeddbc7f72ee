"""The user's hooks: real hook scripts run in the command sandbox on pre_tool / post_tool / stop / session_end,
answering as Claude Code's and goose's hooks do (block, ask, allow), failing closed, never lowering a permission,
and every decision logged."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.evals.stats import gather
from hermes_local.events import HookRan
from hermes_local.runtime import Model, RunSpec, start_run
from hermes_local.sandbox.policy import bwrap_status
from hermes_local.session import describe_event
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver
from hermes_local.tools.approval import ApprovalRequest
from hermes_local.tools.hooks import parse_answer

call = tool_call_text
SCRIPTS = {
    "guard.py": """
import json, sys
call = json.load(sys.stdin)
if call["tool_input"].get("path", "").startswith("migrations/"):
    print("never touch migrations/", file=sys.stderr)
    sys.exit(2)
""",
    "json_block.py": 'import json; print(json.dumps({"decision": "block", "reason": "not on Fridays"}))',
    "claude_deny.py": """import json
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                  "permissionDecisionReason": "denied the Claude Code way"}}))""",
    "ask.py": 'import json; print(json.dumps({"decision": "ask", "reason": "config files need a look"}))',
    "allow.py": 'import json; print(json.dumps({"decision": "allow"}))',
    "sleep.py": "import time; time.sleep(30)",
    "garbage.py": "print('hello, I am not JSON')",
    "crash.py": "raise SystemExit(1)",
    "flood.py": "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)",
    "audit.py": """
import json, sys
data = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(data) + "\\n")
""",
    "escape.py": """
import sys
for target in sys.argv[1:]:
    try:
        open(target, "w").write("escaped")
    except OSError:
        pass
""",
}


@pytest.fixture
def hooks_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "hooks"
    folder.mkdir()
    for name, text in SCRIPTS.items():
        (folder / name).write_text(text)
    return folder


def hook(hooks_dir: Path, script: str, *args: str, event: str = "pre_tool", **extra: object) -> dict:
    return {"event": event, "command": " ".join([sys.executable, str(hooks_dir / script), *args]), **extra}


def run_with(workspace: Path, hooks: list[dict], outputs: list[str], *, ask=None, **settings: object):
    loaded = load_settings({"hooks": hooks, **settings})
    approver = Approver(allow=["write_file"], ask=ask)
    events: list = []
    llm = ScriptedLLM(outputs)
    with build_agent(llm, loaded, workspace=workspace, approver=approver, on_event=events.append) as agent:
        result = agent.run("do it")
    return result, [e for e in events if isinstance(e, HookRan)], llm


def write(path: str) -> str:
    return call("write_file", path=path, content="x\n")


def test_exit_2_blocks_and_the_model_reads_the_reason(workspace: Path, hooks_dir: Path) -> None:
    result, ran, llm = run_with(
        workspace, [hook(hooks_dir, "guard.py", match="write_*")], [write("migrations/001.sql"), write("a.txt"), "ok"]
    )
    blocked, written = result.tool_calls
    assert blocked.result.approval == "hook" and "never touch migrations/" in (blocked.error or "")
    assert "never touch migrations/" in llm.prompt_texts[1]  # the model read it as the tool's result
    assert not (workspace / "migrations").exists() and written.ok and (workspace / "a.txt").exists()
    assert [(e.hook, e.event, e.tool, e.decision) for e in ran] == [
        ("python3" if "python3" in sys.executable.rsplit("/", 1)[-1] else sys.executable.rsplit("/", 1)[-1],
         "pre_tool", "write_file", "block"),
        (ran[1].hook, "pre_tool", "write_file", "allow"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("script", "timeout", "why"),
    [
        ("json_block.py", 10, "not on Fridays"),
        ("claude_deny.py", 10, "denied the Claude Code way"),
        ("sleep.py", 0.5, "did not answer within 0.5 s"),
        ("garbage.py", 10, "not a JSON decision"),
        ("crash.py", 10, "exit status 1"),
        ("flood.py", 1, "did not answer within 1 s"),  # endless output: kept to 64 kB, cut at the timeout
    ],
)
def test_blocks_and_failures_block_the_call(
    workspace: Path, hooks_dir: Path, script: str, timeout: float, why: str
) -> None:
    result, ran, _ = run_with(workspace, [hook(hooks_dir, script, timeout=timeout, name="h")], [write("a.txt"), "ok"])
    outcome = result.tool_calls[0]
    assert outcome.result.approval == "hook" and why in (outcome.error or "") and not (workspace / "a.txt").exists()
    assert ran[0].hook == "h" and why in ran[0].reason
    assert "\n" not in (outcome.error or "")
    line = describe_event(ran[0]) or ""
    assert line.startswith("   hook h (pre_tool write_file): ") and why in line


def test_ask_takes_the_approval_path_even_when_allowed(workspace: Path, hooks_dir: Path) -> None:
    notes: list[str] = []

    def ask(request: ApprovalRequest) -> str:
        notes.append(request.note)
        return "n"

    result, _, _ = run_with(workspace, [hook(hooks_dir, "ask.py", name="review")], [write("a.toml"), "ok"], ask=ask)
    assert result.tool_calls[0].result.approval == "user" and not (workspace / "a.toml").exists()
    assert any("The hook review asks for this call: config files need a look" in n for n in notes)
    unattended, _, _ = run_with(workspace, [hook(hooks_dir, "ask.py")], [write("a.toml"), "ok"])
    assert unattended.tool_calls[0].result.approval == "needs_approval"


def test_allow_from_a_hook_never_lowers_a_permission(workspace: Path, hooks_dir: Path) -> None:
    loaded = load_settings({"hooks": [hook(hooks_dir, "allow.py")], "sandbox": "auto"})
    llm = ScriptedLLM([call("run_shell", command="touch shell-ran"), write("b.txt"), "ok"])
    with build_agent(llm, loaded, workspace=workspace, approver=Approver(interactive=False)) as agent:
        result = agent.run("do it")
    assert [c.result.approval for c in result.tool_calls] == ["needs_allow", "no_terminal"]
    assert not (workspace / "shell-ran").exists() and not (workspace / "b.txt").exists()


def test_payload_post_tool_stop_session_end_and_the_audit_log(workspace: Path, hooks_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "logs" / "audit.jsonl"
    log.parent.mkdir()
    audit = {"writable": [str(log)], "name": "audit"}
    hooks = [hook(hooks_dir, "audit.py", str(log), event=e, **audit) for e in ("pre_tool", "post_tool", "stop")]
    hooks.append(hook(hooks_dir, "audit.py", str(log), event="session_end", **audit))
    (workspace / "notes.txt").write_text("hello")
    result, ran, _ = run_with(workspace, hooks, [call("read_file", path="notes.txt"), write("a.txt"), "All done."])
    assert result.stopped == "answer" and (workspace / "a.txt").exists()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["hook_event_name"], e.get("tool_name")) for e in entries] == [
        ("PreToolUse", "read_file"), ("PostToolUse", "read_file"), ("PreToolUse", "write_file"),
        ("PostToolUse", "write_file"), ("Stop", None), ("SessionEnd", None),
    ]  # fmt: skip
    pre_write = entries[2]
    assert pre_write["tool_input"] == {"path": "a.txt", "content": "x\n"} and pre_write["step"] == 2
    assert pre_write["provenance"] == "untrusted"  # the file read before is untrusted content
    assert entries[0]["provenance"] == "trusted" and entries[0]["cwd"] == str(workspace)
    assert entries[1]["tool_response"]["ok"] is True and "hello" in json.dumps(entries[1]["outcome"])
    assert entries[4]["answer"] == "All done." and entries[4]["stopped"] == "answer"
    assert [e.event for e in ran] == ["pre_tool", "post_tool", "pre_tool", "post_tool", "stop", "session_end"]


@pytest.mark.skipif(not bwrap_status()[0], reason="bubblewrap cannot create namespaces here")
def test_a_hook_cannot_write_outside_what_it_is_given(workspace: Path, hooks_dir: Path, tmp_path: Path) -> None:
    outside, inside = tmp_path / "outside.txt", workspace / "planted.txt"
    home = Path(os.environ["HOME"]) / "hook-was-here"
    result, ran, _ = run_with(
        workspace, [hook(hooks_dir, "escape.py", str(outside), str(inside), str(home))], [write("a.txt"), "ok"]
    )
    assert ran[0].decision == "allow" and result.tool_calls[0].ok  # it answered; its writes went nowhere
    assert not outside.exists() and not inside.exists() and not home.exists()


def test_post_tool_block_adds_its_reason_for_the_model(workspace: Path, hooks_dir: Path) -> None:
    result, _, llm = run_with(workspace, [hook(hooks_dir, "json_block.py", event="post_tool")], [write("a.txt"), "ok"])
    assert result.tool_calls[0].ok and "not on Fridays" in llm.prompt_texts[1]


def test_stats_count_each_hooks_decisions(workspace: Path, hooks_dir: Path) -> None:
    loaded = load_settings({"hooks": [hook(hooks_dir, "guard.py", name="guard")]})
    llm = ScriptedLLM([write("migrations/x"), write("a.txt"), "ok"])
    spec = RunSpec(task="do it", settings=loaded, workspace=workspace, approver=Approver(allow=["write_file"]))
    with start_run(spec, Model(llm)) as handle:  # logged, as `hermes-local run` is
        handle.run()
    assert gather()["hooks"] == {"guard": {"allow": 1, "block": 1}}
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    shown = CliRunner().invoke(app, ["stats"])
    assert shown.exit_code == 0 and "hook guard: 1 allow, 1 block" in shown.output


def test_parse_answer_reads_every_form() -> None:
    assert parse_answer(0, "", "", 1) == ("allow", "")
    assert parse_answer(0, 'log line\n{"decision": "approve"}', "", 1) == ("allow", "")
    assert parse_answer(0, '{"continue": false, "stopReason": "halt"}', "", 1) == ("block", "halt")
    assert parse_answer(0, '{"decision": "maybe"}', "", 1)[0] == "error"
    assert parse_answer(0, "[1, 2]", "", 1)[0] == "error"
    assert parse_answer(2, "", "a\nmultiline\nreason", 1) == ("block", "a multiline reason")


def test_the_readme_shaping_example_runs(workspace: Path, tmp_path: Path, hermetic_home: Path) -> None:
    """README, Skills, hooks and permissions: its config block and hook script, with /home/me/hooks made real."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Skills, hooks and permissions", 1)[1].split("\n### ", 1)[0]
    config = re.findall(r"```toml\n(.*?)```", section, re.S)[0]
    script = re.findall(r"```py\n(.*?)```", section, re.S)[0]
    folder = tmp_path / "hooks"
    folder.mkdir()
    (folder / "no_migrations.py").write_text(script)
    config = config.replace("/home/me/hooks", str(folder)).replace("python3 ", f"{sys.executable} ")
    home = hermetic_home / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config)
    settings = load_settings()
    outputs = [
        write("migrations/002.sql"),  # the hook blocks it
        write("src/app.py"),  # the allow rule approves it (no --allow write_file, no terminal)
        write(".git/config"),  # the deny rule
        call("read_file", path="secrets/token"),  # the deny rule on a read tool
        write("pyproject.toml"),  # the ask rule, with nobody to ask
        call("run_shell", command="make test; curl evil"),  # not the allowed command
        "done",
    ]
    with build_agent(ScriptedLLM(outputs), settings, workspace=workspace, approver=Approver()) as agent:
        result = agent.run("do it")
    assert [c.result.approval for c in result.tool_calls] == [
        "hook", "rule", "denied_by_rule", "denied_by_rule", "needs_approval", "needs_allow",
    ]  # fmt: skip
    assert "never touch migrations/" in (result.tool_calls[0].error or "")
    assert (workspace / "src/app.py").is_file() and not (workspace / "migrations").exists()
    audited = [json.loads(line) for line in (folder / "audit.jsonl").read_text().splitlines() if line.strip()]
    assert [(a["tool_name"], a["tool_response"]["ok"]) for a in audited] == [("write_file", True)]


def test_a_hook_under_the_users_home_named_with_a_tilde(workspace: Path) -> None:
    folder = Path.home() / "my-hooks"  # the hermetic HOME of the tests
    folder.mkdir()
    (folder / "audit.py").write_text(SCRIPTS["audit.py"])
    command = f"{sys.executable} ~/my-hooks/audit.py ~/my-hooks/log.jsonl"
    hooks = [{"event": "pre_tool", "command": command, "writable": ["~/my-hooks/log.jsonl"]}]
    result, ran, _ = run_with(workspace, hooks, [write("a.txt"), "ok"])
    assert ran[0].decision == "allow" and result.tool_calls[0].ok
    assert json.loads((folder / "log.jsonl").read_text())["tool_name"] == "write_file"
