"""`Agent.resume(events, message=...)`: a finished session followed by a new message, as a new process does it."""

from __future__ import annotations

from pathlib import Path

from hermes_local.config import load_settings
from hermes_local.session import SessionLog, events_to_continue, read_events
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, default_registry


def _agent(llm: ScriptedLLM, workspace: Path, log: SessionLog):
    return build_agent(
        llm,
        load_settings({}),
        workspace=workspace,
        registry=default_registry(),
        approver=Approver(allow=["append_to_memo"], interactive=False),
        on_event=log.log,
    )


def test_a_finished_session_continues_with_the_same_memory_and_its_prompt_as_prefix(workspace: Path) -> None:
    first_llm = ScriptedLLM([tool_call_text("get_current_time"), "It is ten o'clock."])
    with SessionLog() as log, _agent(first_llm, workspace, log) as agent:
        assert agent.run("What time is it?").answer == "It is ten o'clock."
    session_id = log.id

    second_llm = ScriptedLLM(["Yes, in the morning."])  # a new process: a fresh model, the log on disk
    with SessionLog(session_id) as log2, _agent(second_llm, workspace, log2) as agent:
        result = agent.resume(events_to_continue(session_id), message="Is that morning?")
    assert result.stopped == "answer" and result.answer == "Yes, in the morning."
    prompt = second_llm.prompt_texts[0]
    # the finished run's last prompt and the answer it got are the new prompt's prefix: its KV state is reusable
    assert prompt.startswith(first_llm.prompt_texts[-1] + "It is ten o'clock.")
    assert prompt.count("What time is it?") >= 1 and "Is that morning?" in prompt

    third_llm = ScriptedLLM(["Goodbye."])  # and again: the continued run's answer is restored, no turn invented
    with SessionLog(session_id) as log3, _agent(third_llm, workspace, log3) as agent:
        assert agent.resume(events_to_continue(session_id), message="Thanks.").answer == "Goodbye."
    assert third_llm.prompt_texts[0].startswith(second_llm.prompt_texts[-1] + "Yes, in the morning.")
    kinds = [e.kind for e in read_events(log.path)]
    assert kinds.count("run_end") == 3 and kinds.count("run_resumed") == 2


def test_prompt_at_step_n_of_a_recorded_session_is_what_the_model_got(workspace: Path, monkeypatch) -> None:
    import json

    from typer.testing import CliRunner

    from hermes_local.cli.app import app
    from hermes_local.runtime import build_registry

    llm = ScriptedLLM([tool_call_text("get_current_time"), tool_call_text("list_dir"), "Done."])
    with SessionLog() as log:
        agent = build_agent(
            llm,
            load_settings({}),
            workspace=workspace,
            registry=build_registry(),
            approver=Approver(),
            on_event=log.log,
        )
        with agent:
            agent.run("What time is it, and what is here?")
    monkeypatch.chdir(workspace)
    for step in (1, 2, 3):
        res = CliRunner().invoke(app, ["prompt", "--session", log.id, "--step", str(step), "--json"])
        assert res.exit_code == 0, res.stderr
        assert json.loads(res.stdout)["text"] == llm.prompt_texts[step - 1], step
    missing = CliRunner().invoke(app, ["prompt", "--session", log.id, "--step", "9"])
    assert missing.exit_code == 2 and "no model reply at step 9" in missing.stderr


def test_sessions_show_raw_prints_each_steps_new_prompt_text_and_raw_reply(workspace: Path, monkeypatch) -> None:
    import os

    from typer.testing import CliRunner

    from hermes_local.cli.app import app
    from hermes_local.runtime import build_registry

    replies = ["<plan>current: time</plan>" + tool_call_text("get_current_time"), "It is now."]
    llm = ScriptedLLM(list(replies))
    with SessionLog() as log:
        agent = build_agent(
            llm,
            load_settings({"answer_guard": False}),  # step 1 free: the raw reply is the scripted text as written
            workspace=workspace,
            registry=build_registry(),
            approver=Approver(),
            on_event=log.log,
        )
        with agent:
            agent.run("What time is it?")
    monkeypatch.chdir(workspace)
    res = CliRunner().invoke(app, ["sessions", "show", log.id, "--raw"])
    assert res.exit_code == 0, res.stderr
    first, second = llm.prompt_texts
    added = second[len(os.path.commonprefix([second, first + replies[0]])) :]
    assert "<tool_response>" in added
    assert f"   ── prompt (new text) ──\n{first}\n" in res.stdout and f"{added}\n" in res.stdout
    assert f"   ── raw reply ──\n{replies[0]}\n" in res.stdout and "   plan: current: time" in res.stdout
