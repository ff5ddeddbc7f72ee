"""Thoughts in every dialect (issue 27.5): split off before calls are read, rehearsed calls never run, the
history keeps or drops past thoughts as the family's template does, and the KV prefix stays byte-stable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_local.calls.parse import ToolCall
from hermes_local.calls.thoughts import (
    GEMMA_THOUGHT,
    HARMONY_THOUGHT,
    HERMES_THOUGHT,
    KNOWN_THOUGHTS,
    MISTRAL_THINK,
    THINK,
)
from hermes_local.config import load_settings
from hermes_local.dialects import get_dialect
from hermes_local.dialects.gguf import GGUFDialect
from hermes_local.events import Event, Reasoning, RehearsedCall, ToolCallStarted
from hermes_local.testing import ScriptedLLM, build_agent
from hermes_local.tools import Approver, default_registry

TEMPLATES = Path(__file__).parents[1] / "data" / "templates"
SAMPLE = Path(__file__).parents[1] / "data" / "hermes2pro_thought_sample.txt"  # the founding documents' sample
REHEARSED = ToolCall("run_shell", {"command": "rm -rf ~"})
# How each family writes one real call of get_current_time.
CALLS = {
    "hermes": '<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>',
    "qwen": '<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call>',
    "llama3": '{"name": "get_current_time", "parameters": {}}',
    "mistral": '[TOOL_CALLS][{"name": "get_current_time", "arguments": {}}]',
    "mistral-v3": '[TOOL_CALLS] [{"name": "get_current_time", "arguments": {}}]',
}
MARKERS = {"hermes": HERMES_THOUGHT, "qwen": THINK, "llama3": THINK, "mistral": MISTRAL_THINK, "mistral-v3": THINK}
# DeepSeek-R1's way of cutting past thoughts out of the history (its template's assistant branch).
R1_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'assistant' %}{% set c = m['content'] %}"
    "{% if '</think>' in c %}{% set c = c.split('</think>')[-1] %}{% endif %}<|Assistant|>{{ c }}<|end|>"
    "{% else %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|Assistant|>{% endif %}"
)


def rehearsal(dialect: str) -> str:
    """A reply that thinks in the family's own markers, rehearses a dangerous call there, then calls."""
    open_, close = MARKERS[dialect]
    inner = '<tool_call>{"name": "run_shell", "arguments": {"command": "rm -rf ~"}}</tool_call>'
    return f"{open_}\nI could run {inner} but first the time.\n{close}\n{CALLS[dialect]}"


@pytest.mark.parametrize("dialect", sorted(CALLS))
def test_a_call_rehearsed_in_a_thought_is_read_but_never_a_call(dialect: str) -> None:
    parsed = get_dialect(dialect).parse(rehearsal(dialect), ["get_current_time", "run_shell"])
    assert parsed.calls == [ToolCall("get_current_time", {})] and parsed.errors == []
    assert parsed.rehearsed == [REHEARSED] and parsed.text == ""
    assert parsed.reasoning.startswith("I could run <tool_call>") and "first the time." in parsed.reasoning
    assert parsed.thought_markers == MARKERS[dialect]


def test_each_dialect_names_its_own_thought_markers_first() -> None:
    assert get_dialect("hermes").thoughts == (HERMES_THOUGHT, THINK)  # Hermes 2 Pro, then Hermes 3/4-style
    assert get_dialect("qwen").thoughts[0] == THINK and get_dialect("mistral").thoughts[0] == MISTRAL_THINK
    qwen3 = GGUFDialect((TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text())
    assert qwen3.thoughts == (THINK,) and qwen3.keep_thoughts  # Qwen3 keeps the thoughts of the current query
    r1 = GGUFDialect(R1_TEMPLATE)
    assert r1.thoughts == (THINK,) and not r1.keep_thoughts  # DeepSeek-R1 cuts them out
    assert {m for d in CALLS for m in get_dialect(d).all_thoughts()} == set(KNOWN_THOUGHTS)
    assert get_dialect("gemma4").thoughts == (GEMMA_THOUGHT,) and not get_dialect("gemma4").keep_thoughts
    assert get_dialect("harmony").all_thoughts()[0] == HARMONY_THOUGHT  # only harmony reads its analysis channel


def test_the_founding_documents_hermes_2_pro_sample() -> None:
    """Their sample: a call rehearsed inside <|startofthought|>, the answer framed by <|startofresponse|>,
    and a closing [/TOOL_CALLS]: one real call, the rehearsal kept apart, no parse error, no leftovers."""
    parsed = get_dialect("hermes").parse(SAMPLE.read_text(), ["get_current_time", "append_to_memo"])
    assert parsed.calls == [ToolCall("get_current_time", {})]
    assert parsed.errors == [] and parsed.text == ""
    assert parsed.rehearsed == [ToolCall("append_to_memo", {"content": "The time is <time>"})]
    assert "I should get the time first" in parsed.reasoning and "startofresponse" not in parsed.reasoning


def run_agent(dialect: str, outputs: list[str], workspace: Path, n_ctx: int = 20000):
    events: list[Event] = []
    llm = ScriptedLLM(outputs, n_ctx=n_ctx)
    agent = build_agent(
        llm,
        # answer_guard off: step 1 is free text (a goal that needs a tool would start with the call grammar
        # forced on, leaving no room for a thought), so the scripted replies may open with a thought
        load_settings({"reminder_every": 0, "max_steps": 8, "answer_guard": False}),
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(interactive=False),
        on_event=events.append,
        dialect=get_dialect(dialect) if isinstance(dialect, str) else dialect,
    )
    return agent.run("What time is it? Tell me."), llm, events


def test_the_sample_through_the_agent_runs_only_the_real_call(workspace: Path) -> None:
    result, _, events = run_agent("hermes", [SAMPLE.read_text(), "It is noon."], workspace)
    assert [e.name for e in events if isinstance(e, ToolCallStarted)] == ["get_current_time"]
    assert not (workspace / "memo.md").exists()  # the rehearsed append_to_memo did not run
    rehearsed = [e for e in events if isinstance(e, RehearsedCall)]
    assert [(e.step, e.name, e.arguments) for e in rehearsed] == [
        (1, "append_to_memo", {"content": "The time is <time>"})
    ]
    assert [e.step for e in events if isinstance(e, Reasoning)] == [1]
    out = result.to_json()
    assert out["answer"] == "It is noon." and [c["name"] for c in out["tool_calls"]] == ["get_current_time"]
    assert out["rehearsed_calls"] == [
        {"step": 1, "name": "append_to_memo", "arguments": {"content": "The time is <time>"}}
    ]
    assert out["reasoning"][0]["step"] == 1 and "I should get the time first" in out["reasoning"][0]["text"]
    assert json.loads(json.dumps(rehearsed[0].to_dict()))["kind"] == "rehearsed_call"


def thinking_run(dialect, workspace: Path, steps: int = 6):
    """A `steps`-step run where every reply thinks first (the thought text differs per step)."""
    open_, close = (dialect.thoughts if not isinstance(dialect, str) else get_dialect(dialect).thoughts)[0]
    name = dialect if isinstance(dialect, str) else "hermes"
    outputs = [
        f"{open_}\nStep {i}: I still need the time, call it.\n{close}\n\n{CALLS[name]}" for i in range(steps - 1)
    ]
    outputs.append(f"{open_}\nI have it now.\n{close}\n\nIt is noon.")
    return run_agent(dialect, outputs, workspace)


@pytest.mark.parametrize("dialect", ["hermes", "qwen", "gguf-r1"])
def test_past_thoughts_kept_or_dropped_and_the_kv_prefix_holds(dialect: str, workspace: Path) -> None:
    """6 steps with a thought in every reply: the history keeps (hermes, qwen) or drops (a DeepSeek-R1
    template) past thoughts, every prompt extends the previous one, and evaluated/new stays <= 1.05."""
    chosen = GGUFDialect(R1_TEMPLATE, call_format="hermes") if dialect == "gguf-r1" else dialect
    result, llm, _ = thinking_run(chosen, workspace)
    assert result.answer == "It is noon." and result.steps == 6 and len(result.reasoning) == 6
    kept = dialect != "gguf-r1"
    assert ("Step 0: I still need the time" in llm.prompt_texts[-1]) is kept
    for before, after in zip(llm.prompts, llm.prompts[1:], strict=False):
        assert after[: len(before)] == before  # byte-stable: each prompt extends the one before
    evaluated = sum(c.prompt_tokens_evaluated for c in result.llm_calls)
    new = sum(c.prompt_tokens_new for c in result.llm_calls)
    assert evaluated / new <= 1.05
    if kept:  # the reply as the model wrote it is in the KV cache: only the tool turn is new next step
        for i, call in enumerate(result.llm_calls[1:], 1):
            completion = llm.tokenize(llm.outputs[i - 1], special=False)
            assert llm.prompts[i][: len(llm.prompts[i - 1]) + len(completion)] == llm.prompts[i - 1] + completion
            assert call.prompt_tokens_evaluated == len(llm.prompts[i]) - len(llm.prompts[i - 1]) - len(completion)


def test_a_thought_the_prompt_opened_is_reasoning() -> None:
    """Qwen3 / DeepSeek-R1 templates open `<think>` in the prompt: the reply starts inside the thought."""
    inner = '<tool_call>{"name": "run_shell", "arguments": {"command": "rm -rf ~"}}</tool_call>'
    parsed = get_dialect("qwen").parse(f"hmm, {inner}\n</think>\n\n{CALLS['qwen']}", ["run_shell", "get_current_time"])
    assert parsed.calls == [ToolCall("get_current_time", {})] and parsed.rehearsed == [REHEARSED]
    assert parsed.reasoning == f"hmm, {inner}" and parsed.thought_markers == THINK
