"""The command sandbox (bwrap), the environment allow-list and the resource limits, with real processes.

Each escape attempt runs once in the sandbox (must fail) and, where it proves the test can detect the
escape, once with `sandbox = off` (must succeed), so a broken sandbox makes the first half fail.
Tests that need bwrap skip with the reason when it does not work on the machine.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from hermes_local.config import load_settings
from hermes_local.errors import UserError
from hermes_local.sandbox import cgroup
from hermes_local.sandbox import policy as sandbox
from hermes_local.sandbox.policy import Limits, SandboxPolicy, bwrap_status, sandboxed_command
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver
from hermes_local.tools.approval import ApprovalRequest
from tests.conftest import loopback_http_server

SECRET = "TOPSECRET-sandbox-77d1"
ANSWER = "Done."
BWRAP_WORKS, BWRAP_WHY = bwrap_status()
needs_bwrap = pytest.mark.skipif(not BWRAP_WORKS, reason=f"bwrap sandbox unavailable here: {BWRAP_WHY}")
# A fork bomb is only safe to run where the process cap is enforced: a pids cgroup, or a non-root user.
FORK_CAP = cgroup.cage_root() is not None or (hasattr(sys, "getuid") and __import__("os").geteuid() != 0)
needs_fork_cap = pytest.mark.skipif(
    not FORK_CAP, reason="running as root without a writable pids cgroup: RLIMIT_NPROC does not bind root"
)


def shell(
    ws: Path,
    *commands: str,
    approver: Approver | None = None,
    on_notice: Callable[[str], None] | None = None,
    **settings: object,
):
    """Run each command through the real agent's run_shell; returns (result, tool responses as text)."""
    outputs = [tool_call_text("run_shell", command=c) for c in commands] + [ANSWER]
    llm = ScriptedLLM(outputs, n_ctx=200_000)
    agent = build_agent(
        llm,
        load_settings({"tool_timeout": 4.0, "max_steps": 20, **settings}),
        workspace=ws,
        # trust_content: each command's output is untrusted, and these tests are about the sandbox, not approval
        approver=approver or Approver(approve_all=True, allow=["run_shell"], trust_content=True),
        on_notice=on_notice,
    )
    result = agent.run("Run the commands.")
    llm.assert_all_used()
    assert result.stopped == "answer" and result.answer == ANSWER  # the agent kept going
    responses = [text.rsplit("<tool_response>", 1)[1] for text in llm.prompt_texts[1:]]
    return result, responses


@pytest.fixture
def arena(tmp_path: Path, hermetic_home: Path) -> dict[str, Path]:
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET, encoding="utf-8")
    (hermetic_home / "home-secret.txt").write_text(SECRET, encoding="utf-8")
    (ws / "link_out").symlink_to(outside / "secret.txt")
    return {"ws": ws, "outside": outside, "home": hermetic_home}


@needs_bwrap
def test_sandboxed_command_cannot_read_or_write_outside_the_workspace(arena: dict[str, Path]) -> None:
    out, home = arena["outside"], arena["home"]
    attempts = [
        f"cat {out}/secret.txt",
        "cat ../outside/secret.txt",
        f"cat {home}/home-secret.txt",
        f"echo pwned > {out}/evil.txt",
        f"mkdir -p {home}/hermes && echo pwned > {home}/hermes/evil.txt",
        "echo pwned > /tmp/evil-from-sandbox-9f2 && ls /tmp",
        "ls ~ /root /home",
        "cat link_out",  # a symlink in the workspace pointing out: its target is not mounted
        f"ln -s {out}/secret.txt made_link && cat made_link",
    ]
    result, responses = shell(arena["ws"], *attempts, "echo kept > inside.txt && cat inside.txt")
    assert not any(SECRET in r for r in responses)
    assert sorted(p.name for p in out.iterdir()) == ["secret.txt"]
    assert not (home / "hermes" / "evil.txt").exists()
    assert not Path("/tmp/evil-from-sandbox-9f2").exists()
    assert (arena["ws"] / "inside.txt").read_text() == "kept\n"  # the workspace itself is writable
    assert "kept" in responses[-1]
    # Control: the same read works without the sandbox, so the test would catch a broken one.
    _, plain = shell(arena["ws"], f"cat {out}/secret.txt", sandbox="off")
    assert SECRET in plain[0]


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.send_response(200)
        self.end_headers()
        self.wfile.write(SECRET.encode())

    def log_message(self, *args: object) -> None:
        pass


@needs_bwrap
def test_sandboxed_command_cannot_reach_a_loopback_server(arena: dict[str, Path]) -> None:
    with loopback_http_server(_Hello) as url:
        fetch = f"python3 -c \"import urllib.request as u; print(u.urlopen('{url}/', timeout=2).read().decode())\""
        _, sandboxed = shell(arena["ws"], fetch)
        _, plain = shell(arena["ws"], fetch, sandbox="off")
    assert SECRET not in sandboxed[0] and "exited with code" in sandboxed[0]  # a non-zero exit is a failure
    assert SECRET in plain[0]  # the agent (and an unsandboxed command) can reach it


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_secret_environment_variable_is_not_passed(
    arena: dict[str, Path], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", SECRET)
    _, hidden = shell(arena["ws"], "env; echo token=$MY_API_TOKEN", sandbox=mode)
    assert SECRET not in hidden[0] and "token=" in hidden[0]
    _, shown = shell(arena["ws"], "echo token=$MY_API_TOKEN", sandbox=mode, sandbox_env=["PATH", "MY_API_TOKEN"])
    assert f"token={SECRET}" in shown[0]


def _alive(marker: str) -> list[str]:
    found = []
    for pid in Path("/proc").iterdir():
        if pid.name.isdigit():
            try:
                cmdline = (pid / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found


ESCAPES = "setsid sleep {m}1 & (sh -c 'sleep {m}2 &' &) ; nohup setsid sh -c 'sleep {m}3' >/dev/null 2>&1 &"


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("auto", marks=needs_bwrap),
        pytest.param(
            "off", marks=pytest.mark.skipif(cgroup.cage_root() is None, reason="no writable pids cgroup here")
        ),
    ],
)
def test_setsid_and_double_fork_are_gone_when_the_call_ends_or_times_out(arena: dict[str, Path], mode: str) -> None:
    ended = ESCAPES.format(m="47.1") + " echo started"
    timed_out = ESCAPES.format(m="47.2") + " sleep 47.29"
    result, responses = shell(arena["ws"], ended, timed_out, sandbox=mode, tool_timeout=1.5)
    assert result.tool_calls[0].ok and "started" in responses[0]
    assert result.tool_calls[1].error_kind == "timeout"
    assert not _alive("sleep 47.1") and not _alive("sleep 47.2")


@needs_fork_cap
@pytest.mark.parametrize("mode", [pytest.param("auto", marks=needs_bwrap), "off"])
def test_fork_bomb_and_memory_hog_are_contained_and_reported(arena: dict[str, Path], mode: str) -> None:
    limits = {"processes": 40, "memory_mb": 300, "cpu_seconds": 2, "file_size_mb": 1}
    bomb = "f(){ f|f& }; f; sleep 1"
    hog = "python3 -c 'x = bytearray(1024 ** 3); print(len(x))'"
    big = "head -c 3000000 /dev/zero > big.bin"
    result, responses = shell(
        arena["ws"], bomb, hog, big, "echo still-alive", sandbox=mode, sandbox_limits=limits, tool_timeout=3.0
    )
    kinds = [c.error_kind for c in result.tool_calls]
    assert kinds == ["tool_error", "tool_error", "tool_error", None], responses
    assert "process limit (40 processes)" in responses[0]
    assert "memory limit (300 MB)" in responses[1]
    assert "file size limit (1 MB)" in responses[2]
    assert (arena["ws"] / "big.bin").stat().st_size <= 1024 * 1024
    assert "still-alive" in responses[3]


def test_cpu_limit_is_reported(arena: dict[str, Path]) -> None:
    limits = {"cpu_seconds": 1}
    result, responses = shell(arena["ws"], "while :; do :; done", sandbox_limits=limits, tool_timeout=8.0)
    assert result.tool_calls[0].error_kind == "tool_error" and "CPU time limit (1 s)" in responses[0]


@needs_bwrap
def test_argv_api_runs_a_python_program_sandboxed_with_limits(arena: dict[str, Path]) -> None:
    """What an MCP stdio client uses: argv and env only; the interpreter is visible, limits ride in argv."""
    code = "import os, resource, sys; print(resource.getrlimit(resource.RLIMIT_AS)[0], os.getcwd(), sys.stdin.read())"
    argv, env = sandboxed_command(
        [sys.executable, "-c", code], workspace=arena["ws"], limits=Limits(memory_mb=512), writable=False
    )
    done = subprocess.run(argv, env=env, input="ping", capture_output=True, text=True, timeout=20, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(512 * 1024 * 1024), str(arena["ws"].resolve()), "ping"]
    assert "MY_API_TOKEN" not in env and "HERMES_LOCAL_HOME" not in env
    write = subprocess.run(
        sandboxed_command(["sh", "-c", "echo x > f"], workspace=arena["ws"], writable=False)[0],
        env=env,
        capture_output=True,
        timeout=20,
        check=False,
    )
    assert write.returncode != 0 and not (arena["ws"] / "f").exists()  # read-only workspace


def test_bwrap_mode_refuses_and_auto_warns_when_bwrap_is_missing(
    arena: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no bwrap on PATH: the real lookup fails
    sandbox.bwrap_status.cache_clear()
    try:
        result, responses = shell(arena["ws"], "echo ran > ran.txt", sandbox="bwrap")
        assert result.tool_calls[0].error_kind == "permission_denied" and "bwrap is not installed" in responses[0]
        assert not (arena["ws"] / "ran.txt").exists()
        notices: list[str] = []
        result, _ = shell(arena["ws"], "echo ran > ran.txt; echo again", "echo again", on_notice=notices.append)
        assert result.tool_calls[0].ok and (arena["ws"] / "ran.txt").exists()
        warnings = [line for line in notices if "WITHOUT a sandbox" in line]
        assert len(warnings) == 1 and "bwrap is not installed" in warnings[0]  # once per run
        assert "NONE" in SandboxPolicy("bwrap").describe() and "refused" in SandboxPolicy("bwrap").describe()
    finally:
        sandbox.bwrap_status.cache_clear()


def test_approval_prompt_says_whether_the_call_is_sandboxed(arena: dict[str, Path]) -> None:
    asked: list[ApprovalRequest] = []
    for mode in ("auto", "off"):
        approver = Approver(interactive=True, ask=lambda request: asked.append(request) or "y")
        shell(arena["ws"], "echo hi", approver=approver, sandbox=mode)
    notes = [r.note for r in asked if r.note.startswith("sandbox:")]
    assert [r.tool.name for r in asked] == ["run_shell", "run_shell"] and len(notes) == 2
    if BWRAP_WORKS:
        assert notes[0].startswith("sandbox: bwrap, workspace read-write, no network")
    assert notes[1].startswith("sandbox: NONE, it runs with your full rights (sandbox = off")
    assert "env PATH" in notes[0] or "env limited to PATH" in notes[0]


def test_sandbox_settings_from_file_env_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_LOCAL_SANDBOX_LIMITS", "processes=64, memory_mb=512")
    monkeypatch.setenv("HERMES_LOCAL_SANDBOX_ENV", "PATH,LANG")
    settings = load_settings({"sandbox": "off"})
    policy = SandboxPolicy.from_settings(settings)
    assert policy.mode == "off" and policy.env_allow == ("PATH", "LANG")
    assert policy.limits == Limits(processes=64, memory_mb=512, cpu_seconds=120, file_size_mb=1024)
    with pytest.raises(UserError, match="sandbox"):
        load_settings({"sandbox": "maybe"})
    monkeypatch.setenv("HERMES_LOCAL_SANDBOX_LIMITS", "processes")
    with pytest.raises(UserError, match="name=value"):
        load_settings()


def test_doctor_reports_the_sandbox_in_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app
    from tests.models.test_gguf import make_gguf

    model = tmp_path / "tiny.gguf"
    model.write_bytes(make_gguf())
    runner = CliRunner()
    res = runner.invoke(app, ["doctor", "--model", str(model), "--no-speed"])
    line = next(x for x in res.stdout.splitlines() if x.startswith("sandbox:"))
    assert ("bwrap (sandbox = auto)" if BWRAP_WORKS else "commands run unsandboxed") in line
    monkeypatch.setenv("HERMES_LOCAL_SANDBOX", "off")
    res = runner.invoke(app, ["doctor", "--model", str(model), "--no-speed"])
    assert "sandbox:          none (sandbox = off): commands run with your rights" in res.stdout


@needs_bwrap
def test_reference_mcp_time_server_works_inside_the_sandbox(arena: dict[str, Path]) -> None:
    """An MCP stdio server started from `sandboxed_command`'s argv and env: initialize, list, call."""
    pytest.importorskip("mcp_server_time", reason="the reference MCP time server (mcp-server-time) is not installed")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    argv, env = sandboxed_command(
        [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
        workspace=arena["ws"],
        writable=False,
        limits=Limits(),
    )
    assert "--unshare-all" in argv and "--share-net" not in argv
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)

    async def session() -> tuple[list[str], str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            listed = await client.list_tools()
            result = await client.call_tool("get_current_time", {"timezone": "UTC"})
            return [t.name for t in listed.tools], " ".join(getattr(c, "text", "") for c in result.content)

    names, text = anyio.run(session)
    assert "get_current_time" in names and '"timezone": "UTC"' in text


def test_workflow_run_shell_steps_use_the_sandbox_settings(
    arena: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_local.workflow.run import load_workflow, run_workflow

    monkeypatch.setenv("MY_API_TOKEN", SECRET)
    flow = tmp_path / "flow.toml"
    flow.write_text(
        'name = "envcheck"\n\n[[steps]]\nid = "show"\ntool = "run_shell"\n'
        'params = { command = "echo token=$MY_API_TOKEN" }\n',
        encoding="utf-8",
    )
    for env_allow, expected in ((None, "token=\n"), (["PATH", "MY_API_TOKEN"], f"token={SECRET}\n")):
        overrides = {"sandbox_env": env_allow} if env_allow else {}
        result = run_workflow(
            load_workflow(flow),
            load_settings(overrides),
            workspace=arena["ws"],
            db_path=None,
            approver=Approver(approve_all=True, allow=["run_shell"]),
        )
        assert result.outcomes[0].ok and result.outcomes[0].data["stdout"] == expected


@needs_bwrap
def test_policy_command_makes_the_programs_virtual_environment_visible_and_nothing_else(tmp_path: Path) -> None:
    """A server installed in a venv outside the system dirs starts sandboxed; its neighbours stay hidden."""
    ws = tmp_path / "ws"
    ws.mkdir()
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n", encoding="utf-8")
    tool = venv / "bin" / "tool"
    tool.write_text(f"#!{sys.executable}\nprint('tool-ok')\n", encoding="utf-8")
    tool.chmod(0o755)
    loose = tmp_path / "home" / "bin"
    loose.mkdir(parents=True)
    (loose / "secret.txt").write_text(SECRET, encoding="utf-8")
    script = loose / "thing"
    script.write_text(f"#!/bin/sh\necho thing-ok; cat {loose}/secret.txt\n", encoding="utf-8")
    script.chmod(0o755)

    policy = SandboxPolicy("bwrap")
    for program, expected in ((tool, "tool-ok"), (script, "thing-ok")):
        argv, env = policy.command([str(program)], workspace=ws, writable=False)
        done = subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True, timeout=20, check=False)
        assert done.stdout.startswith(expected), done.stderr
        assert SECRET not in done.stdout  # only the program file itself was made visible, not its folder
        bare, benv = sandboxed_command([str(program)], workspace=ws)  # without program_dirs it is not there
        assert subprocess.run(bare, env=benv, capture_output=True, timeout=20, check=False).returncode != 0
    assert sandbox.program_dirs(str(tool))[0] == str(venv.resolve())  # then the base Python it points at
    assert sandbox.program_dirs(str(script)) == [str(script)]  # not "/" for its #!/bin/sh, not its folder


def test_policy_command_refuses_when_bwrap_is_required_but_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH: the real lookup fails
    sandbox.bwrap_status.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxRefused, match="bwrap is not installed"):
            SandboxPolicy("bwrap").command(["/bin/true"], workspace=tmp_path)
        argv, env = SandboxPolicy("auto").command(["/bin/true"], workspace=tmp_path)
        assert "bwrap" not in " ".join(argv) and argv[-1] == "/bin/true"  # auto: unsandboxed, limits only
    finally:
        sandbox.bwrap_status.cache_clear()
