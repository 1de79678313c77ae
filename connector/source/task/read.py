"""The task side of the source: one InputPartition's CommitLog bytes fetched over HA and decoded into Arrow.

:func:`read_task` is what ``HAReplicaStreamReader.read`` runs in a task; :func:`read_partition` the fetch and
decode under it (docs/source.md "Rows", "Speed and memory").
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator

import pyarrow as pa

from connector.client.admin import BrokerAdminClient
from connector.client.ha import HARangeFetcher, fetch_receives
from connector.client.ha_autoswitch import master_locator
from connector.decode.stream import CommitLogArrowDecoder
from connector.decode.topic_filter import TopicFilter
from connector.source.partition import HAReplicaInputPartition
from connector.source.task.transform import transform_batches, transform_source_columns
from connector.source.task.worker_gc import freeze_imports

log = logging.getLogger(__name__)


def read_partition(partition: HAReplicaInputPartition, columns: Collection[str] | None = None
                   ) -> Iterator[pa.RecordBatch]:
    """Fetch ``[partition.start, partition.end)`` over the HA port and decode it into RecordBatches of the
    source's schema, or of only its ``columns`` (the decoder builds no other; docs/source.md "Speed and memory").

    One pipeline of generators, each stage pulling from the one before (docs/architecture.md "The path of one
    body"): the HA stage yields the bytes of each receive (:func:`connector.client.ha.fetch_receives`), the
    record stage walks them and the Arrow stage builds each batch
    (:meth:`connector.decode.stream.CommitLogArrowDecoder.decode_receives`); this function enters the pipeline
    once per batch. Bytes are received on a background thread (:func:`connector.client.ha.prefetch_receives`)
    while the previous ones are decoded, unless ``fetch.prefetch_chunks`` is 0. Memory stays bounded by one batch
    plus ``fetch.prefetch_chunks`` + 2 receive buffers (1 MiB each) whatever the partition size. Records
    whose topic the query's filter drops are skipped before their columns are built; bytes the broker lost
    (``fetch.fail_on_data_loss`` false) are skipped with a warning. Raises DataLossError, HAFetchError,
    HAProtocolError or CommitLogFormatError (each naming offsets).
    """
    freeze_imports()  # the worker's modules are loaded by now: out of every later collection (worker_gc)
    fetch = partition.fetch
    admin = BrokerAdminClient(partition.remoting_addr, fetch.read_timeout_ms, fetch.credentials)
    decoder = CommitLogArrowDecoder(partition.start, partition.end, partition.mapped_file_size,
                                    broker=partition.broker, settings=partition.decode,
                                    topic_filter=TopicFilter.of(partition.decode), columns=columns)
    extra = {} if not partition.members else {
        "locate_master": master_locator(partition.members, fetch.connect_timeout_ms, fetch.read_timeout_ms,
                                        fetch.credentials),
        "planned_epochs": partition.epochs, "credentials": fetch.credentials}
    fetcher = HARangeFetcher(partition.ha_addr, partition.start, partition.end, protocol=partition.ha_protocol,
                             broker=partition.broker, settings=fetch, fail_on_data_loss=fetch.fail_on_data_loss,
                             server_is_slave=partition.server_role == "slave", offsets_probe=admin.commit_log_offsets,
                             keep_views=fetch.prefetch_chunks > 0, **extra)
    receives = fetch_receives(fetcher, fetch.prefetch_chunks)
    try:
        yield from decoder.decode_receives(receives, "lost on the broker")
        log.info("broker %s (%s %s): read [%d, %d): %d records kept, %d filtered out by topic, %d END_FILE "
                 "blanks, %d HA connection(s)", partition.broker, partition.server_role, partition.ha_addr,
                 partition.start, partition.end, decoder.records_emitted, decoder.records_filtered,
                 decoder.blanks_skipped, fetcher.connections)
    finally:
        receives.close()
        fetcher.close()
        admin.close()


def read_task(partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
    """A task's RecordBatches of ``partition`` (see :func:`read_partition`): only the partition's ``columns``
    when the query gave a schema, and only those are decoded. With a ``batch_transform``, the columns it says
    it reads (:func:`connector.source.task.transform.transform_source_columns`) are decoded and handed to it."""
    if partition.transform is not None:
        read = transform_source_columns(partition.transform, partition.columns)
        return transform_batches(read_partition(partition, read), partition.transform, partition.columns)
    if partition.columns is None:
        return read_partition(partition)
    return (batch.select(list(partition.columns)) for batch in read_partition(partition, partition.columns))
