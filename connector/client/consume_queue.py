"""Reading a broker's ConsumeQueues over remoting, many requests in flight (docs/protocol.md §5.5).

The driver uses it to learn exact record boundaries inside a CommitLog range without reading the CommitLog
(:mod:`connector.source.driver.partitions`): every real ConsumeQueue entry's ``physicOffset`` is the first byte of a
record.

Requests: GET_ALL_TOPIC_CONFIG (21) for the queues, GET_MIN_OFFSET / GET_MAX_OFFSET (31 / 30) for each queue's
index range, QUERY_CONSUME_QUEUE (321) for entries. All are read-only and need no consumer group.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from connector.client.remoting import PipelinedConnection, describe_request
from connector.errors import BrokerAdminError, MQClientException
from connector.protocol.acl import AclCredentials
from connector.protocol.consume_queue import is_placeholder
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

_MAX_IN_FLIGHT = 256


@dataclass(frozen=True)
class QueueRange:
    """One ConsumeQueue: ``topic``, ``queue_id`` and its index range ``[min_index, max_index)`` (entries)."""

    topic: str
    queue_id: int
    min_index: int
    max_index: int

    @property
    def entries(self) -> int:
        return max(0, self.max_index - self.min_index)


class ConsumeQueueReader:
    """ConsumeQueue facts of the broker at ``addr`` (``host:listenPort``), with up to 256 requests in flight.

    Args:
        addr: remoting address.
        timeout_ms: per-request timeout (ms).
        connect_timeout_ms: TCP connect timeout (ms).
        credentials: ACL account to sign with (docs/security.md), or None.

    Every method raises :class:`BrokerAdminError` naming the broker and the request when the broker cannot be
    reached, times out, refuses the request (e.g. a broker older than QUERY_CONSUME_QUEUE answers
    REQUEST_CODE_NOT_SUPPORTED) or answers a body that does not parse.
    """

    def __init__(self, addr: str, timeout_ms: int, credentials: AclCredentials | None = None, *,
                 connect_timeout_ms: int = 5000) -> None:
        self.addr = addr
        try:
            self._conn = PipelinedConnection(addr, timeout_ms=timeout_ms, max_in_flight=_MAX_IN_FLIGHT,
                                             connect_timeout_s=connect_timeout_ms / 1000, credentials=credentials,
                                             owner="consume-queue-reader")
        except MQClientException as exc:
            raise BrokerAdminError(f"ConsumeQueue reader: {exc}") from exc

    def __enter__(self) -> ConsumeQueueReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def _all(self, requests: Sequence[RemotingCommand], convert) -> list:
        """Send every request, then wait for each; results in request order."""
        try:
            futures = [self._conn.send(r, self._checked(r.code, convert)) for r in requests]
            return [self._conn.wait(f) for f in futures]
        except MQClientException as exc:
            raise BrokerAdminError(f"ConsumeQueue reader of {self.addr}: {exc}") from exc

    def _checked(self, code: int, convert):
        what = describe_request(code, self.addr)

        def run(response: RemotingCommand):
            if response.code != ResponseCode.SUCCESS:
                raise BrokerAdminError(f"{what} answered code {response.code}: {response.remark or '(no remark)'}")
            try:
                return convert(response)
            except (ValueError, KeyError, TypeError) as exc:
                raise BrokerAdminError(f"{what}: malformed answer ({exc})") from exc
        return run

    def queues(self) -> list[tuple[str, int]]:
        """GET_ALL_TOPIC_CONFIG: every ``(topic, queueId)`` the broker knows, ``queueId`` below the larger of
        ``readQueueNums`` and ``writeQueueNums``; topics sorted by name."""
        def convert(response: RemotingCommand) -> list[tuple[str, int]]:
            table = json.loads(response.body.decode("utf-8"))["topicConfigTable"]
            out = []
            for name in sorted(table):
                config = table[name]
                count = max(int(config.get("readQueueNums", 0)), int(config.get("writeQueueNums", 0)))
                out.extend((name, q) for q in range(count))
            return out
        return self._all([RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)], convert)[0]

    def ranges(self, queues: Iterable[tuple[str, int]]) -> list[QueueRange]:
        """GET_MIN_OFFSET and GET_MAX_OFFSET of each queue, as :class:`QueueRange` (all in flight at once)."""
        queues = list(queues)
        requests = []
        for topic, queue_id in queues:
            header = {"topic": topic, "queueId": queue_id}
            requests.append(RemotingCommand.request(RequestCode.GET_MIN_OFFSET, header))
            requests.append(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header))
        offsets = self._all(requests, lambda r: int(r.ext_fields["offset"]))
        return [QueueRange(topic, queue_id, max(0, offsets[2 * i]), offsets[2 * i + 1])
                for i, (topic, queue_id) in enumerate(queues)]

    def max_offsets(self, queues: Iterable[tuple[str, int]]) -> list[int]:
        """GET_MAX_OFFSET (30) of each ``(topic, queueId)``: the ConsumeQueue's next index (entries), in request
        order, all in flight at once."""
        requests = [RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
                    for topic, queue_id in queues]
        return self._all(requests, lambda r: int(r.ext_fields["offset"]))

    def entries(self, probes: Sequence[tuple[QueueRange, int, int]]) -> list[list[tuple[int, int]]]:
        """QUERY_CONSUME_QUEUE for each ``(queue, index, count)``: the real entries found there as
        ``(physicOffset, index)`` pairs (placeholders left out; an index outside the queue gives ``[]``).
        The broker returns entries up to the end of one ConsumeQueue file only (docs/protocol.md §5.5)."""
        requests = [RemotingCommand.request(RequestCode.QUERY_CONSUME_QUEUE, {
            "topic": q.topic, "queueId": q.queue_id, "index": index, "count": count}) for q, index, count in probes]
        bodies = self._all(requests, lambda r: r.body)
        out = []
        for (_, index, _), body in zip(probes, bodies, strict=True):
            if not body:
                out.append([])
                continue
            try:
                data = json.loads(body.decode("utf-8")).get("queueData") or []
                out.append([(int(e["physicOffset"]), index + i) for i, e in enumerate(data)
                            if not is_placeholder(int(e.get("physicSize", 0))) and int(e["physicOffset"]) >= 0])
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise BrokerAdminError(f"{describe_request(RequestCode.QUERY_CONSUME_QUEUE, self.addr)}: malformed "
                                       f"answer ({exc})") from exc
        return out
