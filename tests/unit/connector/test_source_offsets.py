"""connector.source.driver.offsets: a checkpointed source offset keeps broker positions apart from its ``@`` entries
and writes back the JSON it read (checkpoints written before the class existed load unchanged)."""

from __future__ import annotations

import json

import pytest

from connector.source.driver.controller_mode import SWITCH_KEY
from connector.source.driver.offsets import FINGERPRINT_KEY, RecordFingerprint, SourceOffset

#: an end offset as the source writes it today to a checkpoint's offset log (fingerprints and a master switch)
TODAY = ('{"broker-a": 3402931, "broker-b": 4194304, "@lastRecord": {"broker-a": [3402700, 231, 1700000000123, '
         '99887766]}, "@masterSwitches": {"broker-b": [{"from": "10.0.0.1:10912", "to": "10.0.0.2:10912", '
         '"epoch": 2, "epochStartOffset": 4194304, "lost": null}]}}')


def test_an_offset_as_written_today_loads_and_writes_back_the_same_json():
    offset = SourceOffset.from_json(json.loads(TODAY))
    assert offset.positions == {"broker-a": 3402931, "broker-b": 4194304}
    assert offset.fingerprints == {"broker-a": RecordFingerprint(3402700, 231, 1700000000123, 99887766)}
    assert offset.has_switches
    assert json.dumps(offset.to_json()) == TODAY


def test_the_oldest_form_has_only_positions():
    offset = SourceOffset.from_json({"broker-a": 12345})
    assert (offset.positions, offset.extras, offset.fingerprints, offset.has_switches) == (
        {"broker-a": 12345}, {}, {}, False)
    assert SourceOffset.from_json(None).to_json() == {}


def test_a_position_that_is_not_an_integer_is_named():
    with pytest.raises(ValueError, match=r"broker 'broker-a' has offset \[1\], not an integer"):
        SourceOffset.from_json({"broker-a": [1], FINGERPRINT_KEY: {}})
    with pytest.raises(ValueError, match=r"broker 'broker-a' has offset True"):
        SourceOffset.from_json({"broker-a": True, SWITCH_KEY: {}})
