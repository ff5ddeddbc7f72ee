"""Export a recorded `run` session as an eval case (`hermes-local sessions export --as-case`).

`session_to_case` turns the session's logged events into a case (task, tools, expected calls and
answer checks) plus the replay texts that reproduce it, with its `origin` (`verdict.py`: the user's verdict and
note, whether the run was undone, which of its files the user changed since); a run rated bad keeps only what
a better run must also do (`verdict.regression_checks`). A case never carries an approval, and a bad run's
non-read calls are denied when replayed (`trust.recorded_approvals`). `append_case` adds a case to a JSONL suite, and
`suite_from_sessions` writes one of every session rated good or bad, with its replay files.
Does not run anything: `suite.py` runs and scores suites.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from hermes_local.config import load_settings
from hermes_local.errors import UserError
from hermes_local.evals.cases import ANSWER_WORDS, safe_relative
from hermes_local.evals.trust import recorded_approvals
from hermes_local.evals.verdict import origin_of, rated_sessions, regression_checks, written_files
from hermes_local.events import AssistantText, Event, RunEnd, RunStart, ToolFinished


def session_to_case(
    events: list[Event], case_id: str, session_id: str = ""
) -> tuple[dict[str, Any], list[str], list[str]]:
    """(case, replay texts, warnings) from a recorded `run` session (`session_id`: the log it came from)."""
    from hermes_local.runtime import build_registry

    case_id = re.sub(r"[^A-Za-z0-9_.-]", "-", case_id).lstrip("-_.") or "case"
    start = next((e for e in events if isinstance(e, RunStart)), None)
    if start is None:
        raise UserError("the session has no run_start event; only `hermes-local run` sessions can become cases")
    end = next((e for e in reversed(events) if isinstance(e, RunEnd)), None)
    if end is None:
        raise UserError("the session never finished (no run_end); resume it first with `run --resume ID`")
    registry = build_registry()
    warnings: list[str] = []
    results = [e.outcome for e in events if isinstance(e, ToolFinished) and e.outcome.name != "invalid_tool_call"]
    tools: list[str] = []
    expected: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    permission: dict[str, str] = {}  # of each tool the run called: read, write or dangerous
    deny: list[str] = []
    servers = load_settings().mcp.servers  # an MCP tool of a configured server: the eval starts it too
    for e in results:
        name = e.name
        t = registry.get(name)
        server = servers.get(name.partition("__")[0]) if "__" in name else None
        if t is None and server is not None and e.error_kind != "not_found":
            tools += [name] if name not in tools else []
            permission[name] = server.permission or "write"  # not declared: never counted as a read
            if e.ok:
                expected.append({"name": name, "arguments": e.arguments})
            continue
        if t is None:
            if name not in tools and e.error_kind != "not_found":
                warnings.append(f"tool {name!r} is not built in: add its tools module path to the case's tools")
            continue
        if name not in tools:
            tools.append(name)
        permission[name] = t.permission
        if e.ok:
            expected.append({"name": name, "arguments": e.arguments})
            path = str(e.arguments.get(t.traits.reads_path, "")) if t.traits.reads_path else ""
            if t.traits.reads_path and isinstance(e.data, str) and safe_relative(path):  # a file's text
                if "truncated" not in e.summary:
                    files.setdefault(path, e.data)
        elif e.error_kind == "permission_denied" and t.permission == "write":
            deny.append(name)
    deny = [n for n in dict.fromkeys(deny) if not any(x["name"] == n for x in expected)]
    declared = [t.traits for e in results if (t := registry.get(e.name)) is not None]
    if any(traits.needs == "database" for traits in declared):
        warnings.append("the session queried a database: add fixtures.database (SQL statements) so the case can run")
    if any(traits.lists_path for traits in declared):
        warnings.append("the session listed folders: add the files it saw to fixtures.files")
    answer = end.answer or ""
    case: dict[str, Any] = {"id": case_id, "task": start.goal, "tools": tools}
    if files:
        case["fixtures"] = {"files": files}
    checks: dict[str, Any] = {"tool_calls": expected}
    words = answer.split()[:ANSWER_WORDS]
    if words:
        checks["answer_contains"] = [" ".join(words)]
    origin, edited = origin_of(events, session_id)
    if origin["verdict"] == "bad":  # the recorded calls and answer are what the user did not want
        checks = regression_checks(checks, written_files(events), edited)
    case["checks"] = checks
    case["origin"] = origin
    bad_deny, deny_calls, notes = recorded_approvals(results, permission, origin["verdict"])
    warnings += notes
    deny = list(dict.fromkeys([*deny, *bad_deny]))
    if deny:
        case["deny"] = deny
    if deny_calls:
        case["deny_calls"] = deny_calls
    steps = int(end.result.get("steps") or 0)
    case["max_steps"] = steps if end.stopped == "max_steps" else max(steps, 8)
    texts = [e.text for e in events if isinstance(e, AssistantText)]
    return case, texts, warnings


def append_case(path: Path, case: dict[str, Any]) -> None:
    """Append one case line to a cases file, refusing a duplicate id."""
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                if line.strip() and json.loads(line).get("id") == case["id"]:
                    raise UserError(f"{path} already has a case {case['id']!r}; pass --id NEW_ID")
        prefix = "" if path.read_text(encoding="utf-8").endswith("\n") or path.stat().st_size == 0 else "\n"
    else:
        prefix = ""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(prefix + json.dumps(case, ensure_ascii=False) + "\n")


def suite_from_sessions(verdict: str, folder: Path) -> tuple[Path, int, list[str]]:
    """(cases file, cases written, warnings): every session rated `verdict` as a case in `folder`/cases.jsonl,
    with its replay file in `folder`/replay/ (so `--model replay:FOLDER/replay` reproduces the recorded runs)."""
    from hermes_local.engines.replay import write_replay

    sessions = rated_sessions(verdict)
    if not sessions:
        raise UserError(f"no session is rated {verdict}; rate one with: hermes-local sessions rate ID {verdict}")
    cases, count, warnings = folder / "cases.jsonl", 0, []
    if cases.exists():
        raise UserError(f"{cases} exists already; give an empty folder (or none) for the suite")
    folder.mkdir(parents=True, exist_ok=True)
    for session_id, events in sessions:
        try:
            case, texts, notes = session_to_case(events, f"session-{session_id}", session_id)
        except UserError as exc:
            warnings.append(f"session {session_id} left out: {exc.line}")
            continue
        append_case(cases, case)
        write_replay(folder / "replay" / f"{case['id']}.jsonl", texts)
        warnings += [f"session {session_id}: {note}" for note in notes]
        count += 1
    return cases, count, warnings
