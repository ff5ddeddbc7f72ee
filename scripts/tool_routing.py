"""Routing figures: prompt tokens with 40+ tools flat vs routed, KV reuse with routing, tool-choice accuracy.

Starts real MCP servers: `mcp-server-git` on a temporary repository and `mcp-server-time` over stdio,
and the test server `tests/fixtures/mcp_test_server.py` over streamable HTTP on 127.0.0.1 (20 tools). With
the 10 built-ins that is 43 tools. Prints:

1. system-prompt tokens (embedded model's tokenizer) for 10 and 43 tools, flat and routed;
2. a scripted routed run (open_toolset, then a git call, then an answer) vs the same task flat:
   prompt tokens, tokens evaluated (a simulated KV cache over the real tokenizer: the prompt minus its
   common prefix with the previous prompt + reply) and new tokens per model call;
3. the embedded model's tool-choice accuracy on 20 single-tool tasks (`tool_choice=required`, grammar
   on) for 10 and 43 tools, flat and routed. Routed, a first call to open_toolset is followed by a second
   step and the first other call is scored; llama.cpp's own evaluated/new counts for those second
   steps are printed too.

  python scripts/tool_routing.py                 # everything (the accuracy part takes minutes on a CPU)
  python scripts/tool_routing.py --no-accuracy   # token figures only
  python scripts/tool_routing.py --json routing.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

TASKS: list[tuple[str, set[str]]] = [
    ("What time is it right now?", {"get_current_time", "time__get_current_time"}),
    ("What is today's date?", {"get_current_time", "time__get_current_time"}),
    ("Read the file notes.txt.", {"read_file"}),
    ("Show me what is in config.toml.", {"read_file"}),
    ("List the files in the reports folder.", {"list_dir"}),
    ("Which files are in the current directory?", {"list_dir"}),
    ("Write 'hello' into greeting.txt.", {"write_file"}),
    ("Create a file todo.md containing 'buy milk'.", {"write_file"}),
    ("Note 'call the plumber' in my memo.", {"append_to_memo"}),
    ("Add 'backup finished' to my memo.", {"append_to_memo"}),
    ("How many rows are in the orders table? Use SQL.", {"query_database"}),
    ("Query the database for the five most recent orders.", {"query_database"}),
    ("Run `ls -la` in the shell.", {"run_shell"}),
    ("Count the lines of data.csv with wc -l in the shell.", {"run_shell"}),
    ("Fetch http://127.0.0.1:8000/status over HTTP.", {"http_get"}),
    ("Download the page http://127.0.0.1:8000/index.html.", {"http_get"}),
    ("Remember that I prefer CSV exports.", {"remember"}),
    ("Remember for next time that reports go in reports/.", {"remember"}),
    ("Read README.md.", {"read_file"}),
    ("Save the text 'meeting at 3pm' to meeting.txt.", {"write_file"}),
]
FLAT, ROUTED = 1000, 8  # max_tools_in_prompt for the two layouts


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    return repo


def settings_for(servers: dict[str, Any], **values: Any) -> Any:
    from hermes_local.config import Settings

    return Settings.model_validate({"mcp": {"servers": servers}, **values})


def first_prompt_tokens(llm_tokenizer: Any, registry: Any, workspace: Path, max_tools: int) -> int:
    from hermes_local.testing import ScriptedLLM, build_agent

    llm = ScriptedLLM(["ok"], tokenizer=llm_tokenizer, n_ctx=32768)
    build_agent(llm, settings_for({}, max_tools_in_prompt=max_tools), workspace=workspace, registry=registry).run("x")
    return len(llm.prompts[0])


def scripted_kv(llm_tokenizer: Any, registry: Any, workspace: Path, repo: Path) -> dict[str, list[dict[str, int]]]:
    from hermes_local.testing import ScriptedLLM, build_agent, tool_call_text
    from hermes_local.tools import Approver

    status = tool_call_text("git__git_status", repo_path=str(repo))
    scripts = {
        "routed": (ROUTED, [tool_call_text("open_toolset", toolset="git"), status, "Clean."]),
        "flat": (FLAT, [status, "Clean."]),
    }
    out = {}
    for name, (max_tools, replies) in scripts.items():
        llm = ScriptedLLM(replies, tokenizer=llm_tokenizer, n_ctx=32768)
        settings = settings_for({}, max_tools_in_prompt=max_tools)
        agent = build_agent(llm, settings, workspace=workspace, registry=registry, approver=Approver(interactive=False))
        result = agent.run("What is the git status of the repository?")
        out[name] = [
            {"prompt": c.prompt_tokens, "evaluated": c.prompt_tokens_evaluated, "new": c.prompt_tokens_new}
            for c in result.llm_calls
        ]
    return out


def accuracy(llm: Any, registry: Any, workspace: Path, max_tools: int) -> dict[str, Any]:
    from hermes_local.testing import build_agent
    from hermes_local.tools import Approver

    routed = len(registry) > max_tools
    settings = settings_for(
        {}, max_tools_in_prompt=max_tools, tool_choice="required", max_steps=2 if routed else 1, max_tokens=64
    )
    correct, opened, second_steps, rows = 0, 0, [], []
    for task, expected in TASKS:
        agent = build_agent(llm, settings, workspace=workspace, registry=registry, approver=Approver(interactive=False))
        result = agent.run(task)
        calls = [c.name for c in result.tool_calls]
        chosen = next((n for n in calls if n != "open_toolset"), None)
        if calls and calls[0] == "open_toolset":
            opened += 1
            second_steps += [c for c in result.llm_calls if c.step == 2][:1]
        correct += chosen in expected
        rows.append({"task": task, "calls": calls, "ok": chosen in expected})
    return {
        "correct": correct,
        "total": len(TASKS),
        "opened_toolset_first": opened,
        "second_step_kv": [
            {"prompt": c.prompt_tokens, "evaluated": c.prompt_tokens_evaluated, "new": c.prompt_tokens_new}
            for c in second_steps
        ],
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-accuracy", action="store_true", help="Skip the model runs (token figures only).")
    ap.add_argument("--json", type=Path, help="Also write the figures here.")
    ap.add_argument("--n-batch", type=int, default=512, help="llama.cpp batch size (default 512).")
    ap.add_argument("--tasks", type=int, default=len(TASKS), help="Use only the first N tasks (default all 20).")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="hermes-routing-"))
    os.environ["HERMES_LOCAL_HOME"] = str(tmp / "home")  # sessions and memory stay out of the user's home
    workspace = tmp / "workspace"
    workspace.mkdir()
    repo = make_repo(tmp)

    import mcp_test_server

    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.models.registry import embedded_model_path
    from hermes_local.runtime import build_registry

    llm = LlamaCppLLM(embedded_model_path(), LlamaParams(n_ctx=8192, n_gpu_layers=0, seed=1, n_batch=args.n_batch))
    del TASKS[args.tasks :]
    figures: dict[str, Any] = {"model": llm.description}
    with mcp_test_server.serve_http() as url:
        servers = {
            # trusted: their read-only tools stay `read` (an untrusted server's floor is `write`)
            "git": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_git", "--repository", str(repo)],
                "trusted": True,
            },
            "time": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                "trusted": True,
            },
            "notes": {"url": url, "trusted": True},
        }
        many = build_registry([], settings_for(servers), on_notice=print)
        few = build_registry()
        try:
            figures["tools"] = {"few": len(few), "many": len(many)}
            print(f"tools: {len(few)} built-in, {len(many)} with git + time + the test server")
            tokens = {
                f"{label}_{layout}": first_prompt_tokens(llm, reg, workspace, cap)
                for label, reg in (("few", few), ("many", many))
                for layout, cap in (("flat", FLAT), ("routed", ROUTED))
            }
            figures["first_prompt_tokens"] = tokens
            print("first prompt tokens (system + tools + goal):")
            for key, value in tokens.items():
                print(f"  {key:12} {value:6}")
            kv = scripted_kv(llm, many, workspace, repo)
            figures["scripted_kv"] = kv
            print(f"scripted run 'git status' with {len(many)} tools (per model call: prompt / evaluated / new):")
            for layout, calls in kv.items():
                shown = "  ".join(f"{c['prompt']}/{c['evaluated']}/{c['new']}" for c in calls)
                total = sum(c["evaluated"] for c in calls)
                print(f"  {layout:7} {shown}   evaluated in total: {total}")
            if not args.no_accuracy:
                figures["accuracy"] = {}
                for label, reg in ((f"{len(few)} tools", few), (f"{len(many)} tools", many)):
                    for layout, cap in (("flat", FLAT), ("routed", ROUTED)):
                        acc = accuracy(llm, reg, workspace, cap)
                        figures["accuracy"][f"{label} {layout}"] = acc
                        kv_note = ""
                        if acc["second_step_kv"]:
                            n = len(acc["second_step_kv"])
                            ev = sum(c["evaluated"] for c in acc["second_step_kv"]) / n
                            pr = sum(c["prompt"] for c in acc["second_step_kv"]) / n
                            kv_note = f"; after open_toolset: mean prompt {pr:.0f}, evaluated {ev:.0f} (llama.cpp)"
                        print(
                            f"accuracy {label:9} {layout:6}: {acc['correct']}/{acc['total']} "
                            f"(opened a toolset first: {acc['opened_toolset_first']}{kv_note})",
                            flush=True,
                        )
        finally:
            many.close()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
