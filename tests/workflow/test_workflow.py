"""`hermes-local workflow run`: validation, templates, approval, failure isolation, --resume, the example."""

from __future__ import annotations

import importlib.util
import json
from datetime import date
from pathlib import Path

import pytest
import typer
from jinja2 import TemplateError
from typer.testing import CliRunner

from hermes_local.cli.common import HermesGroup
from hermes_local.cli.evals import workflow_app
from hermes_local.config import home_dir
from hermes_local.session import read_records, session_path
from hermes_local.workflow.run import render_value, template_env

EXAMPLES = Path(__file__).resolve().parents[2] / "scripts" / "examples"
runner = CliRunner()


def make_app() -> typer.Typer:
    app = typer.Typer(cls=HermesGroup)
    app.add_typer(workflow_app, name="workflow")
    return app


def run_wf(*args: str):
    return runner.invoke(make_app(), ["workflow", "run", *args])


def make_db(path: Path, day: date) -> dict[str, float]:
    spec = importlib.util.spec_from_file_location("make_orders_db", EXAMPLES / "make_orders_db.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_orders_db(path, day)


def workflow_events(session_id: str) -> list[dict]:
    return [e for e in read_records(session_path(session_id)) if e["kind"].startswith("workflow_")]


def session_id_from(stderr: str) -> str:
    return stderr.split("(session ")[1].split(")")[0]


# -- the example -------------------------------------------------------------------------------------
def test_daily_report_example_end_to_end(tmp_path: Path, workspace: Path) -> None:
    db = tmp_path / "orders.db"
    totals = make_db(db, date(2024, 5, 2))
    res = run_wf(
        str(EXAMPLES / "daily_report.toml"),
        *("--db", str(db), "--workspace", str(workspace), "--allow", "write_file", "--var", "date=2024-05-02"),
        "--allow-imports",
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    report = (workspace / "reports" / "daily-2024-05-02.md").read_text()
    today, yesterday = totals["2024-05-02"], totals["2024-05-01"]
    assert "# Daily report 2024-05-02" in report
    assert "| 2024-05-02 | " in report and f"{today:.2f}" in report and f"{yesterday:.2f}" in report
    assert f"{today - yesterday:+.2f}" in report and ("down" in report if today < yesterday else "up" in report)
    assert report.count("\n- ") == 3  # top three products
    events = workflow_events(session_id_from(res.stderr))
    assert [e["kind"] for e in events] == ["workflow_start"] + ["workflow_step"] * 5 + ["workflow_end"]
    change = next(e for e in events if e.get("id") == "change")
    assert change["params"] == {"today": today, "yesterday": yesterday}  # native numbers, not strings
    assert events[-1]["status"] == "ok"


def test_daily_report_failure_then_resume_reuses_completed_steps(tmp_path: Path, workspace: Path) -> None:
    db = tmp_path / "orders.db"
    make_db(db, date(2024, 5, 2))
    args = [str(EXAMPLES / "daily_report.toml"), "--db", str(db), "--workspace", str(workspace)]
    args += ["--var", "date=2024-05-02", "--allow-imports"]
    first = run_wf(*args)  # no --allow write_file and no terminal: the write is denied
    assert first.exit_code == 1
    assert "✗ write_report [write_file] permission_denied" in first.stdout
    assert "failed at step write_report" in first.stderr and "--resume" in first.stderr
    assert not (workspace / "reports").exists()
    state = json.loads((home_dir() / "workflows" / "daily_report.json").read_text())
    assert state["status"] == "failed" and state["steps"]["write_report"]["error_kind"] == "permission_denied"
    assert state["steps"]["change"]["status"] == "ok"

    db.unlink()  # the queries must not run again: their outputs come from the state file
    second = run_wf(*args, "--resume", "--allow", "write_file")
    assert second.exit_code == 0, second.stdout + second.stderr
    assert (workspace / "reports" / "daily-2024-05-02.md").is_file()
    statuses = {e["id"]: e["status"] for e in workflow_events(session_id_from(second.stderr)) if "id" in e}
    assert statuses == {
        "today_totals": "reused",
        "yesterday_totals": "reused",
        "top_products": "reused",
        "change": "reused",
        "write_report": "ok",
    }


def test_resume_reruns_a_step_whose_inputs_changed(tmp_path: Path, workspace: Path) -> None:
    db = tmp_path / "orders.db"
    make_db(db, date(2024, 5, 2))
    base = [
        str(EXAMPLES / "daily_report.toml"),
        "--db",
        str(db),
        "--workspace",
        str(workspace),
        "--yes",
        "--allow-imports",
    ]
    assert run_wf(*base, "--var", "date=2024-05-02").exit_code == 0
    res = run_wf(*base, "--var", "date=2024-05-01", "--resume")
    assert res.exit_code == 0 and "reused" not in res.stdout
    assert (workspace / "reports" / "daily-2024-05-01.md").is_file()


# -- failures and branches -------------------------------------------------------------------------
BRANCHES = """
name = "branches"

[[steps]]
id = "missing"
tool = "read_file"
params = { path = "missing.txt" }

[[steps]]
id = "after_missing"
tool = "write_file"
depends_on = ["missing"]
params = { path = "copy.txt", content = "{{ steps.missing.data }}" }

[[steps]]
id = "listing"
tool = "list_dir"

[[steps]]
id = "names"
tool = "write_file"
depends_on = ["listing"]
params = { path = "names.txt", content = "{% for e in steps.listing.data.entries %}{{ e.name }}\\n{% endfor %}" }
"""


def test_failed_step_stops_only_its_dependents(tmp_path: Path, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a")
    wf = tmp_path / "wf.toml"
    wf.write_text(BRANCHES)
    res = run_wf(str(wf), "--workspace", str(workspace), "--yes")
    assert res.exit_code == 1
    assert "✗ missing [read_file] not_found" in res.stdout
    assert "- after_missing [write_file] not run: missing did not complete" in res.stdout
    assert "✓ names" in res.stdout and (workspace / "names.txt").read_text() == "a.txt\n"
    assert not (workspace / "copy.txt").exists()
    end = workflow_events(session_id_from(res.stderr))[-1]
    assert end == end | {"status": "failed", "failed": ["missing"], "skipped": ["after_missing"]}

    (workspace / "missing.txt").write_text("found")
    again = run_wf(str(wf), "--workspace", str(workspace), "--yes", "--resume")
    assert again.exit_code == 0, again.stdout
    assert (workspace / "copy.txt").read_text() == "found"
    assert "↺ listing" in again.stdout


def test_resume_without_state_is_a_user_error(tmp_path: Path, workspace: Path) -> None:
    wf = tmp_path / "wf.toml"
    wf.write_text(BRANCHES)
    res = run_wf(str(wf), "--workspace", str(workspace), "--resume")
    assert res.exit_code == 2 and "no saved state for workflow 'branches'" in res.stderr


# -- validation ------------------------------------------------------------------------------------
def steps_toml(*steps: str, name: str = "v") -> str:
    return f'name = "{name}"\n' + "".join(f"\n[[steps]]\n{s}\n" for s in steps)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (steps_toml('id = "a"\ntool = "fly"'), "unknown tool 'fly'"),
        (
            steps_toml(
                'id = "a"\ntool = "list_dir"\ndepends_on = ["b"]', 'id = "b"\ntool = "list_dir"\ndepends_on = ["a"]'
            ),
            "dependency cycle a -> b -> a",
        ),
        (steps_toml('id = "a"\ntool = "list_dir"\ndepends_on = ["ghost"]'), "depends on 'ghost', which is not a step"),
        (
            steps_toml(
                'id = "a"\ntool = "list_dir"', 'id = "b"\ntool = "read_file"\nparams = { path = "{{ steps.a.data }}" }'
            ),
            "step 'b' reads steps.a but does not depend on it",
        ),
        (
            steps_toml('id = "b"\ntool = "read_file"\nparams = { path = "{{ steps[name] }}" }'),
            "refer to earlier results by name",
        ),
        (steps_toml('id = "a"\ntool = "read_file"\nparams = { path = "{{ vars.nope }}" }'), "vars.nope"),
        (steps_toml('id = "a"\ntool = "read_file"\nparams = { path = "{{ oops( }}" }'), "bad template"),
        (steps_toml('id = "a"\ntool = "list_dir"', 'id = "a"\ntool = "list_dir"'), "two steps have the id 'a'"),
        (steps_toml('id = "a"\nsummarize = true\ntool = "list_dir"'), "must not name a tool"),
        (steps_toml('id = "a"'), "needs a tool"),
        (steps_toml('id = "a-b"\ntool = "list_dir"'), "steps.0.id"),
        ('name = "x"\n[[steps]\n', "not valid TOML"),
        ('name = "x"\nsteps = []\n', "steps"),
    ],
)
def test_invalid_workflows_are_one_line_exit_2(tmp_path: Path, workspace: Path, text: str, message: str) -> None:
    wf = tmp_path / "wf.toml"
    wf.write_text(text)
    res = run_wf(str(wf), "--workspace", str(workspace), "--yes")
    assert res.exit_code == 2, res.stdout
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    sessions = home_dir() / "sessions"
    assert not sessions.exists() or not any(sessions.iterdir())  # nothing ran


def test_transitive_reference_is_allowed(tmp_path: Path, workspace: Path) -> None:
    (workspace / "n.txt").write_text("hello")
    wf = tmp_path / "wf.toml"
    wf.write_text(
        steps_toml(
            'id = "a"\ntool = "read_file"\nparams = { path = "n.txt" }',
            'id = "b"\ntool = "list_dir"\ndepends_on = ["a"]',
            'id = "c"\ntool = "write_file"\ndepends_on = ["b"]\n'
            'params = { path = "out.txt", content = "{{ steps.a.data }}!" }',
        )
    )
    res = run_wf(str(wf), "--workspace", str(workspace), "--allow", "write_file")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert (workspace / "out.txt").read_text() == "hello!"


# -- templates -------------------------------------------------------------------------------------
def test_single_expression_keeps_native_type() -> None:
    env = template_env()
    ctx = {"steps": {"q": {"data": {"rows": [[1, 2.5]], "cols": ["a"]}}}, "vars": {"d": "2024-05-02"}}
    assert render_value(env, "{{ steps.q.data.rows }}", ctx) == [[1, 2.5]]
    assert render_value(env, " {{ steps.q.data.rows[0][1] }} ", ctx) == 2.5
    assert render_value(env, "{{ steps.q.data }}", ctx) == {"rows": [[1, 2.5]], "cols": ["a"]}
    assert render_value(env, "total {{ steps.q.data.rows[0][1] }}", ctx) == "total 2.5"
    assert render_value(env, "{{ a }} and {{ b }}", {"a": 1, "b": 2}) == "1 and 2"
    assert render_value(env, {"x": ["{{ vars.d | add_days(-1) }}"]}, ctx) == {"x": ["2024-05-01"]}
    assert render_value(env, "plain", ctx) == "plain"


@pytest.mark.parametrize("source", ["{{ steps.q.missing }}", "{{ x.__class__.__mro__ }}", "{{ nothing }}"])
def test_templates_are_strict_and_sandboxed(source: str) -> None:
    with pytest.raises(TemplateError):
        render_value(template_env(), source, {"steps": {"q": {}}, "x": 1})


def test_a_template_error_at_run_time_fails_that_step(tmp_path: Path, workspace: Path) -> None:
    wf = tmp_path / "wf.toml"
    wf.write_text(
        steps_toml(
            'id = "a"\ntool = "list_dir"',
            'id = "b"\ntool = "read_file"\ndepends_on = ["a"]\nparams = { path = "{{ steps.a.data.nope }}" }',
        )
    )
    res = run_wf(str(wf), "--workspace", str(workspace))
    assert res.exit_code == 1 and "✗ b [read_file] invalid_arguments: cannot fill in params" in res.stdout


# -- summarize ---------------------------------------------------------------------------------------
def test_summarize_step_asks_the_model_once_and_writes_the_output(tmp_path: Path, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a")
    replay = tmp_path / "summary.jsonl"
    replay.write_text(json.dumps({"text": "## Summary\nOne file: a.txt."}) + "\n")
    wf = tmp_path / "wf.toml"
    wf.write_text(
        steps_toml(
            'id = "listing"\ntool = "list_dir"',
            'id = "summary"\nsummarize = true\nparams = { output = "summary.md" }',
        )
    )
    res = run_wf(str(wf), "--workspace", str(workspace), "--yes", "--model", f"replay:{replay}")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert (workspace / "summary.md").read_text() == "## Summary\nOne file: a.txt.\n"
    step = next(e for e in workflow_events(session_id_from(res.stderr)) if e.get("id") == "summary")
    assert step["data"]["text"].startswith("## Summary") and step["status"] == "ok"

    # Without approval for write_file the summary is produced but the output write is denied.
    (workspace / "summary.md").unlink()
    res = run_wf(str(wf), "--workspace", str(workspace), "--model", f"replay:{replay}")
    assert res.exit_code == 1 and "✗ summary [(summarize)] permission_denied" in res.stdout


def test_a_3000_step_workflow_is_refused_at_load_in_one_line(tmp_path: Path, workspace: Path) -> None:
    """Issue 26 item 8 (resources): 3,000 steps ran for minutes with no limit."""
    wf = tmp_path / "wf.toml"
    wf.write_text(steps_toml(*[f'id = "s{i}"\ntool = "list_dir"' for i in range(3000)]))
    res = run_wf(str(wf), "--workspace", str(workspace), "--yes")
    assert res.exit_code == 2, res.stdout[-500:]
    assert "at most 500 items" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr[-500:]
