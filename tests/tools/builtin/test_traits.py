"""What the built-ins declare about themselves (`Traits`): the tables the guards, the plan, routing and the evals
used to keep as lists of tool names, read back from the tool definitions, value for value (for the tools those
tables named: a new built-in declares its own and is tested beside it)."""

from __future__ import annotations

from hermes_local.agent.guards import how_to_call
from hermes_local.longterm import LONGTERM_TOOLS
from hermes_local.tools import ToolRegistry, default_registry
from hermes_local.tools.builtin import file_effect
from hermes_local.tools.builtin.interaction import final_answer
from hermes_local.tools.toolsets import group_of, open_toolset_tool, toolset_catalog, unusable

TABLED = (
    "get_current_time read_file list_dir write_file append_to_memo remember query_database run_shell http_get ask_user "
    "final_answer open_toolset"
).split()


def _everything() -> ToolRegistry:
    registry = default_registry()
    for t in [*LONGTERM_TOOLS, final_answer]:
        registry.register(t)
    registry.register(open_toolset_tool(registry))
    return registry.subset(TABLED)


def test_each_builtin_names_its_toolset_and_what_it_is_for() -> None:
    registry = _everything()
    by_group: dict[str, list[str]] = {}
    for name in registry.names():
        by_group.setdefault(group_of(registry, name), []).append(name)
    assert by_group == {
        "time": ["get_current_time"],
        "files": ["read_file", "list_dir", "write_file"],
        "memory": ["append_to_memo", "remember"],
        "db": ["query_database"],
        "shell": ["run_shell"],
        "web": ["http_get"],
        "user": ["ask_user", "final_answer"],
        "routing": ["open_toolset"],
    }
    about = {group: line.split(" (", 1)[1] for group, line in toolset_catalog(registry).items()}
    assert about == {
        "time": "the current local date and time)",
        "files": "read, list and write files in the workspace)",
        "memory": "note things in memo.md or remember facts across sessions)",
        "db": "read-only SQL on the user's SQLite database)",
        "shell": "run a shell command in the workspace)",
        "web": "fetch a URL from an allow-listed host)",
        "user": "ask the user a question; end the run with the final answer)",
    }


def test_what_a_run_must_give_a_builtin() -> None:
    registry = _everything()
    assert {t.name: t.traits.needs for t in registry if t.traits.needs} == {
        "query_database": "database",
        "http_get": "host",
        "ask_user": "person",
        "remember": "memory",
    }
    assert list(unusable(registry, db=False, hosts=False, person=False)) == ["query_database", "http_get", "ask_user"]
    assert unusable(registry, db=True, hosts=True, person=True) == {}


def test_what_the_answer_guard_reads() -> None:
    registry = _everything()
    ranks = {t.name: [(c.rank, c.last_resort) for c in t.traits.cues] for t in registry if t.traits.cues}
    assert ranks == {
        "get_current_time": [(40, False), (40, True)],
        "read_file": [(60, False)],
        "list_dir": [(50, False)],
        "write_file": [(100, False)],
        "append_to_memo": [(80, False)],
        "query_database": [(10, False), (70, False)],
        "run_shell": [(30, False)],
        "http_get": [(20, False)],
        "remember": [(90, False)],
    }
    assert {t.name for t in registry if t.traits.steers_run} == {"ask_user", "final_answer", "open_toolset"}
    assert {t.name for t in registry if t.traits.ends_run} == {"final_answer"}
    hints = {t.name: how_to_call(t) for t in registry if t.traits.call_hint}
    assert hints == {
        "write_file": "call write_file with the path and the full content",
        "append_to_memo": "call append_to_memo with the line to note",
        "query_database": "call query_database with one SELECT statement",
        "read_file": "call read_file with the file's path",
        "http_get": "call http_get with the URL",
    }
    assert how_to_call(registry.get("run_shell")) == "call run_shell"  # type: ignore[arg-type]


def test_what_a_call_does_to_the_workspace() -> None:
    registry = _everything()
    assert {t.name for t in registry if t.traits.sandboxed} == {"run_shell"}
    assert {t.name for t in registry if t.permission != "read" and not t.traits.checkpoints_itself} == set()
    assert {t.name: t.traits.reads_path for t in registry if t.traits.reads_path} == {"read_file": "path"}
    assert {t.name: t.traits.lists_path for t in registry if t.traits.lists_path} == {"list_dir": "path"}
    written = file_effect("write_file", {"path": "a/b.md", "content": "x\ny"})
    assert written is not None and (written.path, written.text, written.append) == ("a/b.md", "x\ny", False)
    noted = file_effect("append_to_memo", {"content": "  buy\n milk "})
    assert noted is not None and (noted.path, noted.text, noted.append) == ("memo.md", "- buy milk\n", True)
    assert [n for n in registry.names() if file_effect(n, {}) is not None] == ["write_file", "append_to_memo"]
