"""The agent loop and what it keeps: memory and the ledger, guards, resume, the result of a run.

`loop.py` is `Agent.run` (render, complete, parse, execute, repeat, bounded), `memory.py` the messages and
compaction, `ledger.py` the rolling "what have I done" summary, `guards.py` the answer guard and bounce
notes, `resume.py` continuing a logged session, `result.py` the `RunResult`. Knows the LLM protocol,
dialects, calls, tools, events and prompts; never an engine, the model registry, the CLI or the service.
"""

__all__ = ["guards", "ledger", "loop", "memory", "result", "resume"]
