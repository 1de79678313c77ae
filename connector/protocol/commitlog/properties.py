"""Message properties as RocketMQ 4.9.8 stores them: ``name\\x01value`` pairs joined by ``\\x02``.

The format and the well-known names: docs/protocol.md §1.5.

Source: MessageDecoder.string2messageProperties / messageProperties2String and MessageConst (the names).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"  # the topic a retried message was first sent to
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"  # offset msgId of the first stored copy
KEY_SEPARATOR = " "


def iter_properties(text: str) -> Iterator[tuple[str, str]]:
    """The (name, value) pairs of a properties string in stored order, by RocketMQ 4.9.8's rules.

    Pairs are ``name\x01value`` joined by ``\x02``; a trailing ``\x02`` (4.9.0) is accepted; segments
    shorter than 3 characters, or whose separator is first or last, are skipped
    (MessageDecoder.string2messageProperties, docs/protocol.md §1.5). Duplicates are all yielded.
    """
    length = len(text)
    index = 0
    while index < length:
        end = text.find(PROPERTY_SEPARATOR, index)
        if end < 0:
            end = length
        if end - index >= 3:
            kv = text.find(NAME_VALUE_SEPARATOR, index)
            if index < kv < end - 1:
                yield text[index:kv], text[kv + 1:end]
        index = end + 1


def parse_properties(text: str) -> dict[str, str]:
    """Decode a properties string as RocketMQ 4.9.8 ``string2messageProperties`` does: a later duplicate
    name wins (see :func:`iter_properties` for the rules)."""
    return dict(iter_properties(text))


def encode_properties(props: Mapping[str, str | None]) -> str:
    """Encode properties as RocketMQ 4.9.1+ ``messageProperties2String`` does (no trailing separator).

    Entries whose value is None are skipped (docs/protocol.md §1.5).
    """
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )
