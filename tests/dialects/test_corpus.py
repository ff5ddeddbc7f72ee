"""The multi-family parse target: >= 96 % of the corpus parsed to exactly the right calls, per dialect.

tests/data/multi_family_calls.jsonl holds replies in the shapes each family's models write (from the
model cards and llama.cpp's tests/test-chat.cpp expectations: Hermes, Qwen 2.5/3/3-Coder, Llama
3.1-3.3 / functionary / firefunction, Mistral v3 / Nemo / Small 3.2 / Ministral / Magistral), each
with the dialect that reads it and the calls it must give. Qwen3-Coder parameter values are text
(`"1"`): the tool's schema validation converts them, as llama.cpp does from the schema.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from hermes_local.dialects import get_dialect

CORPUS = Path(__file__).parents[1] / "data" / "multi_family_calls.jsonl"
NAMES = ["get_weather", "get_time", "special_function", "special_function_with_opt", "run_in_terminal", "python"]


def test_multi_family_corpus_meets_the_96_percent_target() -> None:
    cases = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    total, right = Counter(), Counter()
    misses = []
    for case in cases:
        parsed = get_dialect(case["dialect"]).parse(case["text"], NAMES)
        got = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
        total[case["dialect"]] += 1
        if got == case["calls"] and not parsed.errors:
            right[case["dialect"]] += 1
        else:
            misses.append((case["source"], got, parsed.errors))
    assert set(total) == {"hermes", "qwen", "llama3", "mistral"} and sum(total.values()) >= 60
    share = sum(right.values()) / sum(total.values())
    print(f"multi-family corpus: {sum(right.values())}/{sum(total.values())} = {share:.1%}", dict(right), dict(total))
    assert share >= 0.96, misses
    for dialect, n in total.items():
        assert right[dialect] / n >= 0.9, (dialect, misses)
