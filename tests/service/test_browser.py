"""The page of `hermes-local serve` in a real headless Chromium (Selenium), against the real app on 127.0.0.1.

The scripted model writes slowly (`PacedLLM`) so its tokens can be seen arriving. Covers: a task started
from the form streams its tokens, asks for approval with the terminal's view of the call, is approved by
keyboard, shows its result (tool output holding `<script>` stays text) and lands in the session list; with
a token the page asks for it, re-attaches to a waiting run (a call too long to review cannot be allowed)
and resumes its stream with Last-Event-ID after a drop; a page of another origin (a second local server)
cannot start a run or approve a call, though a link from it opens the page; a DNS-rebound name
(`evil.example`, resolved to 127.0.0.1 by the browser) gets no page; the stats view reads the same logs.
Screenshots of each view are saved under the test's tmp dir (paths printed; also copied to
`$HERMES_LOCAL_SCREENSHOTS` when set). Skips with a reason without Selenium or Debian's `chromium` and
`chromium-driver` (`.ci/run` installs them).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_local.engines.replay import tool_call_text
from hermes_local.testing import PacedLLM, ScriptedLLM
from hermes_local.tools.approval import MAX_VIEW_CHARS, approval_view
from tests.conftest import fixed_page, loopback_http_server
from tests.fixtures.service_server import drop_connections, http, served, wait_status

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SHOTS = os.environ.get("HERMES_LOCAL_SCREENSHOTS")  # read at import: the autouse fixture clears HERMES_LOCAL_*
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER), reason="no chromium/chromedriver: apt-get install chromium chromium-driver"
)
ROWS = (  # JS: the text of each element a selector finds, one a line (a table row's cells joined by tabs)
    "((sel) => Array.from(document.querySelectorAll(sel))"
    ".map(e => e.cells ? Array.from(e.cells).map(c => c.textContent).join('\\t') : e.textContent).join('\\n'))"
)
HOSTILE = '<script>window.pwned=1</script>\n<img src=x onerror="window.pwned=2">\nhello \u202e reversed'


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path / 'chromium'}",
        # nothing but loopback: evil.example is "rebound" to 127.0.0.1, every other name fails
        "--host-resolver-rules=MAP evil.example 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # the requests the page makes
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(SHOTS) / path.name)


def _wait(driver: Any, script: str, timeout: float = 30) -> Any:
    """Wait until the JavaScript expression `script` is truthy; its value."""
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: d.execute_script(f"return {script}"))


def test_a_task_streams_asks_is_approved_and_shows_in_the_sessions(
    browser: Any, workspace: Path, tmp_path: Path
) -> None:
    script = [tool_call_text("write_file", path="note.html", content=HOSTILE)]
    script += [tool_call_text("read_file", path="note.html"), "The note says hello. <b>bold?</b>"]
    llm = PacedLLM(script, pause=0.06)
    with served(llm, workspace) as (base, manager):
        browser.get(base + "/")
        _wait(browser, "document.querySelectorAll('#workspace option').length > 0")
        browser.find_element(By.ID, "task").send_keys("Write the note and read it back")
        browser.find_element(By.ID, "task").send_keys(Keys.CONTROL, Keys.ENTER)  # the keyboard starts it
        streaming = "Array.from(document.querySelectorAll('.tokens')).find(e => !e.hidden && e.textContent.includes"
        live = _wait(browser, streaming + "('note.html'))")  # step 1's tokens, shown before its reply was complete
        assert "write_file" in live.text and browser.find_element(By.ID, "approval").get_attribute("hidden")
        _shot(browser, tmp_path, "1-tokens")
        _wait(browser, "!document.getElementById('approval').hidden")
        run_id = browser.find_element(By.ID, "run-id").text
        [pending] = http("GET", f"{base}/v1/runs/{run_id}")[1]["pending_approvals"]
        shown = browser.execute_script("return document.getElementById('approval-view').textContent")
        tool = manager.registry.get("write_file")
        assert shown == pending["view"] == approval_view(tool, {"path": "note.html", "content": HOSTILE})
        assert "\\u202e" in shown and "│ <script>window.pwned=1</script>" in shown  # escaped, whole, as text
        note = browser.execute_script("return document.getElementById('approval-note').textContent")
        assert note == pending["note"]
        _shot(browser, tmp_path, "2-approval")
        assert browser.switch_to.active_element.get_attribute("id") == "deny"  # the safe default has the focus
        browser.switch_to.active_element.send_keys(Keys.SHIFT, Keys.TAB)
        assert browser.switch_to.active_element.get_attribute("id") == "allow"
        browser.switch_to.active_element.send_keys(Keys.ENTER)
        _wait(browser, "document.getElementById('run-status').textContent === 'done'")
        answer = browser.find_element(By.ID, "answer").text
        outcome = browser.find_element(By.ID, "outcome").text  # issue 42: at the top of the finished run
        top = browser.execute_script(
            "const a = document.getElementById('answer-box'), s = document.getElementById('steps');"
            "return !!(a.compareDocumentPosition(s) & Node.DOCUMENT_POSITION_FOLLOWING)"
        )
        outputs = browser.execute_script(
            "return Array.from(document.querySelectorAll('.output pre')).map(e => e.textContent)"
        )
        hostile = browser.execute_script("return [window.pwned, document.images.length, document.scripts.length]")
        totals = browser.find_element(By.ID, "totals").text
        ledger = browser.find_element(By.ID, "ledger").text
        browser.execute_script("document.querySelectorAll('details.output').forEach(d => d.open = true)")
        _shot(browser, tmp_path, "3-result")
        browser.find_element(By.TAG_NAME, "body").send_keys("s")  # the key for the sessions view
        item = _wait(browser, "document.querySelector('#session-list button[data-id]')")
        assert "Write the note and read it back" in item.text
        item.click()
        _wait(browser, "document.querySelectorAll('#session-steps .step').length >= 3")
        _shot(browser, tmp_path, "4-sessions")
        browser.find_element(By.TAG_NAME, "body").send_keys("t")  # the stats view, from the same logs
        _wait(browser, "document.querySelectorAll('#stats-tools tbody tr').length >= 2")
        stats = browser.execute_script(f"return {ROWS}('#stats-summary li')").split("\n")
        tools = [
            row.split("\t") for row in browser.execute_script(f"return {ROWS}('#stats-tools tbody tr')").split("\n")
        ]
        _shot(browser, tmp_path, "5-stats")
    assert answer == "The note says hello. <b>bold?</b>"
    assert outcome == "done" and top  # the write worked and the read backs the answer
    assert any("<script>window.pwned=1</script>" in text and "\\u{202e}" in text for text in outputs)
    assert hostile == [None, 0, 1]  # nothing of the tool output ran or became an element
    assert totals.startswith("3 model calls")
    assert "write_file" in ledger and "read_file" in ledger, ledger  # the ledger the model was shown last
    assert (workspace / "note.html").read_text() == HOSTILE
    rate = "success rate100.0 % done or answered (with evidence); 100.0 % of finished runs"
    assert "runs1 (1 sessions)" in stats and rate in stats
    assert ["read_file", "1", "0", "0", "0.0 %"] in tools and ["write_file", "1", "0", "0", "0.0 %"] in tools, tools


EVIL_PAGE = """<!doctype html><html><body><pre id="out">working</pre>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="TARGET/v1/runs/RUN/approvals">
<input name='{"call": "CALL", "decision": "allow", "x": "' value='"}'></form>
<script>
const target = "TARGET", out = [];
async function attempt(label, url, init) {
  try { const r = await fetch(url, init); out.push(label + ": " + r.status + " " + r.type); }
  catch (e) { out.push(label + ": blocked"); }
}
(async () => {
  const json = {"Content-Type": "application/json"};
  await attempt("cors run", target + "/v1/runs", {method: "POST", headers: json, body: '{"task": "read ~/.ssh"}'});
  await attempt("no-cors run", target + "/v1/runs", {method: "POST", mode: "no-cors", body: '{"task": "read ~/.ssh"}'});
  await attempt("no-cors approve", target + "/v1/runs/RUN/approvals",
                {method: "POST", mode: "no-cors", body: '{"call": "CALL", "decision": "allow"}'});
  await attempt("read runs", target + "/v1/runs", {});
  document.getElementById("f").submit();
  setTimeout(() => { out.push("done"); document.getElementById("out").textContent = out.join("\\n"); }, 800);
})();
</script></body></html>"""


def test_a_page_of_another_origin_cannot_start_or_approve(browser: Any, workspace: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_call_text("run_shell", command="touch pwned.txt"), "Ran."])
    with served(llm, workspace, sandbox="off") as (base, manager):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Run it"})
        [pending] = wait_status(base, created["id"], {"waiting_approval"})["pending_approvals"]
        body = EVIL_PAGE.replace("TARGET", base).replace("RUN", created["id"]).replace("CALL", pending["call"])
        with loopback_http_server(fixed_page(body.encode())) as evil:  # another origin: another port
            browser.get(evil + "/")
            report = _wait(browser, "document.getElementById('out').textContent.includes('done') && "
                                    "document.getElementById('out').textContent")  # fmt: skip
            _shot(browser, tmp_path, "6-other-origin")
            browser.execute_script(f"location.href = {json.dumps(base + '/')}")  # a link from there opens the page
            _wait(browser, "document.querySelectorAll('#workspace option').length > 0")
        still = wait_status(base, created["id"], {"waiting_approval"})
        runs = list(manager.runs)
        http("POST", f"{base}/v1/runs/{created['id']}/cancel")
    assert "cors run: blocked" in report and "read runs: blocked" in report  # no answer readable by the page
    assert still["status"] == "waiting_approval" and runs == [created["id"]]  # nothing started, nothing approved
    assert not (workspace / "pwned.txt").exists()


def test_a_rebound_name_gets_no_page_and_localhost_does(browser: Any, workspace: Path, tmp_path: Path) -> None:
    with served(ScriptedLLM([]), workspace) as (base, _):
        port = base.rsplit(":", 1)[1]
        browser.get(f"http://evil.example:{port}/")  # the attacker's name, rebound to 127.0.0.1
        refused = browser.find_element(By.TAG_NAME, "body").text
        forms = len(browser.find_elements(By.ID, "start"))
        _shot(browser, tmp_path, "7-rebound-host")
        browser.get(f"http://localhost:{port}/")
        _wait(browser, "document.querySelectorAll('#workspace option').length > 0")
        model = _wait(browser, "document.getElementById('s-model').textContent !== '…' && "
                               "document.getElementById('s-model').textContent")  # fmt: skip
        _shot(browser, tmp_path, "8-localhost")
    assert "is not this server's name" in refused and forms == 0
    assert model == "scripted"


def test_with_a_token_the_page_asks_reattaches_refuses_an_unreviewable_call_and_resumes_after_a_drop(
    browser: Any, workspace: Path, tmp_path: Path
) -> None:
    token = "page-secret-1"
    content = "y" * (MAX_VIEW_CHARS + 1)  # too long to review: a terminal denies it, the page cannot allow it
    llm = ScriptedLLM([tool_call_text("write_file", path="w.txt", content=content), "Not written."])
    with served(llm, workspace, token=token) as (base, _):
        _, created = http("POST", f"{base}/v1/runs", {"task": "Write w.txt"}, token=token)
        [pending] = wait_status(base, created["id"], {"waiting_approval"}, token=token)["pending_approvals"]
        browser.get(base + "/")
        _wait(browser, "!document.getElementById('token-form').hidden")  # its data answered 401: it asks
        browser.find_element(By.ID, "token").send_keys(token, Keys.ENTER)
        _wait(browser, "document.querySelectorAll('#workspace option').length > 0")
        browser.find_element(By.ID, "nav-sessions").click()
        _wait(browser, "document.querySelector('#session-list button.live')").click()  # the run going on
        _wait(browser, "!document.getElementById('approval').hidden")  # its stream, replayed from the start
        shown = browser.execute_script("return document.getElementById('approval-view').textContent")
        allow_disabled = browser.find_element(By.ID, "allow").get_attribute("disabled")
        _shot(browser, tmp_path, "9-reattached")
        assert drop_connections(base) >= 1  # the page's event stream is cut ...
        decision = {"call": pending["call"], "decision": "deny"}  # ... and the run goes on meanwhile
        assert http("POST", f"{base}/v1/runs/{created['id']}/approvals", decision, token=token)[0] == 200
        wait_status(base, created["id"], {"done"}, token=token)
        _wait(browser, "document.getElementById('run-status').textContent === 'done'")  # it reconnected
        lines = browser.execute_script(
            "return Array.from(document.querySelectorAll('#steps li')).map(e => e.className + ': ' + e.textContent)"
        )
        requests = _event_requests(browser)
        _shot(browser, tmp_path, "10-resumed")
        url = browser.current_url
    assert pending["view"] is None and allow_disabled and token not in url
    assert shown.startswith("write_file wants to run with arguments too long to review here")
    assert [line for line in lines if line.startswith(("ask", "decision"))] == [
        "ask: approval askedwrite_file (write)",
        "decision: approvalwrite_file: deny",
    ]  # what it missed, once: the reconnect resumed after the last event it had, not from the start
    assert len(requests) == 2 and "last-event-id" not in requests[0] and int(requests[1]["last-event-id"]) > 0
    assert all(r.get("authorization") == f"Bearer {token}" for r in requests)
    assert not (workspace / "w.txt").exists()


def _event_requests(driver: Any) -> list[dict[str, str]]:
    """The headers of each request the page made for a run's event stream (Chromium's performance log)."""
    found = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent" and "/events" in message["params"]["request"]["url"]:
            found.append({k.lower(): v for k, v in message["params"]["request"]["headers"].items()})
    return found
