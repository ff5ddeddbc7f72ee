"""`decoding.ThoughtWatch`: where a free decode is inside a thought, and when its reasoning budget is spent."""

from __future__ import annotations

from hermes_local.calls.thoughts import HERMES_THOUGHT, KNOWN_THOUGHTS, THINK
from hermes_local.engines.inprocess.decoding import ThoughtWatch


def feed(watch: ThoughtWatch, pieces: list[str]) -> list[str | None]:
    """Feed the pieces one token each; what the watch asks to write after each."""
    text, asked = "", []
    for n, piece in enumerate(pieces, 1):
        text += piece
        asked.append(watch.update(text, n))
    return asked


def test_a_thought_over_budget_asks_for_its_own_closing_marker() -> None:
    watch = ThoughtWatch(KNOWN_THOUGHTS, 3)
    asked = feed(watch, ["Hi. ", "<|startofthought|>", "a", "b", "c", "d"])
    assert asked == [None, None, None, None, "<|endofthought|>", "<|endofthought|>"] and watch.inside


def test_a_thought_closed_in_time_ends_the_watch_and_marks_where() -> None:
    watch = ThoughtWatch((THINK,), 10)
    text = "<think>maybe <tool_call>{}</tool_call></think>\n<tool_call>"
    assert watch.update(text[:20], 3) is None and watch.inside  # inside: the lazy grammar must wait
    assert watch.update(text, 9) is None and not watch.inside
    assert text[watch.closed_at :] == "\n<tool_call>"  # the trigger is searched from here


def test_a_prompt_opened_thought_counts_from_the_first_token() -> None:
    watch = ThoughtWatch.start((HERMES_THOUGHT, THINK), 2, "...<|im_start|>assistant\n<|startofthought|>\n")
    assert watch is not None and watch.inside
    assert feed(watch, ["x", "y"]) == [None, "<|endofthought|>"]
    assert ThoughtWatch.start((), 2, "<think>") is None


def test_text_inside_a_constrained_call_never_opens_a_thought() -> None:
    watch = ThoughtWatch((THINK,), 1)
    text = '<tool_call>{"name": "w", "arguments": {"content": "<think>"}}</tool_call>'
    watch.skip(len(text))
    assert watch.update(text + " done", 30) is None and not watch.inside
