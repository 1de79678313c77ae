"""A JSON writer that produces the exact text fastjson 1.2.69 writes for RocketMQ 4.9.8, compact (bodies) or pretty
(config files), and :func:`loads`, a reader of that text. Pure: no IO.

The caller describes the Java object: :class:`Bean` (a JavaBean), ``dict`` (a ``java.util.Map`` in the order the
caller gives, from :mod:`connector.protocol.java_hash_map`), :class:`JavaMap` (a map with :class:`Bean` keys),
``list``/``tuple`` (a ``List``), :class:`JavaSet` (a ``Set``), ``str`` (enums by name), ``int``, ``bool`` and
``float`` (a Java double). fastjson's rules: docs/protocol.md §4.7.
"""

from __future__ import annotations

import json
from decimal import Decimal

__all__ = ["Bean", "JavaMap", "JavaSet", "dumps", "encode", "format_double", "loads", "quote"]


class Bean(dict):
    """A JavaBean's readable properties, ``name → value`` (any order; written sorted by name, nulls left out)."""

    __slots__ = ()


class JavaSet(tuple):
    """A ``java.util.Set`` in its iteration order (written as an array; pretty text keeps it on one line)."""

    __slots__ = ()


class JavaMap(tuple):
    """A ``java.util.Map`` as ``(key, value)`` pairs in its iteration order — for keys a dict cannot hold (beans)."""

    __slots__ = ()


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPES = {chr(c): _SHORT_ESCAPES.get(chr(c), f"\\u{c:04X}") for c in range(0x20)}
_ESCAPES.update({chr(c): f"\\u{c:04X}" for c in (*range(0x7F, 0xA0), 0x2028, 0x2029)})
_ESCAPES.update({'"': _SHORT_ESCAPES['"'], "\\": _SHORT_ESCAPES["\\"]})
_TRANSLATE = str.maketrans(_ESCAPES)
_DOUBLE_MIN_VALUE = 5e-324


def quote(text: str) -> str:
    """A string as fastjson quotes it (``SerializeWriter.writeStringWithDoubleQuote``, docs/protocol.md §4.7):
    ``\\"`` and ``\\\\``; ``\\b \\t \\n \\f \\r``; other characters below U+0020, U+007F to U+009F, U+2028 and
    U+2029 as ``\\uXXXX`` (upper-case hex); everything else, ``/`` and non-ASCII included, as itself."""
    return '"' + text.translate(_TRANSLATE) + '"'


def format_double(value: float) -> str:
    """A Java double as fastjson writes it (``RyuDouble``): the shortest digits that read back to ``value``,
    plain between 10^-3 (inclusive) and 10^7 (exclusive) with at least one fraction digit (``0.0``, ``123.5``),
    otherwise ``d.dddE±n`` (``1.0E7``, ``1.5E-5``; ``Double.MIN_VALUE`` is ``4.9E-324``); NaN and infinities are
    written as ``null``."""
    if value != value or value in (float("inf"), float("-inf")):
        return "null"
    sign = "-" if value < 0 or (value == 0 and str(value).startswith("-")) else ""
    if value == 0:
        return sign + "0.0"
    if abs(value) == _DOUBLE_MIN_VALUE:
        return sign + "4.9E-324"  # RyuDouble writes Double.MIN_VALUE as Double.toString does, not as "5.0E-324"
    _, digits, exp = Decimal(repr(abs(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + exp  # value = 0.<text> × 10^point
    if 1 <= point <= 7:
        text = text.ljust(point, "0")
        return f"{sign}{text[:point]}.{text[point:] or '0'}"
    if -2 <= point <= 0:
        return f"{sign}0.{'0' * -point}{text}"
    return f"{sign}{text[0]}.{text[1:] or '0'}E{point - 1}"


def dumps(value: object, pretty: bool = False) -> str:
    """``JSON.toJSONString(value, pretty)`` as fastjson 1.2.69 writes it for the Java object ``value`` describes
    (module doc). Pretty text indents with one tab per level, as ``SerializerFeature.PrettyFormat`` does.

    Raises TypeError for a value of another type.
    """
    out: list[str] = []
    _write(out, value, pretty, 0)
    return "".join(out)


def encode(value: object) -> bytes:
    """``RemotingSerializable.encode``: the compact text of :func:`dumps` in UTF-8."""
    return dumps(value).encode("utf-8")


def _newline(out: list[str], level: int) -> None:
    out.append("\n" + "\t" * level)


def _write(out: list[str], value: object, pretty: bool, level: int) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(quote(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_double(value))
    elif isinstance(value, Bean):
        _write_bean(out, value, pretty, level)
    elif isinstance(value, dict):
        _write_map(out, value.items(), pretty, level)
    elif isinstance(value, JavaMap):
        _write_map(out, value, pretty, level)
    elif isinstance(value, JavaSet):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(out, item, pretty, level)
        out.append("]")
    elif isinstance(value, (list, tuple)):
        _write_list(out, value, pretty, level)
    else:
        raise TypeError(f"fastjson.dumps: no Java type for a {type(value).__name__}: {value!r:.80}")


def _write_bean(out: list[str], bean: Bean, pretty: bool, level: int) -> None:
    """JavaBeanSerializer: ``{"a":..,"b":..}`` sorted by property name; null properties are skipped."""
    out.append("{")
    first = True
    for name in sorted(bean):
        item = bean[name]
        if item is None:
            continue
        if not first:
            out.append(",")
        first = False
        if pretty:
            _newline(out, level + 1)
        out.append(quote(name) + ":")
        _write(out, item, pretty, level + 1)
    if pretty and not first:
        _newline(out, level)
    out.append("}")


def _write_map(out: list[str], entries, pretty: bool, level: int) -> None:
    """MapSerializer: entries in iteration order, null values skipped; pretty text breaks the line before a
    string key only, and before the closing brace of a non-empty map."""
    out.append("{")
    first = True
    for key, item in entries:
        if item is None:
            continue
        if not first:
            out.append(",")
        first = False
        if isinstance(key, str):
            if pretty:
                _newline(out, level + 1)
            out.append(quote(key))
        elif isinstance(key, (int, Bean)) and not isinstance(key, bool):
            _write(out, key, pretty, level + 1)
        else:
            raise TypeError(f"fastjson.dumps: no Java map key type for a {type(key).__name__}: {key!r:.80}")
        out.append(":")
        _write(out, item, pretty, level + 1)
    if pretty and not first:
        _newline(out, level)
    out.append("}")


def _write_list(out: list[str], items: list | tuple, pretty: bool, level: int) -> None:
    """ListSerializer: pretty text puts every item on its own line."""
    out.append("[")
    for i, item in enumerate(items):
        if i:
            out.append(",")
        if pretty:
            _newline(out, level + 1)
        _write(out, item, pretty, level + 1)
    if pretty and items:
        _newline(out, level)
    out.append("]")


def loads(text: str | bytes) -> object:
    """Parse JSON as fastjson 1.x writes it for RocketMQ: maps with non-string keys come out with *bare*
    number keys (``{"offsetTable":{"t@g":{0:5}}}`` — ``Map<Integer, Long>`` without WriteNonStringKeyAsString),
    which standard JSON rejects. Bare integer keys are quoted first (outside strings), then ``json.loads``.

    Raises ValueError for anything that is not JSON even then.
    """
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    expect_key = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            expect_key = False
        elif ch in "{,":
            expect_key = True
        elif expect_key and (ch.isdigit() or ch == "-"):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":":
                out.append(f'"{text[i:j]}"')
                i = j
                expect_key = False
                continue
            expect_key = False
        elif not ch.isspace():
            expect_key = False
        out.append(ch)
        i += 1
    return json.loads("".join(out))
