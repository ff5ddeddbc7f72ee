"""What 20 installed skills cost in prompt tokens per step, against the same 20 given as instructions (issue 47).

Writes 20 skill folders (`SKILL.md` with a name, one line and a body of steps, as the agentskills format has them)
into a temporary `$HERMES_LOCAL_HOME/skills`, then renders the first prompt of one task three ways with
`hermes-local prompt TASK --json` (the exact prompt a run sends, tokenized with the embedded model's own
vocabulary, loaded vocabulary-only: no weights, nothing decoded, nothing timed):
  base     no skills, no instructions
  skills   the 20 skills installed: the prompt carries their catalog (names and one line) and `open_skill`
  inline   no skills; the same 20 skills' full text as `instructions` (what a user does without skills)
The system part of the prompt is in every step's prompt, so "per step" is the first prompt's tokens minus the
base's. Opening a skill adds its body once, as a tool result (its tokens are printed as well), after the cached
prefix. Correctness figures, not timings: any machine gives the same numbers.

  PYTHONPATH=$PWD python scripts/skills_cost.py [--skills 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TASK = "Write this week's report from notes.txt into report.md."
TOPICS = [
    ("weekly-report", "Writes the weekly status report from notes.txt into report.md."),
    ("release-notes", "Drafts release notes from the git log since the last tag."),
    ("sql-style", "House style for SQL queries against the sales database."),
    ("invoice-check", "Checks an invoice CSV against the orders table and lists mismatches."),
    ("meeting-minutes", "Turns raw meeting notes into minutes with decisions and owners."),
    ("python-lint", "Runs the linters on changed Python files and fixes what they report."),
    ("backup-verify", "Verifies last night's backup archive lists every project folder."),
    ("expense-summary", "Summarises a month of expenses by category into a table."),
    ("changelog-entry", "Adds a changelog entry in the project's format for a finished change."),
    ("email-draft", "Drafts a short, polite email reply from bullet points."),
    ("csv-clean", "Cleans a CSV: trims cells, fixes dates to ISO format, drops empty rows."),
    ("test-triage", "Reads a failing test log and names the likely cause and file."),
    ("docs-link-check", "Finds broken relative links in the docs folder."),
    ("budget-forecast", "Projects next quarter's budget from the last four quarters."),
    ("contract-dates", "Lists renewal and notice dates found in contract text files."),
    ("onboarding-list", "Builds a new colleague's first-week checklist from the team wiki."),
    ("log-errors", "Groups the errors of an application log by message and counts them."),
    ("translation-check", "Compares two language files and lists missing or stale keys."),
    ("inventory-reorder", "Lists stock items below their reorder level with suggested amounts."),
    ("code-review", "Reviews a diff for bugs, missing tests and unclear names, in that order."),
]


def body(name: str, description: str) -> str:
    """A skill body of the usual shape: when to use it, numbered steps, rules, the output's form."""
    words = name.replace("-", " ")
    steps = [
        f"Read the inputs the task names; if none are named, look for the usual {words} files in the workspace.",
        "List what you found before changing anything, one line per file, with its size.",
        f"Apply the {words} procedure: work through the inputs in order and keep a note of each finding.",
        "Check every figure or date you copy against its source line; never round or guess a value.",
        "Where an input is missing or unreadable, say so in the output instead of inventing content.",
        "Write the result to the file the task names (or report.md) in the format below.",
        "Finish by stating which files you read and which you wrote.",
    ]
    rules = [
        "Keep the user's own wording where you quote them.",
        "Use ISO dates (2026-01-31) and plain numbers without thousands separators.",
        "Do not run commands that change files outside the workspace.",
    ]
    lines = [f"# {words.title()}", "", description, "", "## Steps", ""]
    lines += [f"{i}. {s}" for i, s in enumerate(steps, 1)]
    lines += ["", "## Rules", ""] + [f"- {r}" for r in rules]
    lines += ["", "## Output", "", "A heading, then one line per item: `- item: finding (source line)`."]
    return "\n".join(lines)


def prompt_tokens(home: Path, workspace: Path, instructions: str = "") -> int:
    """The first prompt's token count, as `hermes-local prompt TASK --json` renders and counts it."""
    env = {**os.environ, "HERMES_LOCAL_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "hermes_local", "prompt", TASK, "--json"]
    if instructions:
        instructions_file = home / "instructions.txt"
        instructions_file.write_text(instructions, encoding="utf-8")
        argv += ["--instructions", f"@{instructions_file}"]
    done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"prompt failed: {done.stderr.strip()[-500:]}")
    return int(json.loads(done.stdout)["token_count"])


def text_tokens(texts: list[str]) -> list[int]:
    """Each text's tokens in the embedded model's vocabulary (vocabulary-only load)."""
    from hermes_local.config import load_settings
    from hermes_local.runtime import find_model, load_tokenizer

    settings = load_settings()
    llm = load_tokenizer(settings, find_model(settings))
    return [len(llm.tokenize(t, special=False)) for t in texts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skills", type=int, default=20, help="how many skills (at most 20)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    chosen = TOPICS[: max(1, min(args.skills, len(TOPICS)))]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        workspace.mkdir()
        homes = {k: root / k for k in ("base", "skills", "inline")}
        for home in homes.values():
            home.mkdir()
        texts = []
        for name, description in chosen:
            text = f"---\nname: {name}\ndescription: {description}\n---\n{body(name, description)}\n"
            folder = homes["skills"] / "skills" / name
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(text, encoding="utf-8")
            texts.append(text)
        inline = "\n\n".join(f"Skill {name}: {description}\n{body(name, description)}" for name, description in chosen)
        base = prompt_tokens(homes["base"], workspace)
        with_skills = prompt_tokens(homes["skills"], workspace)
        with_inline = prompt_tokens(homes["inline"], workspace, inline)
        os.environ["HERMES_LOCAL_HOME"] = str(homes["base"])
        bodies = text_tokens([body(n, d) for n, d in chosen])
    catalog, inlined = with_skills - base, with_inline - base
    figures = {
        "skills": len(chosen),
        "first_prompt_tokens": {"base": base, "skills": with_skills, "inline": with_inline},
        "per_step_tokens": {"skills_catalog": catalog, "inline_instructions": inlined},
        "ratio_inline_over_catalog": round(inlined / catalog, 2) if catalog else None,
        "open_one_skill_tokens_mean": round(sum(bodies) / len(bodies), 1),
    }
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    print(f"{len(chosen)} skills, task: {TASK!r} (embedded model's vocabulary)")
    print(f"first prompt: base {base}, with skills {with_skills}, with the same text inline {with_inline} tokens")
    print(f"per step: the catalog adds {catalog} tokens, inline instructions add {inlined} "
          f"(inline / catalog = {figures['ratio_inline_over_catalog']}x)")  # fmt: skip
    print(f"opening one skill adds its body once, after the cached prefix: {figures['open_one_skill_tokens_mean']} "
          "tokens on average")  # fmt: skip


if __name__ == "__main__":
    main()
