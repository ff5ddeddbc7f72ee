"""Team routing figures (issue 30): each router's accuracy on a labelled set, its latency, and the first prompt.

The profiles are the README's Teams example (analyst, writer, researcher); the labelled set is
`tests/data/routing.jsonl` (44 tasks: 12 analyst, 12 writer, 10 researcher, 10 manager). Prints, per router:

1. accuracy (overall and per label) and the time a decision adds (mean and total);
2. for `model` (one grammar-constrained choice; `--model` a registry name or GGUF, default the embedded SmolLM2):
   the routing call's prompt tokens. As `router = "model"` on the run's own model the big model pays them on top
   of the task; as `router_model` (the same call on a second, small model: these figures with SmolLM2) it pays
   nothing;
3. the big model's first-prompt tokens (system + tools + goal, in the model's tokenizer): one flat agent with
   every tool (10 built-ins > max_tools_in_prompt 8: the toolset list and `open_toolset`; and with every schema
   in full), the manager (the same and `delegate`), each specialist, and the mean over the set when each task
   starts at the rules router's pick;
4. for `router_model` (the model router's pick, then one more constrained call choosing the toolsets): toolset
   accuracy against the set's `toolsets` labels, asked for the labelled role (exact, and superset: every expected
   toolset kept), over the tasks whose role has a choice (two toolsets or more), and the mean first-prompt tokens
   of the picked role with all its tools and narrowed to the toolsets chosen for it, and the time a decision adds.

No task is run: routing is one decision, the first prompt is rendered but never completed. Every tool counts as
usable (a database is given, a host allowed, nobody to ask): the manager chooses among time, files, memory, db,
shell and web, the analyst between db and files, the researcher between files and web (the writer has files only).

  python scripts/team_routing.py                      # rules and model (the model part takes a minute on a CPU)
  python scripts/team_routing.py --routers rules,model,router_model
  python scripts/team_routing.py --routers rules      # no model load: the first prompt in a word tokenizer
  python scripts/team_routing.py --json team.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def readme_profiles() -> dict[str, Any]:
    """The `[agents.NAME]` tables of the README's Teams section, as documented."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("### Teams", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    return tomllib.loads(block)["agents"]


def labelled() -> list[dict[str, str]]:
    lines = (ROOT / "tests" / "data" / "routing.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def score(picks: list[str], rows: list[dict[str, str]]) -> dict[str, Any]:
    right = Counter(r["agent"] for r, p in zip(rows, picks, strict=True) if p == r["agent"])
    total = Counter(r["agent"] for r in rows)
    return {
        "accuracy": round(sum(right.values()) / len(rows), 3),
        "per_label": {label: f"{right[label]}/{n}" for label, n in total.items()},
        "wrong": [
            {"task": r["task"], "label": r["agent"], "pick": p}
            for r, p in zip(rows, picks, strict=True)
            if p != r["agent"]
        ],
    }


def prompt_tokens(settings: Any, tokenizer: Any, role: Any, folder: Path) -> int:
    """The first prompt's tokens (system + tools + goal "x") of `role` (None: the flat agent), every tool usable."""
    from hermes_local.runtime import build_registry
    from hermes_local.testing import ScriptedLLM, build_agent

    db = folder / "shop.sqlite"
    db.touch()
    llm = ScriptedLLM(["ok"], tokenizer=tokenizer, n_ctx=32768)
    with build_agent(llm, settings, workspace=folder, registry=build_registry(), db_path=db, role=role) as agent:
        return len(agent.dialect.tokens(agent.new_memory("x").messages(), agent.tool_schemas(), llm))


def toolset_router(settings: Any, llm: Any, dialect: Any, tokenizer: Any, rows: list[dict[str, Any]],
                   picks: list[str], pick_ms: list[float]) -> dict[str, Any]:  # fmt: skip
    """`router_model`'s toolsets: accuracy on the labelled role, and the picked role's first prompt with and without."""
    from hermes_local.agent.router import route_toolsets
    from hermes_local.agent.team import Role
    from hermes_local.runtime import build_registry, role_catalog

    registry = build_registry()
    catalogs = {who: role_catalog(settings, registry, who, db=True) for who in {*settings.agents, "manager"}}
    exact = superset = asked = 0
    wrong, times, full, narrowed = [], [], [], []
    sizes: dict[tuple[str, tuple[str, ...] | None], int] = {}
    with tempfile.TemporaryDirectory() as folder:

        def tokens(who: str, toolsets: tuple[str, ...] | None) -> int:
            if (who, toolsets) not in sizes:
                role = Role(who if who in settings.agents else None, 1, (), "", toolsets)
                sizes[who, toolsets] = prompt_tokens(settings, tokenizer, role, Path(folder))
            return sizes[who, toolsets]

        for r, pick, ms in zip(rows, picks, pick_ms, strict=True):
            expected, label = r.get("toolsets"), r["agent"]
            if expected is not None and len(catalogs[label]) > 1:
                chosen, _ = route_toolsets(r["task"], label, catalogs[label], llm, dialect)
                asked += 1
                exact += set(chosen) == set(expected)
                superset += set(chosen) >= set(expected)
                if set(chosen) != set(expected):
                    wrong.append({"task": r["task"], "label": label, "expected": expected, "chose": chosen})
            t0 = time.perf_counter()
            kept, _ = route_toolsets(r["task"], pick, catalogs[pick], llm, dialect)  # what a run on the pick gets
            times.append(ms + 1000 * (time.perf_counter() - t0))
            full.append(tokens(pick, None))
            narrowed.append(tokens(pick, tuple(kept)))
    return {
        "toolset_tasks": asked,
        "toolset_exact": round(exact / asked, 3) if asked else None,
        "toolset_superset": round(superset / asked, 3) if asked else None,
        "toolset_wrong": wrong,
        "mean_ms": round(sum(times) / len(times), 1),
        "first_prompt_all_tools": round(sum(full) / len(full), 1),
        "first_prompt_narrowed": round(sum(narrowed) / len(narrowed), 1),
    }


def first_prompts(settings: Any, tokenizer: Any, rows: list[dict[str, str]], picks: list[str]) -> dict[str, Any]:
    """First-prompt tokens of the flat agent, the manager and each specialist (every tool usable: --db, a host)."""
    from hermes_local.agent.team import Role
    from hermes_local.profiles import MANAGER

    flat = settings.model_copy(update={"agents": {}})
    full = flat.model_copy(update={"max_tools_in_prompt": 1000})  # every schema in full, no open_toolset
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, chosen, role in [
            ("flat", flat, None),
            ("flat_all_schemas", full, None),
            (MANAGER, settings, None),
        ] + [(agent, settings, Role(agent, 1)) for agent in settings.agents]:
            sizes[name] = prompt_tokens(chosen, tokenizer, role, Path(folder))
    routed = [sizes[p] for p in picks]
    return {"tokens": sizes, "mean_with_rules_routing": round(sum(routed) / len(routed), 1), "without": sizes["flat"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--routers", default="rules,model", help="comma-separated: rules, model, router_model")
    parser.add_argument("--model", default=None, help="the model of the model router (default: embedded SmolLM2)")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the figures here")
    args = parser.parse_args()

    from hermes_local.agent.router import route_model, route_rules
    from hermes_local.config import Settings
    from hermes_local.testing import WordTokenizer

    rows = labelled()
    settings = Settings.model_validate({"agents": readme_profiles(), "allow_hosts": ["docs.example.com"]})
    routers = [r.strip() for r in args.routers.split(",") if r.strip()]
    out: dict[str, Any] = {"tasks": len(rows), "labels": dict(Counter(r["agent"] for r in rows))}

    started = time.perf_counter()
    rules = [route_rules(r["task"], settings.agents)[0] for r in rows]
    seconds = time.perf_counter() - started
    out["rules"] = score(rules, rows) | {"mean_ms": round(1000 * seconds / len(rows), 3)}
    tokenizer: Any = WordTokenizer()
    out["tokenizer"] = "word (no model loaded)"
    if "model" in routers or "router_model" in routers:
        from hermes_local.models.registry import embedded_model_path
        from hermes_local.runtime import dialect_for, load_llm

        model = args.model or str(embedded_model_path())
        msettings = settings.model_copy(
            update={"model": model, "n_ctx": 2048, "n_gpu_layers": 0, "prompt_cache": False}
        )
        llm = load_llm(msettings)
        dialect = dialect_for(msettings, llm)
        picks, prompt_tokens, times = [], [], []
        for r in rows:
            t0 = time.perf_counter()
            chosen, tokens, _ = route_model(r["task"], settings.agents, llm, dialect)
            times.append(time.perf_counter() - t0)
            picks.append(chosen)
            prompt_tokens.append(len(tokens))
        out["model"] = score(picks, rows) | {
            "model": Path(model).name,
            "mean_ms": round(1000 * sum(times) / len(times), 1),
            "routing_prompt_tokens_mean": round(sum(prompt_tokens) / len(prompt_tokens), 1),
        }
        tokenizer, out["tokenizer"] = llm, Path(model).name
        if "router_model" in routers:
            ms = [1000 * t for t in times]
            out["router_model"] = toolset_router(settings, llm, dialect, tokenizer, rows, picks, ms)
    out["first_prompt"] = first_prompts(settings, tokenizer, rows, rules)

    for name in ("rules", "model"):
        if name in out:
            r = out[name]
            extra = f", routing prompt {r['routing_prompt_tokens_mean']} tokens" if name == "model" else ""
            labels = ", ".join(f"{k} {v}" for k, v in r["per_label"].items())
            print(f"{name:6} accuracy {r['accuracy']:.0%} ({labels}); {r['mean_ms']} ms per decision{extra}")
    fp = out["first_prompt"]
    print(f"first prompt ({out['tokenizer']} tokens): " + ", ".join(f"{k} {v}" for k, v in fp["tokens"].items()))
    print(f"  without routing {fp['without']}; with the rules router's pick, mean {fp['mean_with_rules_routing']}")
    if "router_model" in out:
        r = out["router_model"]
        print(
            f"router_model toolsets on {r['toolset_tasks']} tasks with a choice: exact {r['toolset_exact']:.0%}, "
            f"superset of expected {r['toolset_superset']:.0%}; {r['mean_ms']} ms per decision (who + toolsets)"
        )
        print(
            f"  first prompt of the picked role, mean: {r['first_prompt_all_tools']} with all its tools, "
            f"{r['first_prompt_narrowed']} narrowed to the chosen toolsets"
        )
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
