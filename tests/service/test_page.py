"""The web page of `hermes-local serve` and live tokens over SSE, over real HTTP (uvicorn on 127.0.0.1).

Covers: `/` and its two assets with a strict CSP and the other security headers, nothing fetched from
elsewhere, no inline script and no HTML sinks in the shipped files; the page loads without a token but the
data behind it does not; Host checks on the page (loopback names and `serve_hosts` only); the form, status
and sessions routes (a token sees only its own sessions); `token` events: the text field only, coalesced,
equal to what the model wrote, live while the model still writes, and replayed to late subscribers and to a
`Last-Event-ID` reconnect. The real browser is in test_browser.py.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from hermes_local.engines.replay import tool_call_text
from hermes_local.service import page
from hermes_local.service.run import TOKEN_INTERVAL
from hermes_local.testing import PacedLLM, ScriptedLLM
from tests.fixtures.service_server import http, served, sse_events, sse_stream, wait_status

STATIC = Path(page.__file__).with_name("static")


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


def test_the_page_and_its_assets_are_served_with_a_strict_policy(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace) as (base, _):
        answers = {path: _get(base + path) for path in ("/", "/ui/app.js", "/ui/app.css")}
        missing = _get(base + "/ui/page.py")[0], _get(base + "/ui/..%2fpage.py")[0], _get(base + "/ui/")[0]
        _, api_headers, _ = _get(base + "/v1/health")
    for path, (status, headers, body) in answers.items():
        assert status == 200 and body, path
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
        assert headers["referrer-policy"] == "no-referrer"
    assert answers["/"][1]["content-type"].startswith("text/html")
    assert answers["/ui/app.js"][1]["content-type"].startswith("text/javascript")
    assert answers["/ui/app.css"][1]["content-type"].startswith("text/css")
    assert missing == (404, 404, 404)
    assert api_headers["x-content-type-options"] == "nosniff" and "content-security-policy" in api_headers


def test_the_shipped_files_fetch_nothing_from_elsewhere_and_write_no_html() -> None:
    html = (STATIC / "index.html").read_text()
    script = (STATIC / "app.js").read_text()
    style = (STATIC / "app.css").read_text()
    for text in (html, script, style):
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), "an external URL"
        assert "@import" not in text
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/ui/app.js" defer>']  # no inline script
    assert not re.search(r"\son[a-z]+\s*=", html), "an inline event handler"
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink


def test_the_page_loads_without_a_token_but_its_data_needs_one(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace, token="page-token-1") as (base, _):
        page_status = _get(base + "/")[0], _get(base + "/ui/app.js")[0]
        data_status = [http("GET", base + path)[0] for path in ("/v1/ui", "/v1/status", "/v1/sessions")]
        with_token = http("GET", base + "/v1/ui", token="page-token-1")[0]
        posted = http("POST", base + "/", {"task": "x"})[0]
    assert page_status == (200, 200)
    assert data_status == [401, 401, 401] and with_token == 200
    assert posted in (401, 405)  # a POST to a page path is no public GET


def test_a_link_from_elsewhere_opens_the_page_but_frames_and_api_calls_are_refused(workspace: Path) -> None:
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    framed = {**link, "Sec-Fetch-Dest": "iframe"}
    with served(ScriptedLLM([]), workspace) as (base, _):
        opened = [_get(base + "/", link)[0], _get(base + "/ui/app.js", link)[0]]
        refused = [_get(base + "/", framed)[0], _get(base + "/v1/runs", link)[0]]
        script = _get(base + "/ui/app.js", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "script"})[0]
    assert opened == [200, 200] and refused == [403, 403] and script == 403  # another site cannot embed it


def test_the_page_answers_only_its_own_host_names(workspace: Path) -> None:
    with served(ScriptedLLM([]), workspace, serve_hosts=["box.lan"]) as (base, _):
        port = base.rsplit(":", 1)[1]
        good = [_get(base + "/", {"Host": h})[0] for h in (f"127.0.0.1:{port}", f"localhost:{port}", "box.lan")]
        bad = [_get(base + p, {"Host": f"evil.example:{port}"}) for p in ("/", "/ui/app.js")]
    assert good == [200, 200, 200]
    for status, _, body in bad:
        assert status == 403 and b"serve_hosts" in body and b"<script" not in body


def test_form_status_and_sessions(workspace: Path) -> None:
    llm = ScriptedLLM([tool_call_text("get_current_time"), "It is noon.", "Mine."])
    with served(llm, workspace, workspace_roots=[str(workspace.parent)], tokens=("alice-1", "bob-2")) as (base, _):
        _, form = http("GET", f"{base}/v1/ui", token="alice-1")
        _, created = http("POST", f"{base}/v1/runs", {"task": "What time is it?"}, token="alice-1")
        wait_status(base, created["id"], {"done"}, token="alice-1")
        _, status = http("GET", f"{base}/v1/status", token="alice-1")
        _, listed = http("GET", f"{base}/v1/sessions", token="alice-1")
        shown_status, shown = http("GET", f"{base}/v1/sessions/{created['id']}", token="alice-1")
        _, bobs = http("POST", f"{base}/v1/runs", {"task": "Bob's", "tool_choice": "none"}, token="bob-2")
        wait_status(base, bobs["id"], {"done"}, token="bob-2")
        _, bob_listed = http("GET", f"{base}/v1/sessions", token="bob-2")
        foreign = http("GET", f"{base}/v1/sessions/{created['id']}", token="bob-2")[0]
        bad_id = http("GET", f"{base}/v1/sessions/..%2f..%2fetc", token="alice-1")[0]
    assert form["roots"] == [str(workspace.resolve()), str(workspace.parent.resolve())]
    toolsets = {t["name"]: [x["name"] for x in t["tools"]] for t in form["toolsets"]}
    assert toolsets["time"] == ["get_current_time"] and "write_file" in toolsets["files"]
    assert form["modes"] == ["auto", "required", "none"]
    usable = {t["name"]: (t["usable"], t["why"]) for t in form["toolsets"]}  # issue 42: what cannot work, unticked
    assert usable["time"] == (True, None) and usable["files"] == (True, None)
    assert usable.get("database", (False, "this server has no --db")) == (False, "this server has no --db")
    assert status["model"] == "scripted" and status["queue"] == 0 and status["context"]["n_ctx"] == 32768
    assert 0 < status["context"]["used"] < 32768 and status["prompt_cache"]["last_prompt_tokens"] > 0
    assert status["prompt_cache"]["last_reused_tokens"] > 0  # step 2 reused step 1's prefix from the KV
    assert [s["id"] for s in listed["sessions"]] == [created["id"]]
    assert listed["sessions"][0]["goal"] == "What time is it?" and listed["sessions"][0]["stopped"] == "answer"
    assert listed["sessions"][0]["outcome"] == "done"
    assert shown_status == 200 and [e["kind"] for e in shown["events"]][-1] == "run_end"
    assert [s["id"] for s in bob_listed["sessions"]] == [bobs["id"]] and foreign == 404
    assert bad_id in (400, 404)


def test_without_tokens_the_newest_sessions_are_listed_first(workspace: Path, monkeypatch) -> None:
    monkeypatch.setattr(page, "MAX_SESSIONS", 2)
    llm = ScriptedLLM(["One.", "Two.", "Three."])
    with served(llm, workspace) as (base, _):
        ids = []
        for task in ("first", "second", "third"):
            _, created = http("POST", f"{base}/v1/runs", {"task": task, "tool_choice": "none"})
            wait_status(base, created["id"], {"done"})
            ids.append(created["id"])
        _, listed = http("GET", f"{base}/v1/sessions")
    assert [(s["id"], s["goal"]) for s in listed["sessions"]] == [(ids[2], "third"), (ids[1], "second")]


def test_tokens_are_coalesced_text_only_events_equal_to_the_reply(workspace: Path) -> None:
    long_reply = " ".join(f"word{i}" for i in range(3000))  # streamed at once: coalesced into a few events
    llm = ScriptedLLM([tool_call_text("get_current_time"), long_reply])
    with served(llm, workspace) as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "What time is it?"})
        events = sse_events(f"{base}/v1/runs/{created['id']}/events")
        late = sse_events(f"{base}/v1/runs/{created['id']}/events")
        first_token = next(i for i, (name, _) in enumerate(events) if name == "token")
        resumed = sse_events(f"{base}/v1/runs/{created['id']}/events", last_id=first_token)
    tokens = [data for name, data in events if name == "token"]
    assert tokens and all(set(t) == {"text"} and t["text"] for t in tokens)
    replies = [data["text"] for name, data in events if name == "assistant"]
    assert "".join(t["text"] for t in tokens).split() == " ".join(replies).split()
    assert len(tokens) < 3000 / 10  # coalesced, not one event per piece
    names = [name for name, _ in events]
    for step_start in (i for i, n in enumerate(names) if n == "step_start"):  # each step's tokens precede its reply
        assert names.index("token", step_start) < names.index("assistant", step_start)
    assert late == events and resumed == events[first_token + 1 :]


def test_tokens_reach_a_subscriber_while_the_model_still_writes(workspace: Path) -> None:
    reply = " ".join(["streaming"] * 40)
    llm = PacedLLM([reply], pause=0.02)  # 0.8 s of writing
    arrivals: list[tuple[float, str]] = []
    with served(llm, workspace) as (base, _):
        started = time.monotonic()
        _, created = http("POST", f"{base}/v1/runs", {"task": "Say it", "tool_choice": "none"})

        def read() -> None:
            for name, _ in sse_stream(f"{base}/v1/runs/{created['id']}/events"):
                arrivals.append((time.monotonic(), name))

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(60)
    token_times = [t for t, name in arrivals if name == "token"]
    assert len(token_times) >= 5  # the reply arrived in pieces, not at the end
    assert token_times[0] < llm.done_at[0] - 0.3, "the first token came only when the model had finished"
    span = token_times[-1] - token_times[0]
    assert len(token_times) <= (span + 0.2) / TOKEN_INTERVAL + 2  # throttled: not one event per word
    assert token_times[0] - started < 1.0


def test_a_sessions_view_carries_what_the_run_changed(workspace: Path) -> None:
    """Issue 32.1 ("once checkpoints exist, their diffs"): the page's session view shows `sessions diff`."""
    llm = ScriptedLLM([tool_call_text("write_file", path="plan.md", content="step one\n"), "Wrote it.", "Hi."])
    with served(llm, workspace, allow_tools=["write_file"]) as (base, _):
        _, wrote = http("POST", f"{base}/v1/runs", {"task": "Write plan.md"})
        wait_status(base, wrote["id"], {"done"})
        _, quiet = http("POST", f"{base}/v1/runs", {"task": "Say hi", "tool_choice": "none"})
        wait_status(base, quiet["id"], {"done"})
        _, changed = http("GET", f"{base}/v1/sessions/{wrote['id']}")
        _, unchanged = http("GET", f"{base}/v1/sessions/{quiet['id']}")
    assert (workspace / "plan.md").read_text() == "step one\n"
    assert "+++ b/plan.md" in changed["diff"] and "+step one" in changed["diff"]
    assert unchanged["diff"] == ""
