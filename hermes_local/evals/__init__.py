"""Eval suites: cases from JSONL, runs through the agent, scores, and export of sessions as cases.

`cases.py` reads and checks cases, `suite.py` runs them (in parallel jobs) and scores, `export.py` turns
logged sessions into cases, `stats.py` counts how runs went over the session logs. Prints nothing; `cli/evals.py` does.
"""

__all__ = ["cases", "export", "stats", "suite"]
