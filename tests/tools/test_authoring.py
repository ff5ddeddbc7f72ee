"""Writing your own tool (issue 29): a cross-field validator, warnings at registration, `tools check FILE`."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text, write_replay
from hermes_local.tools import Approver, ToolRegistry, default_registry
from hermes_local.tools.modules import load_tools_module
from hermes_local.tools.registry import tool_warnings

runner = CliRunner()
MODULE = '''
from datetime import date
from hermes_local.tools import tool

def _order(args):
    if args.start > args.end:
        raise ValueError("start must be on or before end")

@tool(validator=_order)
def count_days(start: date, end: date) -> int:
    """Count the days from start to end (end excluded).

    Args:
        start: the first day, YYYY-MM-DD
        end: the day after the last, YYYY-MM-DD
    """
    return (end - start).days

@tool
def Days(n: int) -> int:
    return n
'''


def _module(tmp_path: Path) -> Path:
    path = tmp_path / "my_tools.py"
    path.write_text(MODULE)
    return path


def test_a_cross_field_validator_error_goes_back_to_the_model(tmp_path: Path, workspace: Path) -> None:
    registry: ToolRegistry = default_registry()
    for t in load_tools_module(str(_module(tmp_path))):
        registry.register(t, source="module:my_tools.py")
    script = [
        tool_call_text("count_days", start="2024-03-01", end="2024-02-01"),
        tool_call_text("count_days", start="2024-02-01", end="2024-03-01"),
        "29 days.",
    ]
    llm = ScriptedLLM(script)
    agent = build_agent(llm, load_settings({}), workspace=workspace, registry=registry, approver=Approver())
    result = agent.run("How many days in February 2024?")
    assert [(c.ok, c.error_kind) for c in result.tool_calls] == [(False, "invalid_arguments"), (True, None)]
    assert "start must be on or before end" in llm.prompt_texts[1]
    assert result.tool_calls[1].result.data == 29 and result.answer == "29 days."


def test_registration_warns_about_names_and_empty_descriptions(tmp_path: Path, workspace: Path) -> None:
    tools = {t.name: t for t in load_tools_module(str(_module(tmp_path)))}
    assert tool_warnings(tools["count_days"]) == []
    name, description = tool_warnings(tools["Days"])
    assert "name it verb_noun" in name and "description says nothing" in description
    replay = write_replay(tmp_path / "r.jsonl", ["Hi."])
    args = ["run", "say hi", "--model", f"replay:{replay}", "--workspace", str(workspace)]
    res = runner.invoke(app, [*args, "--tools-module", str(_module(tmp_path))])
    assert res.exit_code == 0, res.stderr
    assert "warning: tool 'Days': name it verb_noun" in res.stderr and "description says nothing" in res.stderr
    assert "count_days" not in res.stderr


def test_tools_check_prints_schema_prompt_rendering_and_warnings(tmp_path: Path) -> None:
    res = runner.invoke(app, ["tools", "check", str(_module(tmp_path))])
    assert res.exit_code == 0, res.stderr
    assert '"name": "count_days"' in res.stdout and '"format": "date"' in res.stdout
    assert "-- in the hermes prompt:" in res.stdout and "<tools>" in res.stdout
    assert "warning: tool 'Days'" in res.stderr and "2 tool(s), 2 warning(s)" in res.stderr
    llama = runner.invoke(app, ["tools", "check", str(_module(tmp_path)), "--dialect", "llama3"])
    assert llama.exit_code == 0 and "-- in the llama3 prompt:" in llama.stdout and "<tools>" not in llama.stdout
