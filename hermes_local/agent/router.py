"""The router at the front of a `--team` run (issue 30): who takes the task, and with `router_model` which toolsets.

`route_rules` (keywords and descriptions, no model call) and `route_model` (one short grammar-constrained choice)
pick who takes the task: a profile, or `manager` (several specialists' work, or none fits). With `router_model`
(a second, small model the wiring loads beside the main one), `route_toolsets` then makes one more constrained
call on it, choosing the toolsets the chosen role needs among those it would see, so the big model's first prompt
carries only those tools (`tools.toolsets.narrow`). `route` returns the `Routed` event the session log keeps, and
`front` the role a `--team` run takes (a resumed run keeps the logged choice, toolsets included, without routing
again). Does not load models, print, or know the CLI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from hermes_local.agent.loop import EventSink
from hermes_local.agent.team import Role
from hermes_local.config import Settings
from hermes_local.dialects import Dialect
from hermes_local.events import Event, Routed
from hermes_local.llm import LLM, CallOptions
from hermes_local.profiles import MANAGER, AgentProfile
from hermes_local.prompts import Segments
from hermes_local.textsafe import terminal_safe

Catalog = Callable[[str], dict[str, str]]  # the chosen role -> its toolsets (name -> what they hold)

_WORD = re.compile(r"[a-z0-9]+")
_COMMON = frozenset(
    "a an and the of to for in on with from by or it its is are be as at this that into over any all your you "
    "may only can who what which one each file files".split()
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _COMMON and len(w) > 2}


def route_rules(task: str, profiles: dict[str, AgentProfile]) -> tuple[str, dict[str, int], str]:
    """(chosen, score per profile, reason): keyword hits count 3, words shared with the description 1. Two or
    more profiles with keyword hits, or none scoring at all, go to the manager."""
    lower, words = task.lower(), _words(task)
    hits = {n: [k for k in p.keywords if k.strip() and k.lower() in lower] for n, p in profiles.items()}
    scores = {n: 3 * len(hits[n]) + len(words & _words(p.description)) for n, p in profiles.items()}
    keyed = [n for n in profiles if hits[n]]
    detail = ", ".join(f"{n}={s}" for n, s in scores.items())
    if len(keyed) > 1:
        return MANAGER, scores, f"keywords of several specialists ({', '.join(keyed)}): a multi-part task ({detail})"
    best = max(scores, key=lambda n: scores[n], default=None)
    if best is None or scores[best] == 0:
        return MANAGER, scores, f"no specialist matches ({detail})"
    return best, scores, f"highest score ({detail})"


def _ask(system: str, task: str, llm: LLM, dialect: Dialect, grammar: str, max_tokens: int) -> tuple[str, list[int]]:
    """One short constrained call: (the reply, stripped; the prompt's token ids)."""
    messages = [
        {"role": "system", "content": Segments.untrusted(system)},
        {"role": "user", "content": Segments.untrusted(task)},
    ]
    tokens = dialect.tokens(messages, [], llm)
    options = CallOptions(max_tokens=max_tokens, temperature=0.0, stop=dialect.stop or ("\n",), grammar=grammar)
    return llm.complete(tokens, options).text.strip(), tokens


def route_model(task: str, profiles: dict[str, AgentProfile], llm: LLM, dialect: Dialect) -> tuple[str, list[int], str]:
    """(chosen, prompt token ids, reason): one grammar-constrained call naming a profile or the manager."""
    names = [*profiles, MANAGER]
    lines = [f"- {n}: {' '.join(p.description.split())}" for n, p in profiles.items()]
    lines.append(f"- {MANAGER}: a task with parts for different specialists, or one that none of them fits")
    system = "Choose who should take the user's task. Reply with one name only:\n" + "\n".join(lines)
    grammar = "root ::= " + " | ".join(json.dumps(n) for n in names)
    text, tokens = _ask(system, task, llm, dialect, grammar, 12)
    chosen = next((n for n in names if text == n), None) or next((n for n in names if text.startswith(n)), MANAGER)
    return chosen, tokens, f"the model chose {terminal_safe(text[:40])!r}"


def subset_grammar(names: list[str]) -> str:
    """GBNF for a non-empty list of distinct `names`, comma-separated, in the order given (`a`, `a, c`, `b, c`)."""
    rules = [f"root ::= {' | '.join(f'pick{i}' for i in range(len(names)))}"]
    for i, name in enumerate(names):
        later = " | ".join(f"pick{j}" for j in range(i + 1, len(names)))
        rules.append(f"pick{i} ::= {json.dumps(name)}" + (f' (", " ({later}))?' if later else ""))
    return "\n".join(rules)


def parse_toolsets(text: str, names: list[str]) -> list[str]:
    """The distinct `names` the reply lists, in `names`' order (commas, spaces, quotes or brackets are fine)."""
    listed = {part.strip("\"'`[]().*") for part in re.split(r"[,;\s]+", text)}
    return [n for n in names if n in listed]


def route_toolsets(task: str, who: str, catalog: dict[str, str], llm: LLM, dialect: Dialect) -> tuple[list[str], str]:
    """(toolsets, reason): one constrained call choosing the toolsets `who` needs among `catalog` (name -> what it
    holds). One toolset or none needs no call; a reply naming none of them keeps them all (the reason says so)."""
    names = list(catalog)
    if len(names) <= 1:
        return names, f"toolsets: {', '.join(names) or 'none'} (nothing to choose)"
    lines = [f"- {n}: {' '.join(about.split())}" for n, about in catalog.items()]
    system = (
        f"The {who} agent will take the user's task with some of these toolsets. Choose only the toolsets the task "
        "needs. Reply with their names, comma-separated, and nothing else:\n" + "\n".join(lines)
    )
    text, _ = _ask(system, task, llm, dialect, subset_grammar(names), 8 * len(names) + 4)
    picked = parse_toolsets(text, names)
    if not picked:
        return names, f"toolsets: the model's {terminal_safe(text[:40])!r} names none of them, so all are kept"
    return picked, f"toolsets: the model chose {terminal_safe(text[:60])!r}"


def route(task: str, settings: Settings, llm: LLM, dialect: Dialect, catalog: Catalog | None = None) -> Routed:
    """Who takes a `--team` task, by `settings.router` (or `router_model`), as the event the session log keeps.
    With `router_model` and a `catalog` (the chosen role's toolsets), the toolsets are chosen too."""
    candidates, kind = [*settings.agents, MANAGER], "router_model" if settings.router_model else settings.router
    if kind == "rules":
        chosen, _, reason = route_rules(task, settings.agents)
    else:  # `llm` is the run's model, or the router model (RunHandle._route)
        chosen, _, reason = route_model(task, settings.agents, llm, dialect)
    if kind != "router_model" or catalog is None:
        return Routed(kind, chosen, candidates, reason)
    toolsets, why = route_toolsets(task, chosen, catalog(chosen), llm, dialect)
    return Routed(kind, chosen, candidates, f"{reason}; {why}", toolsets=toolsets)


def front(
    task: str,
    settings: Settings,
    llm: LLM,
    dialect: Dialect,
    session: str,
    sink: EventSink,
    logged: list[Event],
    catalog: Catalog | None = None,
) -> Role:
    """The role a `--team` run takes: the router's choice (reported to `sink`), or the one its log already holds
    (`logged`: a resumed session keeps its specialist and toolsets). The manager is the plain run, offered
    `delegate`; either is narrowed to the router model's toolsets when it chose some."""
    routed = next((e for e in logged if isinstance(e, Routed)), None)
    if routed is None:
        routed = route(task, settings, llm, dialect, catalog)
        sink(routed)
    toolsets = tuple(routed.toolsets) if routed.toolsets is not None else None
    if routed.chosen in settings.agents:
        return Role(routed.chosen, 1, (), session, toolsets)
    return Role(session=session, toolsets=toolsets)
