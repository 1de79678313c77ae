"""docs/architecture.md lists every module of connector/, broker_stub/ and streaming_apps/ (its section "Every
module"), and names only modules that exist (issue 23).

A module is a ``.py`` file under those packages, named in the doc by its path (``connector/delta/commit.py``).
An ``__init__.py`` that holds nothing or only a docstring is a package marker and need not be named (the doc's
"Every module" says so). Folder paths the doc names (``broker_stub/store/``) must exist too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("connector", "broker_stub", "streaming_apps")
#: a module path (``pkg/a/b.py``) or a folder path (``pkg/a/``) of one of PACKAGES, not inside a longer path
_PATH = re.compile(r"(?<![\w/.])((?:" + "|".join(PACKAGES) + r")/(?:\w+/)*(?:\w+\.py\b)?)")


def _is_package_marker(path: Path) -> bool:
    if path.name != "__init__.py":
        return False
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
               for n in body)


def _modules() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for package in PACKAGES for p in (ROOT / package).rglob("*.py")
            if "__pycache__" not in p.parts and not _is_package_marker(p)}


def _named_paths(section: str | None = None) -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    if section is not None:
        head = f"\n## {section}\n"
        assert head in text, f"docs/architecture.md has no section {section!r}"
        text = text.split(head, 1)[1].split("\n## ", 1)[0]
    return set(_PATH.findall(text))


def test_every_module_has_its_line_in_the_architecture_doc():
    named = _named_paths("Every module")
    missing = sorted(m for m in _modules() if m not in named)
    assert not missing, f"docs/architecture.md 'Every module' does not list these modules: {missing}"


def test_the_architecture_doc_names_no_module_or_folder_that_does_not_exist():
    gone = sorted(p for p in _named_paths()
                  if (p.endswith(".py") or p.endswith("/")) and not (ROOT / p).exists())
    assert not gone, f"docs/architecture.md names paths that do not exist: {gone}"


def test_the_doc_paths_pattern_sees_module_and_folder_names():
    text = "see `connector/delta/commit.py`, `broker_stub/store/` and connector.retry, not xconnector/a.py"
    assert set(_PATH.findall(text)) == {"connector/delta/commit.py", "broker_stub/store/"}


ERRORS_DOC = ROOT / "docs" / "errors.md"
#: a table row of docs/errors.md: ``| `Class` | ... |``
_ERROR_ROW = re.compile(r"^\| `(\w+)` \| (.+?) \|", re.M)


def _error_classes() -> dict[str, tuple[str, list[str]]]:
    """Every exception class of the project's packages that is not private: name -> (module path, base names)."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases] \
                    if isinstance(node, ast.ClassDef) else []
                if bases and not node.name.startswith("_") and any(
                        b.endswith(("Error", "Exception")) for b in bases):
                    out[node.name] = (path.relative_to(ROOT).as_posix(), bases)
    return out


def test_errors_doc_lists_every_error_class_and_the_library_bases_are_right():
    """docs/errors.md names every public exception class of connector/, broker_stub/ and streaming_apps/ (and no
    other); the library table's "base" column is the class's bases in connector/errors.py."""
    text = ERRORS_DOC.read_text(encoding="utf-8")
    rows = dict(_ERROR_ROW.findall(text))
    classes = _error_classes()
    assert sorted(set(classes) - set(rows)) == [], "docs/errors.md misses these error classes"
    assert sorted(set(rows) - set(classes) - {"HAReplicaError"}) == [], "docs/errors.md names classes that do not exist"
    library = text.split("\n## The library", 1)[1].split("\n## ", 1)[0]
    for name, base_cell in _ERROR_ROW.findall(library):
        module, bases = classes.get(name, ("connector/errors.py", ["Exception"]))
        assert module == "connector/errors.py", f"{name} is listed under connector.errors but defined in {module}"
        assert re.findall(r"`(\w+)`", base_cell) == bases, f"{name}: docs/errors.md says {base_cell}, the code {bases}"


def test_the_errors_doc_check_sees_a_missing_class():
    rows = dict(_ERROR_ROW.findall("| `AError` | `HAReplicaError` | when |\n| `BError` | `AError` | x |\n"))
    assert set(_error_classes()) - set(rows), "the project's classes are not all named AError/BError"
    assert rows == {"AError": "`HAReplicaError`", "BError": "`AError`"}
