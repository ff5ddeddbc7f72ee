"""The import structure of hermes_local: module counts, the longest import chain, import circles, the longest module.

Run from a checkout: `python scripts/import_structure.py [REPO]` (default: this checkout). Uses grimp (import-linter's
graph library, in the test extra); type-only imports count as arrows. Prints three lines; changes nothing.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import grimp


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of the import graph: a component of more than one module is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(component)

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return components


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    sys.path.insert(0, str(root))
    graph = grimp.build_graph("hermes_local", exclude_type_checking_imports=False, cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    components = strongly_connected(edges)
    where = {m: i for i, c in enumerate(components) for m in c}
    down = {i: {where[w] for m in c for w in edges[m]} - {i} for i, c in enumerate(components)}

    @functools.cache
    def depth(i: int) -> int:
        return 1 + max((depth(j) for j in down[i]), default=0)

    chain, i = [], max(range(len(components)), key=depth)
    while True:
        chain.append(components[i][0].removeprefix("hermes_local."))
        if not down[i]:
            break
        i = max(down[i], key=depth)
    files = list((root / "hermes_local").rglob("*.py"))
    longest = max(files, key=lambda p: len(p.read_text().splitlines()))
    circles = [sorted(c) for c in components if len(c) > 1]
    top = len(list((root / "hermes_local").glob("*.py")))
    print(f"modules: {len(files)} ({top} at the top of hermes_local/); import circles: {circles or 'none'}")
    print(f"longest import chain ({len(chain)} modules): {' -> '.join(chain)}")
    print(f"longest module: {longest.relative_to(root)} ({len(longest.read_text().splitlines())} lines)")


if __name__ == "__main__":
    main()
