"""Service vs CLI on the same task: time from POST to first event, and per-run overhead (warm model vs new process).

Starts `hermes-local serve` once (model loaded once, no warm-up completion), then for each of
`--runs` runs: POST /v1/runs, read the SSE stream, note when the first event and the final status
arrive. Then runs the same task as `hermes-local run --json` in a new process each time. Prints, per
side, the median wall time per run, the model's own seconds inside it (usage.seconds), and the
difference (overhead: process start, imports, model load, prompt prefill that a warm KV cache avoids).
Runs everything on 127.0.0.1 with a temporary HERMES_LOCAL_HOME. Run it once; do not loop it.

    python scripts/serve_bench.py                      # embedded SmolLM2, 3 runs each
    python scripts/serve_bench.py --runs 5 --model hermes-2-pro-mistral-7b
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=600) as r:
        return json.loads(r.read())


def service_run(base: str, task: dict) -> tuple[float, float, float]:
    """(seconds POST -> first event, seconds POST -> final status, model seconds) of one run."""
    start = time.perf_counter()
    run_id = post(f"{base}/v1/runs", task)["id"]
    first = None
    with urllib.request.urlopen(f"{base}/v1/runs/{run_id}/events", timeout=600) as stream:
        for raw in stream:
            if raw.startswith(b"data: ") and first is None:
                first = time.perf_counter() - start
    total = time.perf_counter() - start
    view = get(f"{base}/v1/runs/{run_id}")
    if view["status"] != "done":
        raise SystemExit(f"run {run_id} ended {view['status']}: {view['error']}")
    return first or total, total, view["result"]["usage"]["seconds"]


def cli_run(args: list[str], env: dict, workspace: Path) -> tuple[float, float]:
    """(wall seconds, model seconds) of one `hermes-local run --json` in a new process."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "hermes_local", "run", *args, "--json", "--workspace", str(workspace)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    return wall, json.loads(out.stdout.strip().splitlines()[-1])["usage"]["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", default=None, help="model spec (default: the embedded SmolLM2)")
    parser.add_argument("--task", default="What time is it?")
    parser.add_argument("--max-steps", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=48, help="per model call (keeps CPU runs short)")
    opts = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="hermes-serve-bench-"))
    workspace = home / "workspace"
    workspace.mkdir()
    env = {**os.environ, "HERMES_LOCAL_HOME": str(home / "hermes"), "PYTHONPATH": str(ROOT)}
    env["HERMES_LOCAL_MAX_TOKENS"] = str(opts.max_tokens)
    # Calls that need approval are denied at once on both sides (the CLI has no terminal here; the
    # service would otherwise wait approval_timeout for an answer nobody gives).
    env["HERMES_LOCAL_DENY_TOOLS"] = "write_file,append_to_memo,run_shell,http_get,remember"
    model = ["--model", opts.model] if opts.model else []
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    serve_cmd = [sys.executable, "-m", "hermes_local", "serve", "--port", str(port), "--workspace", str(workspace)]
    server = subprocess.Popen([*serve_cmd, *model], env=env, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                get(f"{base}/v1/health")
                break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit("serve did not start") from None
                time.sleep(0.1)
        startup = time.perf_counter() - started
        task = {
            "task": opts.task,
            "tool_choice": "required",
            "max_steps": opts.max_steps,
        }  # all tools, like the CLI run
        print(f"serve: start to healthy (model load, once)     {startup:7.2f} s", flush=True)
        service = []
        for _ in range(opts.runs):
            service.append(service_run(base, task))
            print(f"  serve run: first event {service[-1][0] * 1000:.1f} ms, total {service[-1][1]:.2f} s", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    cli_args = [opts.task, "--tool-choice", "required", "--max-steps", str(opts.max_steps), *model]
    cli = []
    for _ in range(opts.runs):
        cli.append(cli_run(cli_args, env, workspace))
        print(f"  cli run: total {cli[-1][0]:.2f} s (model {cli[-1][1]:.2f} s)", flush=True)

    med = statistics.median
    print(f"task: {opts.task!r}, tool_choice required, max_steps {opts.max_steps}, ", end="")
    print(f"max_tokens {opts.max_tokens}, {opts.runs} runs each")
    print(f"serve: POST -> first SSE event (median)        {med(s[0] for s in service) * 1000:7.1f} ms")
    print(f"serve: POST -> final status, per run (median)  {med(s[1] for s in service):7.2f} s")
    print(f"serve: model seconds inside a run (median)     {med(s[2] for s in service):7.2f} s")
    print(f"serve: overhead per run (wall - model)         {med(s[1] - s[2] for s in service):7.2f} s")
    print(f"cli:   new process per run, wall (median)      {med(c[0] for c in cli):7.2f} s")
    print(f"cli:   model seconds inside a run (median)     {med(c[1] for c in cli):7.2f} s")
    print(f"cli:   overhead per run (wall - model)         {med(c[0] - c[1] for c in cli):7.2f} s")
    print(
        f"serve saves per run (median wall difference)   {med(c[0] for c in cli) - med(s[1] for s in service):7.2f} s"
    )


if __name__ == "__main__":
    main()
