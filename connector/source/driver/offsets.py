"""A source offset as Spark checkpoints it: per broker set the next CommitLog offset, plus ``@`` entries.

The JSON object Spark writes to a checkpoint's offset log is ``{"broker-a": 12345, ...}`` (per broker set
the *next* CommitLog byte to read, Spark's Kafka convention) and, since fingerprints were added, entries under
keys that start with ``@`` (a broker name cannot): ``"@lastRecord"``
(:data:`connector.source.driver.history.FINGERPRINT_KEY`, the record before each offset, docs/source.md "Rewritten
history"), ``"@masterSwitches"`` (:data:`connector.source.driver.controller_mode.SWITCH_KEY`, docs/source.md
"RocketMQ 5.x controller mode") and ``"@maxOffset"`` (:data:`connector.source.driver.batches.MAX_OFFSET_KEY`,
each broker set's commitLogMaxOffset when the batch was planned: the lag).
:class:`SourceOffset` keeps the two apart, so code that walks broker offsets never meets a ``@`` entry, and
writes back exactly the JSON it read (old checkpoints, with or without ``@`` entries, load unchanged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from connector.source.driver.controller_mode import SWITCH_KEY
from connector.source.driver.history import FINGERPRINT_KEY, RecordFingerprint, fingerprints_of

#: the first character of every key of a source offset that is not a broker set's name
EXTRA_KEY_PREFIX = "@"


@dataclass(frozen=True)
class SourceOffset:
    """``positions``: broker set name -> next CommitLog offset (bytes); ``extras``: the ``@`` entries as
    they are stored (JSON values), in their order."""

    positions: dict[str, int]
    extras: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_json(cls, value: Mapping | None) -> SourceOffset:
        """The offset Spark hands back (a JSON object as a dict; None or empty: no offset). Raises ValueError
        naming the broker when a broker's offset is not an integer."""
        positions: dict[str, int] = {}
        extras: dict[str, object] = {}
        for key, item in (value or {}).items():
            if str(key).startswith(EXTRA_KEY_PREFIX):
                extras[key] = item
                continue
            if isinstance(item, bool) or not isinstance(item, int | str):
                raise ValueError(f"source offset: broker {key!r} has offset {item!r}, not an integer")
            try:
                positions[key] = int(item)
            except ValueError:
                raise ValueError(f"source offset: broker {key!r} has offset {item!r}, not an integer") from None
        return cls(positions, extras)

    def to_json(self) -> dict:
        """The JSON object: the positions, then the ``@`` entries (the form Spark checkpoints)."""
        return {**self.positions, **self.extras}

    @property
    def fingerprints(self) -> dict[str, RecordFingerprint]:
        """The ``"@lastRecord"`` fingerprints by broker set name (empty when the offset carries none)."""
        return fingerprints_of({FINGERPRINT_KEY: self.extras.get(FINGERPRINT_KEY)})

    @property
    def has_switches(self) -> bool:
        """True when the offset records controller-mode master switches (``"@masterSwitches"``)."""
        return SWITCH_KEY in self.extras
