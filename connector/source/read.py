"""Executors: fetch one InputPartition's CommitLog bytes over the HA port and decode them into Arrow.

:func:`read_partition` is the whole executor side of the source: an HA fetch (:mod:`connector.client.ha`, or
:mod:`connector.client.ha_autoswitch` for a 5.x controller-mode set) feeding the CommitLog decoder
(:mod:`connector.decode.stream`); docs/source.md "Rows" and "Offsets, batches, partitions". The driver's
small reads for the history checks (:class:`DriverReads`) go through the same fetchers.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import pyarrow as pa

from connector.client.admin import HA_PROTOCOL_AUTOSWITCH, HA_PROTOCOL_CLASSIC, BrokerAdminClient
from connector.client.ha import HARangeFetcher, prefetch_chunks
from connector.client.ha_autoswitch import AutoSwitchRangeFetcher
from connector.controller_mode import master_locator
from connector.decode.stream import CommitLogArrowDecoder
from connector.options import FetchSettings
from connector.planning import BrokerSetView
from connector.source.partitions import HAReplicaInputPartition
from connector.worker_gc import freeze_imports

log = logging.getLogger(__name__)


def open_fetcher(fetch: FetchSettings, ha_addr: str, start: int, end: int, *, broker: str, protocol: str,
                 server_is_slave: bool, fail_on_data_loss: bool, **extra) -> HARangeFetcher:
    """The HA fetcher of CommitLog bytes ``[start, end)`` at ``ha_addr``, configured from the query's ``fetch``
    settings (timeouts, retries, heartbeat, reconnect backoff, ``maxOutageMs``): a :class:`HARangeFetcher`, or
    for ``protocol`` ``"autoswitch"`` (5.x controller mode) an :class:`AutoSwitchRangeFetcher`. ``extra``: the
    fetcher's other keywords (``offsets_probe``, ``keep_views``, controller-mode ``locate_master``, ...)."""
    fetcher_class = AutoSwitchRangeFetcher if protocol == HA_PROTOCOL_AUTOSWITCH else HARangeFetcher
    return fetcher_class(
        ha_addr, start, end, broker=broker, connect_timeout_ms=fetch.connect_timeout_ms,
        read_timeout_ms=fetch.read_timeout_ms, fetch_retries=fetch.fetch_retries,
        heartbeat_interval_ms=fetch.heartbeat_interval_ms, fail_on_data_loss=fail_on_data_loss,
        server_is_slave=server_is_slave, reconnect_backoff_ms=fetch.reconnect_backoff_ms,
        reconnect_backoff_max_ms=fetch.reconnect_backoff_max_ms, max_outage_ms=fetch.max_outage_ms, **extra)


def fetch_range(fetch: FetchSettings, ha_addr: str, start: int, end: int, *, broker: str, server_is_slave: bool,
                protocol: str = HA_PROTOCOL_CLASSIC) -> bytes:
    """CommitLog bytes ``[start, end)`` over the HA port, for the driver's history checks (:mod:`connector.history`),
    reporting ``start`` (see :mod:`connector.client.ha` for why a report acknowledges nothing new when ``start`` is
    already landed); ``protocol``: ``"classic"`` or ``"autoswitch"``. Raises what HARangeFetcher raises."""
    if end <= start:
        return b""
    with open_fetcher(fetch, ha_addr, start, end, broker=broker, protocol=protocol, server_is_slave=server_is_slave,
                      fail_on_data_loss=True) as fetcher:
        return b"".join(chunk for _, chunk in fetcher)


@dataclass(frozen=True, slots=True)
class DriverReads:
    """The driver's small HA reads of one broker set's CommitLog, for the history checks
    (:class:`connector.history.CommitLogBytes`): each :meth:`read` fetches from the server that would read the
    same slice for an executor (:meth:`connector.planning.BrokerSetView.server_for`, a slave first when
    ``prefer_slave``), over the set's HA ``protocol`` (``"classic"`` or ``"autoswitch"``)."""

    fetch: FetchSettings
    view: BrokerSetView
    protocol: str = HA_PROTOCOL_CLASSIC
    prefer_slave: bool = False

    def read(self, lo: int, hi: int) -> bytes:
        """CommitLog bytes ``[lo, hi)``; raises ValueError (no master known) or what :func:`fetch_range` raises."""
        server = self.view.server_for(lo, hi, self.prefer_slave)
        return fetch_range(self.fetch, server.endpoint.ha_addr, lo, hi, broker=self.view.name,
                           server_is_slave=server.role == "slave", protocol=self.protocol)


def read_partition(partition: HAReplicaInputPartition, columns: Collection[str] | None = None
                   ) -> Iterator[pa.RecordBatch]:
    """Fetch ``[partition.start, partition.end)`` over the HA port and decode it into RecordBatches of the
    source's schema, or of only its ``columns`` (the decoder builds no other; docs/source.md "Speed and memory").

    Bytes are received on a background thread (:func:`connector.client.ha.prefetch_chunks`) while the
    previous ones are decoded, unless ``fetchPrefetchChunks`` is 0. Memory stays bounded by one batch
    plus ``fetchPrefetchChunks`` + 2 receive buffers (1 MiB each) whatever the partition size. Records
    whose topic the query's filter drops are skipped before their columns are built. Raises
    DataLossError, HAFetchError, HAProtocolError or CommitLogFormatError (each naming offsets).
    """
    freeze_imports()  # the worker's modules are loaded by now: out of every later collection (connector.worker_gc)
    fetch = partition.fetch
    admin = BrokerAdminClient(partition.remoting_addr, fetch.read_timeout_ms, fetch.credentials)
    decoder = CommitLogArrowDecoder(
        partition.start, partition.end, partition.mapped_file_size, broker=partition.broker,
        decompress_body=fetch.decompress_body, max_records_per_batch=fetch.max_records_per_batch,
        max_bytes_per_batch=fetch.max_bytes_per_batch, topic_filter=fetch.topic_filter, mode=fetch.mode,
        verify_body_crc=fetch.verify_body_crc, max_inflated_body_bytes=fetch.max_inflated_body_bytes,
        columns=columns)
    extra = {} if not partition.members else {
        "locate_master": master_locator(partition.members, fetch.connect_timeout_ms, fetch.read_timeout_ms,
                                        fetch.credentials),
        "planned_epochs": partition.epochs, "credentials": fetch.credentials}
    fetcher = open_fetcher(fetch, partition.ha_addr, partition.start, partition.end, broker=partition.broker,
                           protocol=partition.ha_protocol, server_is_slave=partition.server_role == "slave",
                           fail_on_data_loss=fetch.fail_on_data_loss, offsets_probe=admin.commit_log_offsets,
                           keep_views=fetch.prefetch_chunks > 0, **extra)
    chunks = prefetch_chunks(fetcher, fetch.prefetch_chunks) if fetch.prefetch_chunks else fetcher
    try:
        for offset, data in chunks:
            if offset != decoder.stream_offset:
                yield from decoder.jump(offset, "lost on the broker")
            if data:
                yield from decoder.feed(offset, data)
        yield from decoder.finish()
        log.info("broker %s (%s %s): read [%d, %d): %d records kept, %d filtered out by topic, %d END_FILE "
                 "blanks, %d HA connection(s)", partition.broker, partition.server_role, partition.ha_addr,
                 partition.start, partition.end, decoder.records_emitted, decoder.records_filtered,
                 decoder.blanks_skipped, fetcher.connections)
    finally:
        fetcher.close()
        admin.close()
