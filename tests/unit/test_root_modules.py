"""The rule of docs/architecture.md "Conventions" for ``connector/``'s root, checked on the code (issue 54).

A module at ``connector/``'s root is shared ground: two or more packages import it. A module one package alone
uses lives in that package. The modules are every ``connector/*.py`` but ``__init__.py``, and every extension
module setup.py builds at the root (``Extension("connector.NAME", ...)``: a C kernel is a module too). The
packages are ``connector/``'s subpackages (``connector.decode``, ``connector.source``, ...), ``streaming_apps``
and ``broker_stub``; a root module importing another does not count (it is no package), nor do tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("connector", "streaming_apps", "broker_stub")


def _extension_names() -> set[str]:
    """The names of setup.py's ``Extension(...)`` calls (first argument, a string)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Extension"
            and node.args and isinstance(node.args[0], ast.Constant)}


def root_modules() -> set[str]:
    """``connector.NAME`` for each module at ``connector/``'s root: its ``.py`` files and setup.py's extensions."""
    names = {f"connector.{p.stem}" for p in (ROOT / "connector").glob("*.py") if p.stem != "__init__"}
    names |= {name for name in _extension_names() if name.count(".") == 1 and name.startswith("connector.")}
    return names


def _package(path: Path) -> str | None:
    """The package a file belongs to for this rule; ``None`` for a module at ``connector/``'s root."""
    parts = path.relative_to(ROOT).parts
    if parts[0] != "connector":
        return parts[0]
    return f"connector.{parts[1]}" if len(parts) > 2 else None


def _imports(path: Path) -> set[str]:
    """Every dotted name ``path`` imports, module-level or inside a function; ``from a import b`` gives ``a.b``."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the file's package
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def importing_packages() -> dict[str, set[str]]:
    """For each root module, the packages of the files under connector/, streaming_apps/, broker_stub/ importing it."""
    modules = root_modules()
    users: dict[str, set[str]] = {name: set() for name in modules}
    for top in SCANNED:
        for path in (ROOT / top).rglob("*.py"):
            package = _package(path)
            if package is None:
                continue
            for name in _imports(path):
                for module in modules:
                    if name == module or name.startswith(module + "."):
                        users[module].add(package)
    return users


def test_every_module_at_the_connector_root_is_imported_by_two_or_more_packages():
    alone = {module: sorted(packages) for module, packages in importing_packages().items() if len(packages) < 2}
    assert not alone, f"connector/'s root holds modules fewer than two packages import (move each into it): {alone}"


def test_the_rule_sees_the_modules_and_their_importers():
    # the walk finds what the code plainly does: errors.py is shared by the codecs, the clients and the stub
    users = importing_packages()
    assert "connector.errors" in root_modules()
    assert {"connector.protocol", "connector.client", "broker_stub", "streaming_apps"} <= users["connector.errors"]
