"""A Python producer that sends like the RocketMQ 4.9.8 Java client (``DefaultMQProducer``), straight to a broker:
SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE with the Java client's header, property order, ``UNIQ_KEY``, body
compression and queue choice, and its mapping of response codes to :class:`SendResult` or
:class:`MQBrokerException`.

Requests are pipelined on one :class:`connector.client.remoting.PipelinedConnection` (``max_in_flight``):
:meth:`Producer.send` blocks for one result, :meth:`Producer.send_async` returns a ``concurrent.futures.Future``;
``hareplica produce`` drives it through :func:`streaming_apps.workload.produce_load`. The wire: docs/protocol.md
§4.5 (the Java producer's choices), §1.8 (``UNIQ_KEY``), §1.10 (batches) and §2.10 (statuses).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import socket
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from connector.client.remoting import PipelinedConnection
from connector.errors import AddressError, HAReplicaError, MQClientException
from connector.protocol.acl import AclCredentials
from connector.protocol.address import split_host_port
from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB_TYPE,
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTIES_MAX_LENGTH_BYTES,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_PREPARED_TYPE,
    BatchEntry,
    encode_batch_body,
)
from connector.protocol.commitlog.properties import PROPERTY_TRANSACTION_PREPARED
from connector.protocol.java_hash_map import JavaHashMap
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.topics import AUTO_CREATE_TOPIC_KEY_TOPIC, NOT_ALLOWED_SEND_TOPICS, validate_topic

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"  # MixAll.DEFAULT_PRODUCER_GROUP
DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
COMPRESS_MSG_BODY_OVER_HOWMUCH_BYTES = 4096  # DefaultMQProducer.compressMsgBodyOverHowmuch
COMPRESS_LEVEL = 5  # rocketmq.message.compressLevel default
MAX_MESSAGE_SIZE_BYTES = 4 * 1024 * 1024  # DefaultMQProducer.maxMessageSize
SEND_MSG_TIMEOUT_MS = 3000  # DefaultMQProducer.sendMsgTimeout
_MANAGED_PROPERTIES = frozenset({PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_WAIT_STORE_MSG_OK, PROPERTY_DELAY_TIME_LEVEL,
                                 PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX})
_STATUS_BY_CODE = {ResponseCode.SUCCESS: "SEND_OK", ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
                   ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
                   ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE"}


class MQBrokerException(HAReplicaError):
    """The broker answered a send with a code that is not "sendOK" (MQBrokerException).

    Attributes: ``code`` (ResponseCode), ``remark`` (the broker's text), ``broker_addr``.
    """

    def __init__(self, code: int, remark: str | None, broker_addr: str) -> None:
        super().__init__(f"CODE: {code}  DESC: {remark}  BROKER: {broker_addr}")
        self.code = code
        self.remark = remark
        self.broker_addr = broker_addr


@dataclass(frozen=True)
class SendResult:
    """Result of a stored send (SendResult).

    ``send_status``: SEND_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE;
    ``msg_id``: the UNIQ_KEY (comma-joined for a batch); ``offset_msg_id``: the broker's offset msgId(s);
    ``queue_offset``: the ConsumeQueue offset of the (first) message.
    """

    send_status: str
    msg_id: str
    offset_msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def offset_msg_ids(self) -> list[str]:
        """The offset msgIds, one per stored message (a batch has several)."""
        return self.offset_msg_id.split(",")


@dataclass
class Message:
    """One message of a batch: body bytes, optional tags, keys (str or list), user properties, flag."""

    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    properties: dict[str, str] | None = None
    flag: int = 0


class MessageClientIDSetter:
    """UNIQ_KEY generator with the 4.9.8 layout (docs/protocol.md §1.8); one per producer, counter shared per
    process."""

    _counter = itertools.count(random.randrange(0x10000))
    _counter_lock = threading.Lock()

    def __init__(self, client_ip: bytes) -> None:
        fixed = client_ip + (os.getpid() & 0xFFFF).to_bytes(2, "big") + random.getrandbits(32).to_bytes(4, "big")
        self._fix_string = fixed.hex().upper()
        self._set_start_time(int(time.time() * 1000))

    def _set_start_time(self, now_ms: int) -> None:
        t = time.localtime(now_ms / 1000)
        start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
        nxt = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
        self._start_ms = int(start * 1000)
        self._next_start_ms = int(nxt * 1000)

    def create_uniq_id(self) -> str:
        """A new UNIQ_KEY in upper-case hex: the fixed prefix (client IP, pid, a per-process int), then ms since
        the month began (8 digits) and the counter (4 digits); 32 digits for an IPv4 client."""
        now = int(time.time() * 1000)
        if now >= self._next_start_ms:
            self._set_start_time(now)
        diff = (now - self._start_ms) & 0xFFFFFFFF
        with self._counter_lock:
            counter = next(self._counter) & 0xFFFF
        return f"{self._fix_string}{diff:08X}{counter:04X}"


def check_topic(topic: str) -> None:
    """Raise MQClientException when RocketMQ 4.9.8's client would refuse to send to ``topic`` (its name rules,
    ``Validators.checkTopic``, and the topics no producer may send to)."""
    remark = validate_topic(topic)
    if remark is not None:
        raise MQClientException(f"{remark} (topic {topic!r})")
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MQClientException(f"Sending message to topic[{topic}] is forbidden.")


def _check_body(body: bytes, max_size: int, allow_empty: bool = False) -> None:
    if body is None:
        raise MQClientException("the message body is null")
    if len(body) == 0 and not allow_empty:
        raise MQClientException("the message body length is zero")
    if len(body) > max_size:
        raise MQClientException(f"the message body size over max value, MAX: {max_size}")


def build_message_properties(*, tags: str | None, keys: str | Sequence[str] | None,
                             properties: dict[str, str] | None, wait_store_msg_ok: bool,
                             delay_level: int | None, uniq_key: str | None) -> JavaHashMap:
    """The message's property map, filled in the Java client's order (see module doc).

    Raises MQClientException for a property name managed by the producer (TAGS, KEYS, WAIT, DELAY,
    UNIQ_KEY), an empty name or value, or a name/value containing the separators ``\\x01``/``\\x02``.
    """
    props = JavaHashMap()
    if tags:
        props.put(PROPERTY_TAGS, tags)
    if keys:
        key_text = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
        if key_text:
            props.put(PROPERTY_KEYS, key_text)
    props.put(PROPERTY_WAIT_STORE_MSG_OK, "true" if wait_store_msg_ok else "false")
    for name, value in (properties or {}).items():
        if name in _MANAGED_PROPERTIES:
            raise MQClientException(f"The Property<{name}> is used by system, use the producer argument instead")
        if not name or value is None or value == "":
            raise MQClientException(f"The Property<{name}> has an empty name or value")
        if any(sep in f"{name}{value}" for sep in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)):
            raise MQClientException(f"The Property<{name}> contains a property separator (\\x01 or \\x02)")
        props.put(name, str(value))
    if delay_level:
        props.put(PROPERTY_DELAY_TIME_LEVEL, str(int(delay_level)))
    if uniq_key:
        props.put(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq_key)
    return props


class Producer:
    """Send messages to one broker (``"host:port"`` remoting address) over one pipelined connection.

    Args:
        broker_addr: the broker's remoting address.
        producer_group: header ``producerGroup``.
        timeout_ms: per-send timeout (``sendMsgTimeout``, 3000 ms).
        default_topic_queue_nums: queues per topic for round-robin selection and auto-creation (4).
        compress_msg_body_over_howmuch: bodies of at least this many bytes are zlib-compressed (4096).
        max_in_flight: requests awaiting a response at once; ``send_async`` blocks beyond it.
        credentials: an ACL account (:class:`connector.protocol.acl.AclCredentials`); every request is then
            signed as the 4.9.8 ``AclClientRPCHook`` signs it (docs/security.md). None: unsigned.
        allow_empty_body: send a body of 0 bytes instead of refusing it. The Java client's
            ``Validators.checkMessage`` refuses one; the 4.9.8 broker stores it (bodyLength 0), as clients without
            that check send it (e.g. an upsert table's ``empty-body`` tombstones, docs/tables.md "Upserts").

    Raises :class:`connector.client.remoting.BrokerConnectionError` (an MQClientException and a
    ConnectionError) when the broker cannot be reached or the connection closes under a send; sends after
    that reconnect. Thread-safe: sends go through one
    :class:`connector.client.remoting.PipelinedConnection` that any number of threads share.
    """

    def __init__(self, broker_addr: str, producer_group: str = DEFAULT_PRODUCER_GROUP, *,
                 timeout_ms: int = SEND_MSG_TIMEOUT_MS, default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
                 compress_msg_body_over_howmuch: int = COMPRESS_MSG_BODY_OVER_HOWMUCH_BYTES,
                 compress_level: int = COMPRESS_LEVEL, max_message_size: int = MAX_MESSAGE_SIZE_BYTES,
                 max_in_flight: int = 1024, connect_timeout_s: float = 5.0, broker_name: str | None = None,
                 credentials: AclCredentials | None = None, allow_empty_body: bool = False) -> None:
        try:
            split_host_port(broker_addr, bare_ipv6=True)
        except AddressError:
            raise MQClientException(f"broker address {broker_addr!r} is not HOST:PORT") from None
        self.broker_addr = broker_addr
        self.producer_group = producer_group
        self.timeout_ms = timeout_ms
        self.default_topic_queue_nums = default_topic_queue_nums
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.broker_name = broker_name
        self.allow_empty_body = allow_empty_body
        self._queue_counters: dict[str, itertools.count] = {}
        #: the pipelined remoting connection (:class:`connector.client.remoting.PipelinedConnection`)
        self.connection = PipelinedConnection(broker_addr, timeout_ms=timeout_ms, max_in_flight=max_in_flight,
                                              connect_timeout_s=connect_timeout_s, credentials=credentials,
                                              owner="producer")
        local_ip = self.connection.local_ip()
        self._id_setter = MessageClientIDSetter(socket.inet_pton(
            socket.AF_INET6 if ":" in local_ip else socket.AF_INET, local_ip))

    # --- sending -------------------------------------------------------------------------------------
    def _select_queue(self, topic: str, queue_id: int | None) -> int:
        if queue_id is not None:
            return queue_id
        counter = self._queue_counters.setdefault(topic, itertools.count())
        return next(counter) % self.default_topic_queue_nums

    def _header(self, topic: str, queue_id: int, sys_flag: int, flag: int, properties: str, batch: bool) -> dict:
        header = {"a": self.producer_group, "b": topic, "c": AUTO_CREATE_TOPIC_KEY_TOPIC,
                  "d": self.default_topic_queue_nums, "e": queue_id, "f": sys_flag, "g": int(time.time() * 1000),
                  "h": flag, "i": properties, "j": 0, "k": False, "m": batch}
        if self.broker_name:
            header["n"] = self.broker_name
        return header

    def send_async(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | Sequence[str] | None = None,
                   properties: dict[str, str] | None = None, queue_id: int | None = None, flag: int = 0,
                   delay_level: int | None = None, wait_store_msg_ok: bool = True) -> Future:
        """Send one message without waiting; the future yields a SendResult or raises MQBrokerException.

        Raises MQClientException at once for an invalid message or a broken connection.
        """
        check_topic(topic)
        _check_body(body, self.max_message_size, self.allow_empty_body)
        uniq = self._id_setter.create_uniq_id()
        props = build_message_properties(tags=tags, keys=keys, properties=properties,
                                         wait_store_msg_ok=wait_store_msg_ok, delay_level=delay_level, uniq_key=uniq)
        sys_flag = 0
        payload = bytes(body)
        if len(payload) >= self.compress_msg_body_over_howmuch:
            payload = zlib.compress(payload, self.compress_level)
            sys_flag |= COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
        if (props.get(PROPERTY_TRANSACTION_PREPARED) or "").lower() == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE
        props_text = props.to_properties_string()
        if len(props_text.encode("utf-8")) > PROPERTIES_MAX_LENGTH_BYTES:
            raise MQClientException(f"properties of {len(props_text.encode())} bytes exceed "
                                    f"{PROPERTIES_MAX_LENGTH_BYTES}")
        qid = self._select_queue(topic, queue_id)
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                      self._header(topic, qid, sys_flag, flag, props_text, False), payload)
        return self.connection.send(cmd, lambda resp: self._send_result(resp, topic, uniq))

    def send(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | Sequence[str] | None = None,
             properties: dict[str, str] | None = None, queue_id: int | None = None, flag: int = 0,
             delay_level: int | None = None, wait_store_msg_ok: bool = True) -> SendResult:
        """Send one message and wait for the result (see :meth:`send_async`).

        Raises MQBrokerException for non-"sendOK" answers (remark included) and MQClientException for
        invalid messages, connection failures and timeouts.
        """
        fut = self.send_async(topic, body, tags=tags, keys=keys, properties=properties, queue_id=queue_id, flag=flag,
                              delay_level=delay_level, wait_store_msg_ok=wait_store_msg_ok)
        return self.connection.wait(fut)

    def send_batch_async(self, topic: str, messages: Iterable[Message | bytes], queue_id: int | None = None) -> Future:
        """Send a batch (one record per message, consecutive queue offsets) without waiting.

        Messages are :class:`Message` or plain bodies. Batches are not compressed; delay levels and
        transactions are not allowed (as in the Java client). Raises MQClientException for an empty or
        invalid batch.
        """
        check_topic(topic)
        entries = []
        uniq_keys = []
        for m in messages:
            msg = m if isinstance(m, Message) else Message(bytes(m))
            _check_body(msg.body, self.max_message_size)
            uniq = self._id_setter.create_uniq_id()
            props = build_message_properties(tags=msg.tags, keys=msg.keys, properties=msg.properties,
                                             wait_store_msg_ok=True, delay_level=None, uniq_key=uniq)
            entries.append(BatchEntry(msg.flag, bytes(msg.body), props.to_properties_string()))
            uniq_keys.append(uniq)
        if not entries:
            raise MQClientException("a batch needs at least one message")
        body = encode_batch_body(entries)
        if len(body) > self.max_message_size:
            raise MQClientException(f"the batch body of {len(body)} bytes is over max value, MAX: "
                                    f"{self.max_message_size}")
        batch_props = JavaHashMap({PROPERTY_WAIT_STORE_MSG_OK: "true"}).to_properties_string()
        qid = self._select_queue(topic, queue_id)
        cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE,
                                      self._header(topic, qid, 0, 0, batch_props, True), body)
        joined = ",".join(uniq_keys)
        return self.connection.send(cmd, lambda resp: self._send_result(resp, topic, joined))

    def send_batch(self, topic: str, messages: Iterable[Message | bytes], queue_id: int | None = None) -> SendResult:
        """Send a batch and wait (see :meth:`send_batch_async`); errors as :meth:`send`."""
        fut = self.send_batch_async(topic, messages, queue_id)
        return self.connection.wait(fut)

    def _send_result(self, resp: RemotingCommand, topic: str, uniq: str) -> SendResult:
        status = _STATUS_BY_CODE.get(resp.code)
        if status is None:
            raise MQBrokerException(resp.code, resp.remark, self.broker_addr)
        ext = resp.ext_fields
        try:
            return SendResult(send_status=status, msg_id=uniq, offset_msg_id=ext.get("msgId", ""), topic=topic,
                              queue_id=int(ext.get("queueId", "-1")), queue_offset=int(ext.get("queueOffset", "-1")),
                              region_id=ext.get("MSG_REGION") or "DefaultRegion",
                              trace_on=ext.get("TRACE_ON") != "false")
        except ValueError as exc:
            raise MQClientException(f"malformed send response header {ext}: {exc}") from exc

    def close(self) -> None:
        """Close the connection; pending sends fail with MQClientException."""
        self.connection.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
