"""Templates are untrusted code: prompt overrides, a GGUF's own chat template and workflow parameters.

Each render runs in `prompts.BoundedSandbox`: no escape to Python internals, a time and output budget,
and one line instead of a traceback for every way a template can go wrong. A prompt override written
during a run changes nothing until the next run (the snapshot is taken at the run's start).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hermes_local.config import home_dir
from hermes_local.dialects.gguf import GGUFDialect, compile_template
from hermes_local.errors import UserError
from hermes_local.prompts import Segments, TemplateRefused, check_overrides, render
from hermes_local.workflow.run import render_value, template_env

ESCAPE = "{{ cycler.__init__.__globals__.os.system('touch " + "{marker}') }}"
REMINDER = {"goal": "g", "progress": "", "lines": [], "current": "", "todo": ""}
USER = [{"role": "user", "content": Segments.untrusted("hi")}]


def _override(name: str, text: str) -> Path:
    folder = home_dir() / "prompts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_prompt_override_cannot_reach_os_system(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    _override("tool_response.jinja", ESCAPE.replace("{marker}", str(marker)))
    check_overrides()
    with pytest.raises(UserError, match="tool_response.jinja.*sandbox forbids"):
        render("tool_response.jinja", responses=[{"name": "x", "content": "y"}])
    assert not marker.exists()


def test_an_override_written_during_a_run_is_not_rendered_until_the_next_run(tmp_path: Path) -> None:
    check_overrides()  # the run starts with no overrides
    shipped = render("goal_reminder.jinja", **REMINDER).text
    _override("goal_reminder.jinja", "PLANTED {{ goal }}")  # a tool writes into the agent's home mid-run
    assert render("goal_reminder.jinja", **REMINDER).text == shipped
    check_overrides()  # the next run reads (and validates) it
    assert render("goal_reminder.jinja", **REMINDER).text == "PLANTED g"


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}", "characters|time"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "time"),
        ("{{ 'x' * 100000000 }}", "repeats"),
        ("{{ 2 ** 100000000 }}", "power"),
        ("{{ messages | tojson(indent=100000000) }}", "size|indent"),
        ("{{ lipsum(100000) }}", "lipsum|undefined"),
        ("{{ 'x' | center(500000000) }}", "size"),
        ("{{ '%999999999s' % 'x' }}", "width"),
        ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "recurses"),
        ("{{ strftime_now('%Y\udcff') }}", "strftime_now"),
        ("{{ raise_exception('nope') }}", "nope"),
        ("{{ cycler.__init__.__globals__ }}", "forbids|unsafe|__init__"),
    ],
)
def test_a_hostile_chat_template_ends_in_one_line_within_budget(source: str, reason: str) -> None:
    started = time.monotonic()
    with pytest.raises(UserError, match=reason) as caught:
        GGUFDialect(source).render(USER)
    assert time.monotonic() - started < 10
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_a_chat_template_syntax_error_is_one_line() -> None:
    with pytest.raises(UserError, match="does not compile"):
        compile_template("{% for %}")


def test_content_markers_in_tool_definitions_are_refused() -> None:
    source = "{% for t in tools %}{{ t.function.description }}{% endfor %}"
    source += "{% for m in messages %}{{ m.content }}{% endfor %}"
    tools = [{"type": "function", "function": {"name": "x", "description": "\ue0020\ue003\ue0029\ue003"}}]
    with pytest.raises(UserError, match="private-use"):
        GGUFDialect(source).render(USER, tools)


def test_a_template_that_makes_up_a_content_marker_is_refused() -> None:
    with pytest.raises(UserError, match="content marker"):
        GGUFDialect("{{ '\ue0027\ue003' }}").render(USER)


@pytest.mark.parametrize(
    "value",
    [
        "{{ 'x' * 100000000 }}",
        "a{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
        "{{ 9 ** 999999999 }}",
    ],
)
def test_a_hostile_workflow_parameter_is_a_template_error_within_budget(value: str) -> None:
    started = time.monotonic()
    with pytest.raises(TemplateRefused):
        render_value(template_env(), {"path": value}, {"vars": {}})
    assert time.monotonic() - started < 10


def test_ordinary_workflow_parameters_still_render() -> None:
    env = template_env()
    assert render_value(env, "{{ vars.n * 2 }}", {"vars": {"n": 21}}) == 42
    assert render_value(env, "{{ today | add_days(1) }}", {"today": "2026-01-31"}) == "2026-02-01"
    assert render_value(env, "r-{{ 'ab' * 3 }}", {}) == "r-ababab"
    assert render_value(env, "{{ vars.ts + 86400 }}", {"vars": {"ts": 1_700_000_000}}) == 1_700_086_400
    assert render_value(env, "{{ 1700000000 | int }}", {}) == 1_700_000_000
