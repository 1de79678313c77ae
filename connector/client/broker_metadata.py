"""A master's metadata, asked for as a RocketMQ 4.9.8 slave's ``SlaveSynchronize.syncAll()`` asks for it: the four
requests GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45) and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), in that order, then GET_MAX_OFFSET (30) of every ConsumeQueue the consumer
offsets name, so that a consumer group's lag can be told from the same snapshot (docs/metadata.md).

A 4.9.8 slave asks for the topic table on the master's VIP channel (``listenPort - 2``) first; this client asks
everything on the main remoting port, which serves the same answers and is the one an operator's firewall and ACL
already let the source through (docs/metadata.md "The four requests").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from connector.client.admin import BrokerAdminClient
from connector.client.consume_queue import ConsumeQueueReader
from connector.client.remoting import describe_request
from connector.errors import BrokerAdminError, BrokerUnreachableError, MetadataRequestRefused
from connector.protocol.acl import AclCredentials
from connector.protocol.broker_metadata import (
    decode_consumer_offsets,
    decode_delay_offsets,
    decode_subscription_groups,
    decode_topic_configs,
)
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

#: the requests of one snapshot, in ``SlaveSynchronize.syncAll()``'s order: (name, code, decoder)
SNAPSHOT_REQUESTS: tuple[tuple[str, int, Callable], ...] = (
    ("GET_ALL_TOPIC_CONFIG", RequestCode.GET_ALL_TOPIC_CONFIG, decode_topic_configs),
    ("GET_ALL_CONSUMER_OFFSET", RequestCode.GET_ALL_CONSUMER_OFFSET, decode_consumer_offsets),
    ("GET_ALL_DELAY_OFFSET", RequestCode.GET_ALL_DELAY_OFFSET, decode_delay_offsets),
    ("GET_ALL_SUBSCRIPTIONGROUP_CONFIG", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, decode_subscription_groups),
)


@dataclass
class MetadataSnapshot:
    """What one round of the four requests gave (a table is None when its request failed; ``failures`` says why,
    request name → :class:`BrokerAdminError`).

    Attributes:
        broker: the broker set's name; ``addr``: the master's remoting address asked.
        time_ms: when the first request was sent (ms since the epoch).
        topics: ``topicName → TopicConfig`` JSON object (GET_ALL_TOPIC_CONFIG).
        consumer_offsets: ``(group, topic) → {queueId: offset}`` (GET_ALL_CONSUMER_OFFSET).
        delay_offsets: ``delayLevel → offset`` (GET_ALL_DELAY_OFFSET).
        subscription_groups: ``groupName → SubscriptionGroupConfig`` JSON object (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
        max_offsets: ``(topic, queueId) → maxOffset`` (entries) of every queue ``consumer_offsets`` names; empty
            when GET_MAX_OFFSET failed (``failures["GET_MAX_OFFSET"]``).
    """

    broker: str
    addr: str
    time_ms: int
    topics: dict[str, dict] | None = None
    consumer_offsets: dict[tuple[str, str], dict[int, int]] | None = None
    delay_offsets: dict[int, int] | None = None
    subscription_groups: dict[str, dict] | None = None
    max_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    failures: dict[str, BrokerAdminError] = field(default_factory=dict)

    @property
    def unreachable(self) -> bool:
        """True when the master could not be reached at all (every request failed that way)."""
        return bool(self.failures) and all(isinstance(self.failures.get(name), BrokerUnreachableError)
                                           for name, _, _ in SNAPSHOT_REQUESTS)


class BrokerMetadataClient:
    """The snapshot requests to one master (module doc), over one kept remoting connection.

    Args:
        broker: the broker set's name (for messages).
        addr: the master's remoting address ``host:listenPort``.
        timeout_ms: connect timeout and the longest wait for one answer (ms).
        credentials: the source's ACL account (``FetchSettings.credentials``), each request then signed as 4.9.8's
            ``AclClientRPCHook`` signs it; None: unsigned.
    """

    def __init__(self, broker: str, addr: str, timeout_ms: int = 3000,
                 credentials: AclCredentials | None = None) -> None:
        self.broker = broker
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.credentials = credentials
        self.admin = BrokerAdminClient(addr, timeout_ms, credentials)

    def close(self) -> None:
        """Close the connection (the next snapshot opens a new one)."""
        self.admin.close()

    def request(self, name: str, code: int, decode: Callable):
        """One of :data:`SNAPSHOT_REQUESTS`, decoded.

        Raises:
            MetadataRequestRefused: a non-SUCCESS answer.
            BrokerUnreachableError: no connection or no answer within ``timeout_ms``.
            BrokerAdminError: a body that does not decode.
        """
        what = describe_request(code, self.addr)
        response = self.admin.connection.invoke(RemotingCommand.request(code), idempotent=True)
        if response.code != ResponseCode.SUCCESS:
            remark = next((line.strip() for line in (response.remark or "").splitlines() if line.strip()),
                          "(no remark)")
            raise MetadataRequestRefused(f"{what} answered code {response.code}: {remark}", name, response.code,
                                         remark)
        try:
            return decode(response.body)
        except ValueError as exc:
            raise BrokerAdminError(f"{what}: {exc}") from exc

    def snapshot(self, clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> MetadataSnapshot:
        """Ask the four requests, then GET_MAX_OFFSET of every queue the consumer offsets name; a request that
        fails leaves its table None and its error in ``failures`` (the others are still asked). When the master
        is unreachable the remaining requests are not tried."""
        snap = MetadataSnapshot(self.broker, self.addr, clock_ms())
        attributes = {"GET_ALL_TOPIC_CONFIG": "topics", "GET_ALL_CONSUMER_OFFSET": "consumer_offsets",
                      "GET_ALL_DELAY_OFFSET": "delay_offsets",
                      "GET_ALL_SUBSCRIPTIONGROUP_CONFIG": "subscription_groups"}
        for name, code, decode in SNAPSHOT_REQUESTS:
            try:
                setattr(snap, attributes[name], self.request(name, code, decode))
            except BrokerUnreachableError as exc:
                for other, _, _ in SNAPSHOT_REQUESTS:
                    if getattr(snap, attributes[other]) is None:
                        snap.failures[other] = exc
                return snap
            except BrokerAdminError as exc:
                snap.failures[name] = exc
        if snap.consumer_offsets:
            queues = sorted({(topic, q) for (_, topic), offsets in snap.consumer_offsets.items() for q in offsets})
            try:
                with ConsumeQueueReader(self.addr, self.timeout_ms, self.credentials,
                                        connect_timeout_ms=self.timeout_ms) as reader:
                    snap.max_offsets = dict(zip(queues, reader.max_offsets(queues), strict=True))
            except BrokerAdminError as exc:
                snap.failures["GET_MAX_OFFSET"] = exc
        return snap
