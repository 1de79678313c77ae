"""No import cycles between the project's modules: every ``import`` counts, module-level or inside a function
(issue 11); the second test counts those under ``if TYPE_CHECKING:`` too (issue 23: annotations are
dependencies of the design even when never executed)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("connector", "broker_stub", "streaming_apps")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported_names(tree: ast.AST, *, type_checking: bool = False) -> set[str]:
    """Module names ``tree`` imports; ``type_checking`` also counts the ``if TYPE_CHECKING:`` branch."""
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
            names.add(node.module)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _graph(*, type_checking: bool = False) -> dict[str, set[str]]:
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        deps = {owner(n) for n in _imported_names(ast.parse(path.read_text(encoding="utf-8")),
                                                 type_checking=type_checking)}
        # a package's own submodules import it implicitly; that edge is not a cycle of the code
        graph[name] = {d for d in deps if d and d != name and not name.startswith(d + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_checker_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_no_import_cycles_counting_type_checking_imports():
    assert _cycles(_graph(type_checking=True)) == []


def test_the_delta_writers_sit_beside_the_source_not_above_it():
    """Issue 23: ``connector.delta`` writes tables and knows nothing of the source; the direct landing
    (``connector.landing``) uses both, and neither of them imports it."""
    graph = _graph(type_checking=True)
    above = ("connector.source", "connector.landing")
    upward = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                    if (m.startswith("connector.delta") and d.startswith(above))
                    or (m.startswith("connector.source") and d.startswith("connector.landing")))
    assert upward == []
    landing = set().union(*(deps for m, deps in graph.items() if m.startswith("connector.landing.")))
    assert {"connector.source", "connector.delta.sink"} <= landing
