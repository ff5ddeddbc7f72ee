"""Every case of the family corpora (model cards, official templates, published tracker threads) parses exactly.

`scripts/parse_corpus.py --families` prints the same figures per family.
"""

from __future__ import annotations

from pathlib import Path

from hermes_local.dialects.families import family_corpus_misses, load_cases

DATA = Path(__file__).parents[1] / "data"


def test_every_family_case_parses_to_exactly_its_calls() -> None:
    cases = load_cases(DATA)
    assert all(case["source"] for case in cases)
    results = family_corpus_misses(cases)
    assert {"qwen3-coder", "gemma4", "gemma3", "harmony", "deepseek", "minimax"} <= set(results)
    misses = [m for _, _, family in results.values() for m in family]
    assert not misses
