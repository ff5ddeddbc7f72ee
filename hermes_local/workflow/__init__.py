"""TOML workflows: declared steps run by the agent in order, resumable, with their outputs checked.

`spec.py` reads and validates a workflow file, `run.py` runs its steps. Prints nothing; `cli/evals.py` does.
"""

__all__ = ["run", "spec"]
