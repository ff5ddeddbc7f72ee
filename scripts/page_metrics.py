"""The page of `hermes-local serve` in figures: its payload, and the time from POST to the first token.

Runs the real app (`service.app.create_app` under uvicorn on 127.0.0.1, a temporary HERMES_LOCAL_HOME)
with a scripted model that writes `--words` words `--pause` seconds apart (`testing.PacedLLM`; 0: all at
once), then prints:
  - the bytes of `/`, `/ui/app.js` and `/ui/app.css` as served (and gzip-compressed, for reference);
  - over `--runs` runs, the time from sending `POST /v1/runs` to the first `event: token` on the run's SSE
    stream (median, max), and how many token events carried how many pieces (the coalescing);
  - with `--browser` (Selenium + Debian's chromium), the same time on the page: from the Start click to the
    first streamed text shown in the page (median, max).
Small and quick; not a benchmark of the model (the scripted model takes no time to think).

    python scripts/page_metrics.py
    python scripts/page_metrics.py --runs 20 --pause 0.02 --browser
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post_to_first_token(base: str) -> tuple[float, int]:
    """Seconds from sending the POST to the first token event, and the number of token events of the run."""
    started = time.perf_counter()
    body = json.dumps({"task": "Say it", "tool_choice": "none"}).encode()
    request = urllib.request.Request(f"{base}/v1/runs", body, {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        run_id = json.loads(response.read())["id"]
    first, count = None, 0
    with urllib.request.urlopen(f"{base}/v1/runs/{run_id}/events", timeout=120) as stream:
        for raw in stream:
            if raw.startswith(b"event: token"):
                count += 1
                first = first if first is not None else time.perf_counter() - started
    if first is None:
        raise SystemExit("no token event arrived")
    return first, count


def _browser_first_token(base: str, runs: int) -> list[float]:
    """Seconds from the Start click to the first streamed text on the page (timed inside the page)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "chromedriver"))
    times = []
    try:
        driver.get(base + "/")
        for _ in range(runs):
            deadline = time.monotonic() + 30
            while not driver.execute_script("return document.querySelectorAll('#workspace option').length"):
                if time.monotonic() > deadline:
                    raise SystemExit("the page did not load its form")
                time.sleep(0.05)
            driver.execute_script(
                "window.__first = null; document.getElementById('task').value = 'Say it';"
                "document.getElementById('mode').value = 'none';"
                "const steps = document.getElementById('steps');"
                "new MutationObserver((_, o) => { if (steps.querySelector('.tokens:not([hidden])')) {"
                "  window.__first = performance.now() - window.__t0; o.disconnect(); } })"
                ".observe(steps, {subtree: true, childList: true, attributes: true});"
                "window.__t0 = performance.now(); document.getElementById('start-button').click();"
            )
            deadline = time.monotonic() + 60
            while (first := driver.execute_script("return window.__first")) is None:
                if time.monotonic() > deadline:
                    raise SystemExit("no token reached the page")
                time.sleep(0.01)
            times.append(float(first) / 1000)
            while driver.execute_script("return document.getElementById('run-status').textContent") != "done":
                time.sleep(0.05)
    finally:
        driver.quit()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--words", type=int, default=40, help="words per scripted reply")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds before each word (0: all at once)")
    parser.add_argument("--browser", action="store_true", help="also time it on the page in headless Chromium")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="hermes-page-metrics-")
    os.environ["HERMES_LOCAL_HOME"] = str(Path(scratch) / "home")
    import uvicorn

    from hermes_local.config import load_settings
    from hermes_local.runtime import build_registry
    from hermes_local.service.app import create_app
    from hermes_local.service.process import SharedModel
    from hermes_local.service.runs import RunManager
    from hermes_local.testing import PacedLLM

    runs = args.runs * (2 if args.browser else 1)
    llm = PacedLLM([" ".join(["streaming"] * args.words)] * runs, pause=args.pause)
    workspace = Path(scratch) / "workspace"
    workspace.mkdir()
    manager = RunManager(SharedModel(llm), load_settings({}), registry=build_registry(), workspace=workspace)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(manager), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}"
    try:
        total = gzipped = 0
        for path in ("/", "/ui/app.js", "/ui/app.css"):
            with urllib.request.urlopen(base + path, timeout=30) as response:
                body = response.read()
            total, gzipped = total + len(body), gzipped + len(gzip.compress(body))
            print(f"payload {path}: {len(body)} bytes")
        print(f"payload total: {total} bytes ({gzipped} gzip-compressed)")
        measured = [_post_to_first_token(base) for _ in range(args.runs)]
        firsts = [m[0] * 1000 for m in measured]
        print(
            f"POST -> first token event (SSE, {args.runs} runs, {args.words} words, pause {args.pause} s): "
            f"median {statistics.median(firsts):.1f} ms, max {max(firsts):.1f} ms; "
            f"{statistics.median([m[1] for m in measured]):.0f} token events for {args.words} pieces"
        )
        if args.browser:
            page = [t * 1000 for t in _browser_first_token(base, args.runs)]
            median, most = statistics.median(page), max(page)
            print(f"Start click -> first token on the page: median {median:.1f} ms, max {most:.1f} ms")
    finally:
        server.should_exit = True
        manager.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
