"""The import rules of docs/architecture.md "Layers", checked on the code.

No import cycles between the project's modules: every ``import`` counts, module-level or inside a function
(issue 11), and those under ``if TYPE_CHECKING:`` too (issue 23: annotations are dependencies of the design
even when never executed). The doc's layer table (layer, its modules, the layers it may import) is read here:
an import between two layers the table does not allow fails, and so does an allowed import no module makes
(issue 41), so every arrow the doc draws is one the code has."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
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


# --- the doc's layer table ------------------------------------------------------------------------------
Layers = dict[str, tuple[tuple[str, ...], frozenset[str]]]  # layer -> (module patterns, layers it may import)


def _layer_table(text: str) -> Layers:
    """The table of docs/architecture.md "Layers" whose header is ``| layer | its modules | may import |``:
    ``layer -> (module patterns, allowed layers)``; a pattern ``a.b.*`` is ``a.b`` and everything under it."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("| layer | its modules | may import |", 1)[1].split("\n\n", 1)[0]
    out: Layers = {}
    for row in table.strip().splitlines()[1:]:
        layer, modules, allowed = (cell.strip() for cell in row.strip().strip("|").split("|"))
        out[layer] = (tuple(re.findall(r"`([\w.*]+)`", modules)), frozenset(re.findall(r"`([\w-]+)`", allowed)))
    return out


def _layer_of(module: str, layers: Layers) -> str | None:
    """The layer whose patterns name ``module`` most closely (the longest pattern wins), or None."""
    best, best_len = None, -1
    for layer, (patterns, _) in layers.items():
        for pattern in patterns:
            base = pattern[:-2] if pattern.endswith(".*") else pattern
            if module == base or (pattern.endswith(".*") and module.startswith(base + ".")):
                if len(base) > best_len:
                    best, best_len = layer, len(base)
    return best


def _layer_problems(graph: dict[str, set[str]], layers: Layers) -> list[str]:
    """Every module without a layer, every import between two layers the table does not allow, and every
    allowed arrow no import makes."""
    problems, used = [], set()
    for module in sorted(graph):
        if _layer_of(module, layers) is None:
            problems.append(f"{module} is in no layer of the table")
    for module, deps in sorted(graph.items()):
        here = _layer_of(module, layers)
        for dep in sorted(deps):
            there = _layer_of(dep, layers)
            if here is None or there is None or here == there:
                continue
            used.add((here, there))
            if there not in layers[here][1]:
                problems.append(f"{module} -> {dep}: layer {here} may not import layer {there}")
    for layer, (_, allowed) in sorted(layers.items()):
        problems += [f"the doc lets {layer} import {other}, but no module of it does"
                     for other in sorted(allowed - {there for here, there in used if here == layer})]
        problems += [f"the doc lets {layer} import {other}, which is not a layer of the table"
                     for other in sorted(allowed - set(layers))]
    return problems


def test_the_layer_table_of_the_architecture_doc_is_what_the_code_imports():
    layers = _layer_table(DOC.read_text(encoding="utf-8"))
    assert {"protocol", "errors", "client", "decode", "source-driver", "source-task", "delta", "landing",
            "broker_stub", "apps"} <= set(layers)
    assert _layer_problems(_graph(type_checking=True), layers) == []


def test_the_layer_checker_finds_a_wrong_direction_import_and_an_unused_arrow():
    doc = """
## Layers

| layer | its modules | may import |
|---|---|---|
| top | `pkg.top.*` | `low` |
| low | `pkg.low.*`, `pkg.base` | — |

## Next
"""
    layers = _layer_table(doc)
    assert layers == {"top": (("pkg.top.*",), frozenset({"low"})), "low": (("pkg.low.*", "pkg.base"), frozenset())}
    good = {"pkg.top.a": {"pkg.low.b"}, "pkg.low.b": {"pkg.base"}, "pkg.base": set()}
    assert _layer_problems(good, layers) == []
    bad = {**good, "pkg.low.c": {"pkg.top.a"}}  # one import up the table
    assert _layer_problems(bad, layers) == ["pkg.low.c -> pkg.top.a: layer low may not import layer top"]
    assert _layer_problems({"pkg.top.a": set(), "pkg.low.b": set(), "pkg.x": set()}, layers) == [
        "pkg.x is in no layer of the table", "the doc lets top import low, but no module of it does"]


def test_no_module_directly_under_connector_serves_only_the_source():
    """Issue 41: what only ``format("hareplica")`` uses lives under connector/source/; a module directly under
    connector/ is shared (imported by some other package too). The Spark classes (the data source and the stream
    reader) import at most 8 other project modules together: the rest is behind the driver's BatchPlanner and the
    task's PartitionReader; one is SourceOffset's module, the type the reader converts Spark's offset dicts to at
    its boundary (issue 54)."""
    graph = _graph(type_checking=True)
    packages = {m for m in graph if (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    top = sorted(m for m in graph if m.count(".") == 1 and m.startswith("connector.") and m not in packages)
    only_source = [m for m in top
                   if (users := {u for u, deps in graph.items() if m in deps})
                   and all(u.startswith("connector.source") for u in users)]
    assert only_source == []
    spark_classes = {"connector.source.datasource", "connector.source.reader"}
    imported = set().union(*(graph[m] for m in spark_classes)) - spark_classes
    assert len(imported) <= 8, sorted(imported)


def _parser_module(graph: dict[str, set[str]]) -> str:
    """The module that defines ``SourceOptions``, the parser of ``format("hareplica")``'s options."""
    found = [m for m in graph
             if re.search(r"^class SourceOptions\b", _modules()[m].read_text(encoding="utf-8"), re.MULTILINE)]
    assert len(found) == 1, found
    return found[0]


def _reached(graph: dict[str, set[str]], roots: list[str]) -> dict[str, str]:
    """Every module ``roots`` import, directly or through others: ``module -> the module that imports it``."""
    seen, stack = {}, list(roots)
    while stack:
        module = stack.pop()
        for dep in sorted(graph.get(module, ())):
            if dep not in seen and dep not in roots:
                seen[dep] = module
                stack.append(dep)
    return seen


def test_the_task_side_imports_neither_the_option_parser_nor_the_driver():
    """Issue 54: what runs in a task (the read, the decoder, the InputPartition, the PartitionReader the
    source's readers pickle to, and the LandingPartitionReader the landing's reader pickles to) reads the
    declaration and the settings it is handed; it imports neither the parser of the options (``SourceOptions``)
    nor any module of ``connector/source/driver/`` nor the Spark classes, directly or through another module
    (``import_function`` for ``batchTransform`` and ``landingSplit`` sits apart from the parser).
    tests/unit/connector/test_partition_reader.py checks the same in an interpreter that unpickles a reader."""
    graph = _graph(type_checking=True)
    task_side = sorted(m for m in graph if m.startswith(("connector.source.task", "connector.decode"))
                       or m in ("connector.source.partition", "connector.landing.partition_reader"))
    assert {"connector.source.task.transform", "connector.source.task.partition_reader",
            "connector.landing.partition_reader"} <= set(task_side)
    parser = _parser_module(graph)
    reached = _reached(graph, task_side)
    spark_classes = ("connector.source", "connector.source.datasource", "connector.source.reader",
                     "connector.source.batch_reader", "connector.landing.datasource", "connector.landing.reader")
    wrong = sorted(f"{reached[m]} -> {m}" for m in reached
                   if m == parser or m.startswith("connector.source.driver") or m in spark_classes)
    assert wrong == []
