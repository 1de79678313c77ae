"""Each RocketMQ fact named in issue 23 is defined once, in connector/protocol/, and nowhere again.

The facts and their one home:

* the HA port ``listenPort + 1`` and the VIP channel port ``listenPort - 2`` (and their inverses):
  :mod:`connector.protocol.broker`;
* ``MASTER_ID`` and the ``PERM_*`` bits: :mod:`connector.protocol.broker`;
* the ConsumeQueue entry (``">qiq"``, 20 bytes, ``CQ_STORE_UNIT_SIZE``) and ``PLACEHOLDER_SIZE``:
  :mod:`connector.protocol.consume_queue`;
* request codes: :class:`connector.protocol.remoting.RequestCode` (no integer literal in the stub's remoting
  processors that used them);
* record header fields: :mod:`connector.protocol.commitlog` (no hand-worked offsets in the modules that had
  them, the decoder's record walk in connector/decode/stream.py included).

Searched: the project's code in connector/, broker_stub/, streaming_apps/, bench/ and tests/support/, with
comments and string literals (docstrings) left out except where a string is the fact itself (a struct format).
tests/support/message_version.py reads a record by hand on purpose (an independent check of the V2 layout).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("connector", "broker_stub", "streaming_apps", "bench", "tests/support")
BROKER_FACTS = "connector/protocol/broker.py"
CQ_FACTS = "connector/protocol/consume_queue.py"


def _files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _code_only(text: str) -> str:
    """``text`` with comments and string literals (docstrings, f-strings) blanked, line structure kept."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    chars = list(text)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in _BLANKED:
            a = starts[tok.start[0] - 1] + tok.start[1]
            b = starts[tok.end[0] - 1] + tok.end[1]
            chars[a:b] = [c if c == "\n" else " " for c in chars[a:b]]
    return "".join(chars)


_BLANKED = {tokenize.COMMENT, tokenize.STRING} | {
    getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)}


def _hits(pattern: str, *, allowed: tuple[str, ...] = (), code_only: bool = True, flags: int = 0) -> list[str]:
    rx = re.compile(pattern, flags)
    out = []
    for path in _files():
        if _rel(path) in allowed:
            continue
        text = path.read_text(encoding="utf-8")
        if code_only:
            text = _code_only(text)
        for n, line in enumerate(text.splitlines(), 1):
            if rx.search(line):
                out.append(f"{_rel(path)}:{n}: {line.strip()}")
    return out


def test_ha_port_arithmetic_lives_in_one_helper():
    # listenPort + 1 (HA port) and its inverse haPort - 1 (the remoting port of an HA address)
    hits = _hits(r"port\w*\s*\+\s*1\b|ha_?port\w*\s*-\s*1\b|shift_port\([^)]*,\s*-\s*1\s*\)",
                 allowed=(BROKER_FACTS,), flags=re.IGNORECASE)
    assert not hits, "HA port arithmetic outside connector/protocol/broker.py:\n" + "\n".join(hits)


def test_vip_port_arithmetic_lives_in_one_helper():
    hits = _hits(r"port\w*\s*-\s*2\b|shift_port\([^)]*,\s*-\s*2\s*\)", allowed=(BROKER_FACTS,), flags=re.IGNORECASE)
    assert not hits, "VIP port arithmetic outside connector/protocol/broker.py:\n" + "\n".join(hits)


def test_consume_queue_entry_struct_is_defined_once():
    structs = _hits(r"""["']>?qiq["']""", allowed=(CQ_FACTS,), code_only=False)
    dtypes = _hits(r"""["']>i8["'].*["']>i4["'].*["']>i8["']""", allowed=(CQ_FACTS,), code_only=False)
    assert not structs + dtypes, "ConsumeQueue entry layout outside connector/protocol/consume_queue.py:\n" + \
        "\n".join(structs + dtypes)


def _module_assignments(name: str) -> list[str]:
    out = []
    for path in _files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name) and target.id == name:
                    out.append(f"{_rel(path)}:{node.lineno}")
    return out


@pytest.mark.parametrize(("name", "home"), [
    ("PLACEHOLDER_SIZE", CQ_FACTS),
    ("CQ_STORE_UNIT_SIZE", CQ_FACTS),
    ("MASTER_ID", BROKER_FACTS),
    ("PERM_PRIORITY", BROKER_FACTS),
    ("PERM_READ", BROKER_FACTS),
    ("PERM_WRITE", BROKER_FACTS),
    ("PERM_INHERIT", BROKER_FACTS),
])
def test_constant_is_assigned_once_in_its_home(name, home):
    assert [a.rpartition(":")[0] for a in _module_assignments(name)] == [home]


@pytest.mark.parametrize("module", ["broker_stub/remoting/pull_processor.py", "broker_stub/remoting/acl.py"])
def test_remoting_processors_name_request_codes(module):
    """No integer literal in a ``*CODES`` table or compared with a request's ``code``."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    literals = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("CODES")
                                                for t in node.targets):
            literals += [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                         and isinstance(c.value, int) and not isinstance(c.value, bool)]
        elif isinstance(node, ast.Compare):
            names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                     if isinstance(n, ast.Name | ast.Attribute)}
            if "code" in names:
                literals += [c.value for c in ast.walk(node) if isinstance(c, ast.Constant)
                             and isinstance(c.value, int) and not isinstance(c.value, bool)]
    assert not literals, f"{module}: request code literals {literals}; name them in RequestCode"


def _literal_position(node: ast.AST | None) -> bool:
    """``<int>`` or ``x + <int>``: a position worked out by hand."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        node = node.right
    return isinstance(node, ast.Constant) and isinstance(node.value, int)


@pytest.mark.parametrize("module", ["broker_stub/broker.py", "broker_stub/store/recovery.py",
                                    "connector/source/driver/offsets.py", "broker_stub/store/reput.py",
                                    "connector/decode/stream.py"])
def test_record_header_fields_are_read_through_the_commitlog_codec(module):
    """No record field read at a hand-worked position: ``unpack_from(fmt, buf, <int>)``, ``x[<int>:<int>]``
    slices fed to ``int.from_bytes``, or a hand-written header struct."""
    text = (ROOT / module).read_text(encoding="utf-8")
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if fn == "unpack_from" and any(isinstance(a, ast.Constant) and isinstance(a.value, int) and a.value
                                       for a in node.args[1:]):
            found.append(f"line {node.lineno}: unpack_from at a literal position")
        if fn == "unpack_from" and any(isinstance(a, ast.BinOp) and isinstance(a.right, ast.Constant)
                                       and isinstance(a.right.value, int) for a in node.args[1:]):
            found.append(f"line {node.lineno}: unpack_from at pos + a literal")
        if fn == "from_bytes" and node.args and isinstance(node.args[0], ast.Subscript) \
                and isinstance(node.args[0].slice, ast.Slice) \
                and any(_literal_position(b) for b in (node.args[0].slice.lower, node.args[0].slice.upper)):
            found.append(f"line {node.lineno}: int.from_bytes of a slice at a literal position")
        if fn == "Struct" and node.args and isinstance(node.args[0], ast.Constant) \
                and str(node.args[0].value).startswith(">ii"):
            found.append(f"line {node.lineno}: a hand-written record header struct")
    assert not found, f"{module}: " + "; ".join(found)


def test_names_connector_options_imports_are_imported_from_their_own_module():
    """connector.options.parse takes the defaults a lower module uses from that module (the HA client's fetch
    defaults, the decoder's batch bounds); nothing imports such a name *through* connector.options.parse."""
    tree = ast.parse((ROOT / "connector/options/parse.py").read_text(encoding="utf-8"))
    borrowed = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    found = []
    for path in sorted(p for d in (*SCANNED, "tests") for p in (ROOT / d).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "connector.options.parse":
                found += [f"{_rel(path)}:{node.lineno}: {a.name}" for a in node.names if a.name in borrowed]
    assert not found, "imported through the parser, not from their module:\n" + "\n".join(sorted(set(found)))
