// The page of `hermes-local serve` (hermes_local/service/page.py serves it; no build step, no dependency).
// Every text from the model, tools, logs or the server is put in the page with textContent (never as HTML),
// after `visible()` has escaped control, format and bidi characters. Events come over fetch-streamed SSE
// (so the bearer token can be sent), resumed with Last-Event-ID after a dropped connection.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const state = { token: sessionStorage.getItem("hermes-local-token") || "", run: null, follow: null, pending: [] };
  const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

  function visible(value) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return (text === undefined ? "" : text).replace(HIDDEN, (c) => "\\u{" + c.codePointAt(0).toString(16) + "}");
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = visible(text);
    return node;
  }

  function headers(extra) {
    const out = Object.assign({}, extra || {});
    if (state.token) out.Authorization = "Bearer " + state.token;
    return out;
  }

  async function api(method, path, body) {
    const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
      cache: "no-store", credentials: "omit" };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await fetch(path, init);
    let data = null;
    try { data = await res.json(); } catch (_) { data = null; }
    if (res.status === 401) $("token-form").hidden = false;
    if (!res.ok) throw new Error(data && data.error ? data.error.message : res.status + " " + res.statusText);
    return data;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // -- SSE over fetch: id/event/data lines; reconnects with Last-Event-ID until the run's final status ------
  async function follow(runId, onEvent, signal) {
    let last = null;
    let finished = false;
    while (!finished && !signal.aborted) {
      try {
        const extra = last === null ? {} : { "Last-Event-ID": String(last) };
        const res = await fetch("/v1/runs/" + encodeURIComponent(runId) + "/events",
          { headers: headers(extra), signal, cache: "no-store", credentials: "omit" });
        if (!res.ok) { onEvent("stream_error", { text: "event stream: HTTP " + res.status }); return; }
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        let ev = { id: null, name: "message", data: [] };
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n")) >= 0) {
            const line = buffer.slice(0, cut).replace(/\r$/, "");
            buffer = buffer.slice(cut + 1);
            if (line === "") {
              if (ev.data.length) {
                if (ev.id !== null) last = ev.id;
                const data = JSON.parse(ev.data.join("\n"));
                if (ev.name === "status" && ["done", "error", "cancelled"].includes(data.status)) finished = true;
                onEvent(ev.name, data);
              }
              ev = { id: null, name: "message", data: [] };
            } else if (line.startsWith("id:")) ev.id = parseInt(line.slice(3).trim(), 10);
            else if (line.startsWith("event:")) ev.name = line.slice(6).trim();
            else if (line.startsWith("data:")) ev.data.push(line.slice(5).replace(/^ /, ""));
          }
        }
      } catch (err) {
        if (signal.aborted) return;
      }
      if (!finished) await sleep(1000);
    }
  }

  // -- one run's events as steps: shared by the live view and the session view ----------------------------
  const PARTS = /<(think|thinking|scratchpad)>([\s\S]*?)(?:<\/\1>|$)|<plan>([\s\S]*?)(?:<\/plan>|$)|<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/gi;

  const OUTPUT_CHARS = 4000; // a result's output is shown up to this many characters (the log has it all)

  function output(data) {
    const text = typeof data === "string" ? data : JSON.stringify(data, null, 1);
    const box = el("details", "output");
    const shown = text.length > OUTPUT_CHARS ? text.slice(0, OUTPUT_CHARS) + "… (" + text.length + " characters)" : text;
    box.append(el("summary", null, "output"), el("pre", null, shown));
    return box;
  }

  function renderer(container, hooks) {
    const totals = { calls: 0, prompt: 0, evaluated: 0, generated: 0, seconds: 0 };
    const ledger = [];
    let step = null;
    function openStep(n) {
      const box = el("section", "step");
      box.append(el("h4", null, "Step " + n));
      const live = el("pre", "tokens");
      live.hidden = true;
      live.setAttribute("aria-live", "off"); // the streamed text is not read out piece by piece
      const items = el("ul", "items");
      box.append(live, items);
      container.append(box);
      step = { box, live, items };
      return step;
    }
    function line(cls, label, text) {
      const li = el("li", cls);
      li.append(el("span", "label", label), el("span", "text", text));
      (step ? step.items : container).append(li);
      return li;
    }
    function reply(d) {
      let rest = "";
      let last = 0;
      for (const m of d.text.matchAll(PARTS)) {
        rest += d.text.slice(last, m.index);
        last = m.index + m[0].length;
        if (m[1]) line("thought", "thought", m[2].trim());
        else if (m[3] !== undefined) line("plan", "plan", m[3].trim());
        // a <tool_call> block: its tool_call event (next) shows the call, parsed or not
      }
      rest = (rest + d.text.slice(last)).trim();
      if (rest) line(d.final ? "final" : "text", d.final ? "final answer" : "text", rest);
      if (step) { step.live.hidden = true; }
    }
    function handle(name, d) {
      switch (name) {
        case "run_start": case "run_resumed": line("goal", name === "run_start" ? "goal" : "resumed", d.goal); break;
        case "step_start": openStep(d.step); break;
        case "token":
          if (!step) openStep("…");
          step.live.hidden = false;
          step.live.append(document.createTextNode(visible(d.text)));
          break;
        case "assistant": reply(d); break;
        case "reasoning": line("thought", "thought", d.text); break;
        case "tool_call": line("call", "→ " + visible(d.name), JSON.stringify(d.arguments)); break;
        case "tool_result": {
          const tail = d.ok ? "" : " — " + (d.error_kind || "error") + ": " + (d.error || "");
          const li = line(d.ok ? "ok" : "fail", (d.ok ? "✓ " : "✗ ") + visible(d.name), (d.summary || "") + tail
            + (d.approval && d.approval !== "auto" ? "  [approval: " + d.approval + "]" : ""));
          if (d.data !== undefined && d.data !== null) li.append(output(d.data));
          break;
        }
        case "llm_call":
          totals.calls += 1; totals.prompt += d.prompt_tokens; totals.evaluated += d.prompt_tokens_evaluated;
          totals.generated += d.completion_tokens; totals.seconds += d.seconds;
          line("usage", "model", d.prompt_tokens + " prompt tokens (" + d.prompt_tokens_evaluated + " evaluated), "
            + d.completion_tokens + " generated, " + Number(d.seconds).toFixed(2) + " s");
          if (hooks.totals) hooks.totals(totals);
          break;
        case "turn": // the ledger: what each call found (the tool turns' responses), and the model's own note
          if (d.role !== "tool" || !hooks.ledger) break;
          for (const r of d.responses || []) {
            const c = r.content || {};
            const found = c.ok === false ? "failed: " + (c.error || c.summary || "") : (r.finding || c.summary || "ok");
            ledger.push("step " + d.step + " · " + r.name + " → " + String(found).slice(0, 300));
          }
          if (Array.isArray(d.note)) ledger.push(d.note.map((seg) => String(Array.isArray(seg) ? seg[0] : seg)).join(""));
          hooks.ledger(ledger.join("\n"));
          break;
        case "approval_request": line("ask", "approval asked", d.tool + " (" + d.permission + ")");
          if (hooks.approval) hooks.approval(d);
          break;
        case "approval_decision": line("decision", "approval", d.tool + ": " + d.decision);
          if (hooks.decided) hooks.decided(d);
          break;
        case "notice": case "stream_error": line("notice", "notice", d.text); break;
        case "guarded": line("notice", "sent back", d.reason + (d.tool ? " (needs " + d.tool + ")" : "")); break;
        case "budget_warning": line("notice", "budget", d.message); break;
        case "compaction": line("notice", "memory", "compacted through step " + d.through_step); break;
        case "mcp_failed": line("fail", "MCP " + visible(d.server), d.error); break;
        case "hook": // a user's hook answered (allow, block, ask, error)
          line(d.decision === "allow" ? "notice" : "fail", "hook " + visible(d.hook),
            d.event + (d.tool ? " " + d.tool : "") + ": " + d.decision + (d.reason ? " (" + d.reason + ")" : ""));
          break;
        case "rehearsed_call": line("notice", "not run", d.name + " " + JSON.stringify(d.arguments)); break;
        case "run_end":
          step = null;
          line("end", "outcome", (d.outcome || "unjudged") + (d.evidence ? " (" + d.evidence + ")" : "")
            + " · stopped: " + d.stopped);
          if (hooks.end) hooks.end(d);
          break;
        case "status": if (hooks.status) hooks.status(d); break;
        default: break;
      }
    }
    return { handle, totals };
  }

  function showTotals(t) {
    $("totals").textContent = t.calls + " model calls, " + t.prompt + " prompt tokens (" + t.evaluated
      + " evaluated), " + t.generated + " generated, " + t.seconds.toFixed(2) + " s of model time";
  }

  // -- the live run -----------------------------------------------------------------------------------------
  function showApproval() {
    const box = $("approval");
    const d = state.pending[0];
    if (!d) { box.hidden = true; return; }
    $("approval-title").textContent = "Approval needed: " + visible(d.tool) + " (" + visible(d.permission) + ")";
    $("approval-note").textContent = visible(d.note || "");
    $("approval-note").hidden = !d.note;
    if (d.view === null || d.view === undefined) {
      $("approval-view").textContent = visible(d.tool) + " wants to run with arguments too long to review here; "
        + "a terminal denies it. Deny, or rerun with --allow " + visible(d.tool) + " if you trust it.";
      $("allow").disabled = true;
    } else {
      $("approval-view").textContent = d.view; // approval_view: already terminal-safe, whole, never truncated
      $("allow").disabled = false;
    }
    $("approval-timeout").textContent = "Waits " + d.timeout + " s, then it is refused (decision: timeout).";
    $("deny").disabled = false;
    box.hidden = false;
    $("deny").focus();
  }

  async function decide(decision) {
    const d = state.pending[0];
    if (!d || !state.run) return;
    $("allow").disabled = true; $("deny").disabled = true;
    try { // on success both stay disabled until the run's approval_decision event closes the panel
      await api("POST", "/v1/runs/" + encodeURIComponent(state.run) + "/approvals", { call: d.call, decision });
    } catch (err) {
      $("approval-timeout").textContent = visible(err.message);
      $("deny").disabled = false;
      $("allow").disabled = d.view === null || d.view === undefined;
    }
  }

  function watch(runId, goal) {
    if (state.follow) state.follow.abort();
    state.run = runId; state.pending = []; showApproval();
    const steps = $("steps");
    steps.replaceChildren();
    $("live").hidden = false;
    $("run-id").textContent = visible(runId);
    $("goal").textContent = visible(goal || "");
    $("run-status").textContent = "queued";
    $("cancel").disabled = false;
    $("ledger").textContent = "(none yet)";
    $("totals").textContent = "";
    $("answer-box").hidden = true;
    const r = renderer(steps, {
      totals: showTotals,
      ledger: (text) => { $("ledger").textContent = visible(text.trim()); },
      approval: (d) => { state.pending.push(d); $("run-status").textContent = "waiting_approval"; showApproval(); },
      decided: (d) => { state.pending = state.pending.filter((p) => p.call !== d.call); showApproval(); },
      end: (d) => { // the outcome the evidence gave, then the answer, at the top of the finished run
        $("outcome").textContent = visible(d.outcome || "unjudged");
        $("outcome").className = "badge " + (d.outcome === "done" || d.outcome === "answered" ? "good" : "bad");
        $("evidence").textContent = visible(d.evidence || "");
        $("answer").textContent = visible(d.answer || "(no answer)"); $("answer-box").hidden = false;
      },
      status: (d) => {
        $("run-status").textContent = visible(d.status) + (d.error ? ": " + visible(d.error) : "");
        $("cancel").disabled = true; state.pending = []; showApproval(); refreshStatus();
      },
    });
    const controller = new AbortController();
    state.follow = controller;
    follow(runId, (name, d) => {
      if (name === "step_start" || name === "token") {
        if ($("run-status").textContent === "queued") $("run-status").textContent = "running";
      }
      r.handle(name, d);
    }, controller.signal);
  }

  async function start(event) {
    event.preventDefault();
    const error = $("start-error");
    error.hidden = true;
    const task = $("task").value.trim();
    if (!task) return;
    const boxes = Array.from(document.querySelectorAll("#toolsets input[type=checkbox]"));
    const body = { task, workspace: $("workspace").value || null, tool_choice: $("mode").value || null };
    if (boxes.some((b) => !b.checked)) {
      body.tools = boxes.filter((b) => b.checked).flatMap((b) => b.dataset.tools.split(","));
    }
    const steps = parseInt($("max-steps").value, 10);
    if (steps > 0) body.max_steps = steps;
    $("start-button").disabled = true;
    try {
      const created = await api("POST", "/v1/runs", body);
      watch(created.id, task);
    } catch (err) {
      error.textContent = visible(err.message);
      error.hidden = false;
    } finally {
      $("start-button").disabled = false;
    }
  }

  async function loadForm() {
    const f = await api("GET", "/v1/ui");
    $("start-error").hidden = true;
    $("workspace").replaceChildren(...f.roots.map((root) => { const o = el("option", null, root); o.value = root; return o; }));
    $("mode").replaceChildren(...f.modes.map((m) => { const o = el("option", null, m); o.value = m; return o; }));
    $("max-steps").value = f.max_steps;
    const set = $("toolsets");
    set.replaceChildren(el("legend", null, "Toolsets"));
    for (const ts of f.toolsets) {
      const label = el("label", "toolset");
      const box = el("input");
      box.type = "checkbox"; box.checked = ts.usable !== false; // unticked: none of its tools can work here
      if (ts.why) label.title = ts.why;
      box.dataset.tools = ts.tools.map((t) => t.name).join(",");
      label.append(box, el("span", null, " " + ts.name + " "),
        el("small", null, ts.tools.map((t) => t.name + (t.permission === "read" ? "" : " (" + t.permission + ")")).join(", ")
          + (ts.why ? " — " + ts.why : "")));
      set.append(label);
    }
  }

  // -- status strip ------------------------------------------------------------------------------------------
  async function refreshStatus() {
    try {
      const s = await api("GET", "/v1/status");
      $("s-model").textContent = visible(s.model);
      const c = s.context;
      $("s-context").textContent = c.used + " / " + c.n_ctx + (c.fraction === null ? "" : " (" + Math.round(c.fraction * 100) + " %)");
      $("s-queue").textContent = s.queue + " queued, " + s.running_ids.length + " running, " + s.waiting_approval + " waiting";
      const p = s.prompt_cache;
      $("s-cache").textContent = (p.persistent ? "saved prefix on" : "saved prefix off")
        + (p.last_prompt_tokens === null ? "" : "; last call reused " + p.last_reused_tokens + " of " + p.last_prompt_tokens);
      $("s-error").hidden = true;
    } catch (err) {
      $("s-error").textContent = visible(err.message);
      $("s-error").hidden = false;
    }
  }

  // -- sessions ---------------------------------------------------------------------------------------------
  async function loadSessions() {
    const list = $("session-list");
    list.replaceChildren();
    try {
      const [runs, logs] = await Promise.all([api("GET", "/v1/runs"), api("GET", "/v1/sessions")]);
      for (const r of runs.runs.filter((x) => !["done", "error", "cancelled"].includes(x.status))) {
        const b = el("button", "session live", r.status + " · " + r.task);
        b.type = "button";
        b.addEventListener("click", () => { watch(r.id, r.task); show("run"); });
        const li = el("li"); li.append(b); list.append(li);
      }
      for (const s of logs.sessions) {
        const when = new Date(s.modified * 1000).toLocaleString();
        const b = el("button", "session", when + " · " + (s.outcome || s.stopped || "unfinished") + " · " + s.goal);
        b.type = "button";
        b.dataset.id = s.id;
        b.addEventListener("click", () => openSession(s.id));
        const li = el("li"); li.append(b); list.append(li);
      }
      if (!list.children.length) list.append(el("li", null, "No sessions yet."));
    } catch (err) {
      list.append(el("li", "bad", err.message));
    }
  }

  async function openSession(id) {
    const box = $("session-steps");
    box.replaceChildren();
    $("session-detail").hidden = false;
    $("session-id").textContent = visible(id);
    try {
      const s = await api("GET", "/v1/sessions/" + encodeURIComponent(id));
      const r = renderer(box, {});
      for (const e of s.events) r.handle(e.kind, e);
      const t = r.totals;
      box.append(el("p", "usage", t.calls + " model calls, " + t.generated + " tokens generated, " + t.seconds.toFixed(2) + " s"));
      if (s.diff) { // what the run changed in its workspace (checkpoints), as `sessions diff` shows it
        box.append(el("h4", null, "Changes to the workspace"));
        box.append(el("pre", "diff", s.diff));
      }
    } catch (err) {
      box.append(el("p", "bad", err.message));
    }
    $("session-detail").focus();
  }

  // -- stats (GET /v1/stats: aggregated from the session logs) -----------------------------------------------
  const percent = (x) => (x === null || x === undefined ? "–" : (x * 100).toFixed(1) + " %");

  async function loadStats() {
    const list = $("stats-summary");
    const rows = $("stats-tools").tBodies[0];
    list.replaceChildren();
    rows.replaceChildren();
    const item = (label, text) => { const li = el("li"); li.append(el("span", "label", label), el("span", "text", text)); list.append(li); };
    try {
      const since = $("since").value;
      const s = await api("GET", "/v1/stats" + (since ? "?since=" + encodeURIComponent(since) : ""));
      item("runs", s.runs + " (" + s.sessions + " sessions)");
      item("success rate", percent(s.success_rate) + " done or answered (with evidence); "
        + percent(s.success_rate_finished) + " of finished runs");
      item("outcomes", Object.entries(s.outcomes).map(([k, v]) => k + " " + v).join(", "));
      const t = s.tokens_per_run, w = s.seconds_per_run;
      item("tokens per run", "prompt " + t.prompt.mean + " mean / " + t.prompt.median + " median; generated "
        + t.completion.mean + " mean / " + t.completion.median + " median");
      item("seconds per run", "wall " + w.wall.mean + " mean / " + w.wall.median + " median; model "
        + w.model.mean + " mean / " + w.model.median + " median");
      const a = s.approvals;
      item("approvals", a.asked + " asked: " + a.allowed + " allowed, " + a.denied + " denied, " + a.timed_out
        + " timed out; " + a.refused_unasked + " refused without asking");
      for (const [name, c] of Object.entries(s.tools)) {
        const tr = el("tr");
        for (const cell of [name, c.calls, c.failed, c.refused, percent(c.failure_rate)]) tr.append(el("td", null, cell));
        rows.append(tr);
      }
    } catch (err) {
      item("error", err.message);
    }
  }

  // -- views and keys ---------------------------------------------------------------------------------------
  function show(view) {
    for (const name of ["run", "sessions", "stats"]) {
      $("view-" + name).hidden = view !== name;
      $("nav-" + name).setAttribute("aria-pressed", String(view === name));
    }
    if (view === "sessions") loadSessions();
    if (view === "stats") loadStats();
  }

  function boot() {
    $("start").addEventListener("submit", start);
    $("task").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("start").requestSubmit(); });
    $("allow").addEventListener("click", () => decide("allow"));
    $("deny").addEventListener("click", () => decide("deny"));
    $("cancel").addEventListener("click", async () => {
      if (!state.run) return;
      try { await api("POST", "/v1/runs/" + encodeURIComponent(state.run) + "/cancel"); } catch (err) {
        $("run-status").textContent = visible(err.message);
      }
    });
    const after = async (path, body, done) => { // a finished run: rate it, or undo what it changed (the API's own)
      if (!state.run) return;
      try { const d = await api("POST", "/v1/runs/" + encodeURIComponent(state.run) + path, body); $("after-note").textContent = visible(done(d)); }
      catch (err) { $("after-note").textContent = visible(err.message); }
    };
    $("rate-good").addEventListener("click", () => after("/rating", { verdict: "good" }, () => "rated good"));
    $("rate-bad").addEventListener("click", () => after("/rating", { verdict: "bad" }, () => "rated bad: never recalled"));
    $("undo").addEventListener("click", () => after("/undo", {}, (d) => "undone: " + JSON.stringify(d).slice(0, 200)));
    $("nav-run").addEventListener("click", () => show("run"));
    $("nav-sessions").addEventListener("click", () => show("sessions"));
    $("nav-stats").addEventListener("click", () => show("stats"));
    $("since").addEventListener("change", loadStats);
    $("refresh-sessions").addEventListener("click", loadSessions);
    $("session-detail").tabIndex = -1;
    document.addEventListener("keydown", (e) => { // r: run, s: sessions, t: stats, /: the task box (never while typing)
      const typing = e.target.closest && e.target.closest("input, textarea, select");
      if (typing || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === "r") { e.preventDefault(); show("run"); }
      if (e.key === "s") { e.preventDefault(); show("sessions"); }
      if (e.key === "t") { e.preventDefault(); show("stats"); }
      if (e.key === "/") { e.preventDefault(); show("run"); $("task").focus(); }
    });
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      state.token = $("token").value.trim();
      sessionStorage.setItem("hermes-local-token", state.token);
      $("token-form").hidden = true;
      loadForm().catch(() => {});
      refreshStatus();
    });
    loadForm().catch((err) => { $("start-error").textContent = visible(err.message); $("start-error").hidden = false; });
    refreshStatus();
    setInterval(refreshStatus, 2000);
  }

  document.addEventListener("DOMContentLoaded", boot);
})();
