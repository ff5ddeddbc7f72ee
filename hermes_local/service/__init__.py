"""`hermes-local serve`: a thin HTTP layer over the same runtime as the CLI.

`runs.py` queues and executes agent runs (sessions, cancel, shutdown), `run.py` is one run (its events,
approvals and cancel), `process.py` holds the shared model and ends child processes, `openai_compat.py`
answers `/v1/chat/completions` in the model's dialect, `app.py` holds the FastAPI routes and the security
checks. The `serve` command itself is `cli/serve.py`. Needs the `serve` extra (fastapi, uvicorn). Owns no
agent logic: runs are built through `hermes_local.runtime`, never by reaching into `agent/`.
"""

__all__ = ["app", "openai_compat", "process", "run", "runs"]
