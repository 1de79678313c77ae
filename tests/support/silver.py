"""What the silver app should land for a broker's records: its declaration's msgpack decoder
(:data:`streaming_apps.apps.silver.ORDER_FIELDS`) applied to each order-topic body, as the tables app's tasks apply
it (docs/tables.md "Formats", msgpack: a missing field is null; a body that is not a map of those types is a dead
letter)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from streaming_apps.apps.silver import ORDER_FIELDS
from streaming_apps.tables.decode.msgpack_bodies import MsgpackDecoder


def silver_verdicts(bodies: Iterable[tuple[int, bytes]]) -> tuple[dict[int, dict], dict[int, str]]:
    """``(commitLogOffset → the order's fields, commitLogOffset → the dead letter's error)`` of ``(offset, body)``
    pairs (bodies as the source decodes them)."""
    pairs = list(bodies)
    decoded = MsgpackDecoder(ORDER_FIELDS).decode(pa.array([b for _, b in pairs], pa.binary()))
    good, bad = {}, {}
    for (off, _), row, error in zip(pairs, decoded.fields.to_pylist(), decoded.errors, strict=True):
        if error is None:
            good[off] = row
        else:
            bad[off] = error
    return good, bad
