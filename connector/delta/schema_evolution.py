"""Column types of a table whose columns come from the data (``run tables``' JSON ``schema = "infer"``): how two
types a column was found with widen into one, how a table's existing column takes what a task found, and how an
Arrow column is converted to the widened type. The rules: docs/tables.md "Schema evolution", "infer".

Types are Arrow types; the widenings are those a value keeps its meaning through: ``int64`` and ``float64`` widen
to ``float64``; structs widen field by field (fields of either, in order of first appearance); lists widen their
items; any other pair widens to ``string``, which holds each value as its JSON text. A table's existing column
never changes type (Delta would need its type-widening feature): it only gains struct fields.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc


def widen_type(a: pa.DataType | None, b: pa.DataType | None) -> pa.DataType | None:
    """The narrowest type holding values of both ``a`` and ``b`` (module docstring); None when both are None."""
    if a is None or b is None or a == b:
        return b if a is None else a
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        merged = {f.name: f.type for f in a}
        for f in b:
            merged[f.name] = widen_type(merged.get(f.name), f.type)
        return pa.struct([pa.field(name, t) for name, t in merged.items()])
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(widen_type(a.value_type, b.value_type))
    return pa.string()


def widen_schema(a: pa.Schema, b: pa.Schema) -> pa.Schema:
    """``a``'s fields widened by ``b``'s (:func:`widen_type`), then ``b``'s fields ``a`` lacks."""
    return pa.schema(list(widen_type(pa.struct(list(a)), pa.struct(list(b)))))


def keep_type(existing: pa.DataType, found: pa.DataType | None) -> pa.DataType:
    """An existing column's type after values of type ``found`` arrived: ``existing``, with the struct fields
    ``found`` adds (at any depth, through lists). Values that do not fit ``existing`` are the caller's to refuse."""
    if found is None or existing == found:
        return existing
    if pa.types.is_struct(existing) and pa.types.is_struct(found):
        fields = {f.name: f.type for f in existing}
        for f in found:
            fields[f.name] = keep_type(fields[f.name], f.type) if f.name in fields else f.type
        return pa.struct([pa.field(name, t) for name, t in fields.items()])
    if pa.types.is_list(existing) and pa.types.is_list(found):
        return pa.list_(keep_type(existing.value_type, found.value_type))
    return existing


def keep_schema(existing: pa.Schema, found: pa.Schema) -> pa.Schema:
    """``existing``'s columns (:func:`keep_type` of what ``found`` holds for them), then ``found``'s new ones."""
    have = set(existing.names)
    fields = [pa.field(f.name, keep_type(f.type, found.field(f.name).type if f.name in found.names else None))
              for f in existing]
    return pa.schema(fields + [f for f in found if f.name not in have])


def conforms(found: pa.DataType, target: pa.DataType) -> bool:
    """Whether :func:`conform` turns a ``found`` column into ``target`` without losing a value's meaning: equal
    types, ``int64`` into ``float64``, anything into ``string`` (JSON text), structs whose shared fields conform
    (fields ``target`` adds are null), lists whose items conform."""
    if found == target or pa.types.is_null(found) or pa.types.is_string(target):
        return True
    if found == pa.int64() and target == pa.float64():
        return True
    if pa.types.is_struct(found) and pa.types.is_struct(target):
        names = {f.name: f.type for f in target}
        return all(f.name in names and conforms(f.type, names[f.name]) for f in found)
    if pa.types.is_list(found) and pa.types.is_list(target):
        return conforms(found.value_type, target.value_type)
    return False


def conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target`` (:func:`conforms` must hold): int64 cast to float64, other values into a string
    column as their JSON text, struct fields matched by name (missing ones null), list items conformed.

    Raises:
        TypeError: ``array``'s type does not conform to ``target``.
    """
    found = array.type
    if found == target:
        return array
    if not conforms(found, target):
        raise TypeError(f"a {found} column cannot become {target}")
    if pa.types.is_null(found):
        return pa.nulls(len(array), target)
    if pa.types.is_string(target):
        if pa.types.is_integer(found) or pa.types.is_boolean(found):
            return pc.cast(array, pa.string())
        texts = [None if v is None else json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
                 for v in array.to_pylist()]
        return pa.array(texts, pa.string())
    if pa.types.is_struct(target):
        names = [f.name for f in found]
        children = [conform(array.field(f.name), f.type) if f.name in names else pa.nulls(len(array), f.type)
                    for f in target]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=pc.is_null(array))
    if pa.types.is_list(target):
        values = conform(array.values, target.value_type)
        offsets = array.offsets
        if array.offset or len(array.values) != offsets[-1].as_py():
            values = values.slice(offsets[0].as_py(), offsets[-1].as_py() - offsets[0].as_py())
            offsets = pc.subtract(offsets, offsets[0])
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=pc.is_null(array))
    return pc.cast(array, target)


def conform_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns conformed to ``schema`` (:func:`conform`), the columns it lacks null, in ``schema``'s
    order. Raises TypeError as :func:`conform`, naming the column."""
    columns = []
    for f in schema:
        if f.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, f.type))
            continue
        try:
            columns.append(pa.chunked_array([conform(c, f.type) for c in table.column(f.name).chunks], f.type))
        except TypeError as e:
            raise TypeError(f"column {f.name}: {e}") from None
    return pa.Table.from_arrays(columns, schema=schema)


def plain_schema(schema: pa.Schema | None) -> pa.Schema | None:
    """A table's Arrow schema with delta-rs's view types as the plain ones the tasks write (``string_view`` →
    ``string``, ``binary_view`` → ``binary``, large lists → lists), so equal columns compare equal."""
    if schema is None:
        return None

    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_string_view(t) or pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, plain(f.type)) for f in t])
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
            return pa.list_(plain(t.value_type))
        if pa.types.is_map(t):
            return pa.map_(plain(t.key_type), plain(t.item_type))
        return t

    return pa.schema([pa.field(f.name, plain(f.type)) for f in schema])
