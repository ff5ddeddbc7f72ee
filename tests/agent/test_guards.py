"""The guards of issue 11 on the scripted model: the no-tool answer guard, final_answer, the loop guard."""

from __future__ import annotations

from pathlib import Path

from hermes_local.agent.guards import LoopGuard, needs_tool
from hermes_local.config import load_settings
from hermes_local.events import Event, Guarded
from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
from hermes_local.tools import Approver, ToolRegistry, default_registry, tool

call = tool_call_text


@tool
def get_weather(city: str) -> str:
    """Get the weather forecast for a city.

    Args:
        city: City name.
    """
    return f"sunny in {city}"


@tool
def step_a() -> str:
    """Return A."""
    return "A"


@tool
def step_b() -> str:
    """Return B."""
    return "B"


COUNTS: dict[str, int] = {}


def _count(name: str) -> str:
    COUNTS[name] = COUNTS.get(name, 0) + 1
    return f"{name} call {COUNTS[name]}"


@tool(volatile=True)
def tick() -> str:
    """Return a new reading each call."""
    return _count("tick")


@tool(volatile=True)
def tock() -> str:
    """Return another new reading each call."""
    return _count("tock")


@tool(volatile=True)
def tack() -> str:
    """Return a third new reading each call."""
    return _count("tack")


def make_agent(llm: ScriptedLLM, workspace: Path, events: list[Event] | None = None, **settings: object):
    registry = default_registry()
    for t in (get_weather, step_a, step_b, tick, tock, tack):
        registry.register(t)
    sink = events.append if events is not None else None
    return build_agent(
        llm,
        load_settings(settings),
        workspace=workspace,
        registry=registry,
        approver=Approver(allow=["append_to_memo"], interactive=False),
        on_event=sink,
    )


# Goals labelled with the tool they need first (None: answerable from knowledge), English and Chinese,
# with every built-in offered (a database given with --db, an allowed host). The first 22 are issue 11's.
GUARD_CORPUS: list[tuple[str, str | None]] = [
    ("What time is it?", "get_current_time"),
    ("What time is it? Note it in my memo.", "get_current_time"),
    ("What is today's date?", "get_current_time"),
    ("现在几点？", "get_current_time"),
    ("今天是几号？", "get_current_time"),
    ("Summarise notes.txt", "read_file"),
    ("What does the file todo.md say?", "read_file"),
    ("读取 notes.txt 的内容", "read_file"),
    ("List the folders in my workspace", "list_dir"),
    ("看看目录里有什么", "list_dir"),
    ("Which customers ordered most last week?", "query_database"),
    ("What is the total revenue in the database?", "query_database"),
    ("数据库里有多少订单？", "query_database"),
    ("Fetch https://example.com/status and tell me if it is up", "http_get"),
    ("Note in my memo: buy milk.", "append_to_memo"),
    ("What's the weather in Paris?", "get_weather"),
    ("What is 2 + 2? Answer with the number.", None),
    ("Say hello.", None),
    ("Translate 'good morning' into French.", None),
    ("Explain what a linked list is.", None),
    ("写一首关于春天的短诗", None),
    ("What is the capital of Italy?", None),
    # issue 27: write/report/save -> a write tool; the source comes first when there is one
    ("Write 'hello world' into hello.txt", "write_file"),
    ("Create a file called todo.md with three items", "write_file"),
    ("Save a haiku about autumn to poem.txt", "write_file"),
    ("把 hello 写入 hello.txt", "write_file"),
    ("Summarise notes.txt into report.md", "read_file"),
    ("Write a report of the top 5 customers by revenue from the database into report.md", "query_database"),
    ("Create report.md summarising sales from the database", "query_database"),
    ("Write the result of the query on orders into orders.md", "query_database"),
    ("Save the current time into time.txt", "get_current_time"),
    # "the time of X" inside a file task is not a clock question
    ("Note the time of the next meeting from notes.txt in my memo", "read_file"),
    ("Put the time of the standup in agenda.md into my memo", "read_file"),
    ("What is the date of the meeting in notes.txt?", "read_file"),
    ("What's the weather tomorrow in Rome?", "get_weather"),
    # database words (a database is given)
    ("Top 5 customers by revenue", "query_database"),
    ("Run the SQL query SELECT count(*) FROM orders", "query_database"),
    ("Which tables are in the database?", "query_database"),
    ("How many rows does data.csv have?", "read_file"),
    # the rest of the built-ins
    ("What is in the workspace folder?", "list_dir"),
    ("List the files in the docs folder", "list_dir"),
    ("Read config.toml and tell me the port", "read_file"),
    ("Remember that my favourite colour is blue", "remember"),
    ("Jot down in my memo that the printer is fixed", "append_to_memo"),
    ("Run the command `ls -la` in the shell", "run_shell"),
    ("Download http://127.0.0.1:8000/data.json and summarise it", "http_get"),
    ("把今天的日期记在备忘里", "get_current_time"),
    # knowledge
    ("Write a short poem about the sea.", None),
    ("Explain what SQL is.", None),
    ("What does 'carpe diem' mean?", None),
    ("How many days are in a leap year?", None),
    ("Tell me a joke.", None),
    # a goal that brings its own text (the README's `echo "Summarise this: ..." | hermes-local run -`)
    ("Summarise this: the meeting moved to Tuesday; bring the budget sheet.", None),
    ("Summarise the following:\nWe met on Monday and agreed on the plan.", None),
]


def guard_registry() -> ToolRegistry:
    """Every built-in, `remember` and the weather tool: the corpus is labelled against these."""
    from hermes_local.longterm import LONGTERM_TOOLS

    registry = default_registry()
    for t in (*LONGTERM_TOOLS, get_weather):
        registry.register(t)
    return registry


def test_guard_detection_on_the_labelled_corpus(capsys) -> None:
    registry = guard_registry()
    right = [needs_tool(goal, registry) == expected for goal, expected in GUARD_CORPUS]
    needing = [ok for ok, (_, expected) in zip(right, GUARD_CORPUS, strict=True) if expected]
    plain = [ok for ok, (_, expected) in zip(right, GUARD_CORPUS, strict=True) if not expected]
    with capsys.disabled():
        print(f"\nanswer guard: {sum(needing)}/{len(needing)} tool goals named right, {sum(plain)}/{len(plain)} kept")
    assert len(GUARD_CORPUS) >= 40
    wrong = [(g, needs_tool(g, registry), e) for ok, (g, e) in zip(right, GUARD_CORPUS, strict=True) if not ok]
    assert not wrong, wrong


def test_database_words_name_query_database_only_when_a_database_is_offered() -> None:
    with_db = guard_registry()
    without = with_db.subset([n for n in with_db.names() if n != "query_database"])
    assert needs_tool("Top 5 customers by revenue", with_db) == "query_database"
    assert needs_tool("Write a report of sales from the database into report.md", without) == "write_file"


def test_guard_only_names_registered_tools() -> None:
    assert needs_tool("What time is it?", ToolRegistry([step_a])) is None


def test_answer_without_a_tool_is_bounced_once_and_the_next_step_must_call_a_tool(workspace: Path) -> None:
    events: list[Event] = []
    llm = ScriptedLLM(["It is 10:00 on 1 Jan 2023.", call("get_current_time"), "It is the time shown."])
    result = make_agent(llm, workspace, events).run("What time is it?")
    llm.assert_all_used()
    assert result.stopped == "answer" and result.answer == "It is the time shown."
    assert result.to_json()["guarded"] == [{"step": 1, "reason": "no_tool", "tool": "get_current_time"}]
    assert [c.name for c in result.tool_calls] == ["get_current_time"]
    bounced = llm.prompt_texts[1]
    assert "answered without calling any tool" in bounced and "call get_current_time" in bounced
    assert bounced.endswith("<|im_start|>assistant\n<tool_call>\n")  # forced: the grammar starts at once
    assert llm.calls[1].grammar and llm.calls[1].grammar_trigger is None
    assert llm.calls[2].grammar_trigger == "<tool_call>"  # back to auto afterwards
    guarded = [e for e in events if isinstance(e, Guarded)]
    assert len(guarded) == 1 and guarded[0].tool == "get_current_time"
    assert guarded[0].to_dict()["kind"] == "guarded"


def test_only_one_bounce_per_run(workspace: Path) -> None:
    llm = ScriptedLLM(["It is noon.", "<tool_call>\n{broken", "Still noon."])
    result = make_agent(llm, workspace).run("What time is it?")
    assert len(result.guarded) == 1 and result.answer == "Still noon."


def test_guard_can_be_switched_off(workspace: Path) -> None:
    llm = ScriptedLLM(["It is noon."])
    result = make_agent(llm, workspace, answer_guard=False).run("What time is it?")
    assert len(result.guarded) == 0 and result.answer == "It is noon."


def test_no_bounce_for_knowledge_or_after_a_tool_worked(workspace: Path) -> None:
    llm = ScriptedLLM(["4"])
    assert make_agent(llm, workspace).run("What is 2 + 2? Answer with the number.").guarded == []
    llm = ScriptedLLM([call("get_current_time"), "It is noon."])
    assert make_agent(llm, workspace).run("What time is it?").guarded == []


def test_no_bounce_in_none_mode(workspace: Path) -> None:
    llm = ScriptedLLM(["It is noon."])
    assert make_agent(llm, workspace, tool_choice="none").run("What time is it?").guarded == []


def test_required_mode_bounces_a_final_answer_given_before_any_tool(workspace: Path) -> None:
    script = [
        call("final_answer", answer="It is 10:59."),
        call("get_current_time"),
        call("final_answer", answer="It is noon."),
    ]
    llm = ScriptedLLM(script)
    events: list[Event] = []
    result = make_agent(llm, workspace, events, tool_choice="required", max_steps=5).run("What time is it?")
    llm.assert_all_used()
    assert len(result.guarded) == 1 and result.stopped == "answer" and result.answer == "It is noon."
    assert [(c.name, c.error_kind) for c in result.tool_calls] == [
        ("final_answer", "guarded"),
        ("get_current_time", None),
        ("final_answer", None),
    ]
    assert "call get_current_time" in (result.tool_calls[0].error or "")
    assert "call get_current_time" in llm.prompt_texts[1]  # the bounce is the call's tool result
    assert [e.tool for e in events if isinstance(e, Guarded)] == ["get_current_time"]
    grammars = [c.grammar or "" for c in llm.calls]
    # the goal needs a tool: decided before step 1, so final_answer is left out from the start (issue 27);
    # the scripted model ignores grammars, so the bounce still shows: after it, too, a real tool must come
    assert "final_answer" not in grammars[0] and "final_answer" not in grammars[1]
    assert "get_current_time" in grammars[1] and "final_answer" in grammars[2]


def test_required_mode_bounces_a_final_answer_with_no_real_call_once(workspace: Path) -> None:
    twice = [call("final_answer", answer="10:59"), call("final_answer", answer="11:00")]
    result = make_agent(ScriptedLLM(twice), workspace, tool_choice="required").run("What time is it?")
    assert len(result.guarded) == 1 and result.answer == "11:00" and result.steps == 2
    assert result.outcome == "unverified" and result.exit_code == 6  # the second is accepted, never as a success
    # the user asked for tools: a final answer at step 1 with no real call goes back even on a knowledge question
    knowledge = [call("final_answer", answer="4"), call("final_answer", answer="4")]
    result = make_agent(ScriptedLLM(knowledge), workspace, tool_choice="required").run("What is 2 + 2?")
    assert len(result.guarded) == 1 and result.answer == "4" and result.outcome == "unverified"
    off = make_agent(ScriptedLLM(knowledge), workspace, tool_choice="required", answer_guard=False)
    assert off.run("What time is it?").guarded == []


def test_required_mode_can_finish_with_final_answer(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time"), call("final_answer", answer="It is noon.")])
    result = make_agent(llm, workspace, tool_choice="required", max_steps=5).run("What time is it?")
    llm.assert_all_used()
    assert result.stopped == "answer" and result.answer == "It is noon." and result.steps == 2
    assert [c.name for c in result.tool_calls] == ["get_current_time", "final_answer"]
    assert '"name": "final_answer"' in llm.prompt_texts[0] and "final_answer" in (llm.calls[1].grammar or "")
    assert result.to_json()["tool_calls"][1]["name"] == "final_answer"


def test_final_answer_is_offered_only_in_required_mode(workspace: Path) -> None:
    llm = ScriptedLLM(["4"])
    make_agent(llm, workspace).run("What is 2 + 2?")
    assert "final_answer" not in llm.prompt_texts[0]


def test_identical_repeat_is_refused_with_kind_loop(workspace: Path) -> None:
    llm = ScriptedLLM([call("get_current_time")] * 3 + ["done"])
    result = make_agent(llm, workspace).run("t")
    assert [c.error_kind for c in result.tool_calls] == [None, None, "loop"]
    assert "Change strategy" in (result.tool_calls[2].error or "")


def test_cycle_of_two_is_refused_on_its_third_repetition(workspace: Path) -> None:
    # tick and tock answer differently every time, so only the cycle itself shows there is no progress
    llm = ScriptedLLM([call("tick"), call("tock")] * 3 + ["done"])
    result = make_agent(llm, workspace, max_steps=8).run("weather and time")
    kinds = [c.error_kind for c in result.tool_calls]
    assert kinds == [None, None, None, None, None, "loop"]
    assert "cycle of 2 calls (tick, tock)" in (result.tool_calls[5].error or "")


def test_cycle_of_three_is_refused(workspace: Path) -> None:
    cycle = [call("tick"), call("tock"), call("tack")]
    llm = ScriptedLLM(cycle * 3 + ["done"])
    result = make_agent(llm, workspace, max_steps=10).run("go")
    assert [c.error_kind for c in result.tool_calls][-1] == "loop"
    assert all(c.error_kind is None for c in result.tool_calls[:-1])


def test_a_result_seen_twice_is_not_fetched_a_third_time(workspace: Path) -> None:
    outputs = [call("step_a"), call("step_b"), call("step_a"), call("get_current_time"), call("step_a"), "done"]
    result = make_agent(ScriptedLLM(outputs), workspace, max_steps=8).run("go")
    assert [c.error_kind for c in result.tool_calls] == [None, None, None, None, "loop"]
    assert "same result" in (result.tool_calls[4].error or "")


def test_volatile_results_differ_so_they_are_not_refused() -> None:
    from hermes_local.testing import outcome

    history = [outcome(1, "get_current_time", {}, True), outcome(2, "step_a", {}, True)]
    history.append(outcome(3, "get_current_time", {}, True))
    history[0].result.data, history[2].result.data = "10:00:01", "10:00:07"
    assert LoopGuard().refusal(history, [], "get_current_time", {}) is None
