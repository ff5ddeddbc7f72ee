"""Which dialect reads a family's calls, and the per-family parse corpus check (`parse_corpus.py --families`).

`family_dialect(name)` is the dialect whose parser reads that family's replies: a fixed dialect by name, or
for `deepseek` and `minimax` (rendered by their own GGUF template) the `gguf` dialect with that call format.
`family_corpus_misses(load_cases(folder))` runs tests/data/multi_family_calls.jsonl and family_calls.jsonl
(each case cites the model card, template or tracker thread it comes from)
through those parsers. Parses only; runs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hermes_local.dialects.base import Dialect

GGUF_FAMILIES = ("deepseek", "minimax")
CORPUS_NAMES = ("multi_family_calls.jsonl", "family_calls.jsonl")
NAMES = ["get_weather", "get_time", "special_function", "special_function_with_opt", "run_in_terminal", "python"]


def family_dialect(name: str) -> Dialect:
    """The dialect that parses family `name`'s replies."""
    from hermes_local.dialects import get_dialect

    return get_dialect("gguf", tool_call_format=name) if name in GGUF_FAMILIES else get_dialect(name)


def load_cases(folder: Path) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for name in CORPUS_NAMES:
        path = folder / name
        cases += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return cases


def family_corpus_misses(cases: Iterable[dict[str, Any]]) -> dict[str, tuple[int, int, list[str]]]:
    """family -> (cases parsed exactly, cases, one line per miss). A case is parsed when its calls are exactly
    `calls` and its error count is `expect_errors` (0 unless given); the tool names offered are the corpus's
    own plus every name the case expects."""
    out: dict[str, tuple[int, int, list[str]]] = {}
    for case in cases:
        names = [*NAMES, *(c["name"] for c in case["calls"])]
        parsed = family_dialect(case["dialect"]).parse(case["text"], names)
        got = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
        right, count, misses = out.get(case["dialect"], (0, 0, []))
        if got == case["calls"] and len(parsed.errors) == case.get("expect_errors", 0):
            right += 1
        else:
            misses.append(f"{case['source']}: calls={got} errors={parsed.errors}")
        out[case["dialect"]] = (right, count + 1, misses)
    return out
