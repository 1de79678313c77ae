"""``spark.readStream.format("hareplica")``: a RocketMQ CommitLog as a Spark stream (docs/source.md).

Driver (HAReplicaStreamReader in Spark's Python planner process): asks each broker for its
commitLogMinOffset/commitLogMaxOffset (GET_BROKER_RUNTIME_INFO) and mappedFileSizeCommitLog
(GET_BROKER_CONFIG) over remoting and plans byte ranges. The only message bytes it reads are a few
around batch ends, to fingerprint and check the record before each offset (:mod:`connector.history`).

* **Offsets** are JSON objects ``{"broker-a": 12345, ...}``: per broker the *next* CommitLog offset to
  read (Spark's Kafka convention). Every offset the source returns is a record boundary: a mapped-file
  start, or a commitLogMaxOffset the master reported (the master's write position only ever stops
  between records).
* **Read limit.** ``maxBytesPerTrigger`` becomes ``ReadMaxBytes``; the budget is shared between
  brokers in proportion to their backlog (as Kafka's ``maxOffsetsPerTrigger``), and each broker's
  batch is cut at the *first known boundary at or past its share*: the next mapped-file start or an
  earlier commitLogMaxOffset sample, whichever comes first, never past the current max offset. The
  driver cannot know record boundaries inside a file without reading it, so the limit is **soft**: a
  batch can overshoot by up to one mapped file (1 GiB by default) when the backlog lies inside files
  the driver never saw being written.
* **Trigger.AvailableNow.** ``prepareForTriggerAvailableNow`` records each broker's max offset; no
  batch goes past it.
* **Partitions.** One :class:`HAReplicaInputPartition` per (broker, mapped-file slice) of
  ``[start, end)``, split further at ConsumeQueue record boundaries for ``minPartitions`` /
  ``maxBytesPerPartition`` (:mod:`connector.splits`); executors fetch their slice over the HA port
  (:mod:`connector.client.ha`) and decode it into pyarrow RecordBatches (:mod:`connector.decode`).
* **Data loss** (``failOnDataLoss``, as in Spark's Kafka source): when the broker's min offset has
  passed the offset a batch must start at (retention deleted files), or its max offset fell below the
  checkpoint (it lost its tail), the query fails naming the lost range; with ``false`` it logs the
  lost bytes and continues at the broker's min offset (or waits for the broker to pass the
  checkpoint again).
* **Rewritten history**: offsets carry ``"@lastRecord"`` fingerprints; a start offset whose record
  changed or that is no longer a record start fails (``failOnDataLoss``) or resumes at the next real
  record boundary (docs/source.md "Rewritten history").
* **Outages**: remoting calls wait a broker outage out up to ``maxOutageMs`` (:mod:`connector.client.reconnect`).
* **Slaves** (``slaves``, ``readFrom``, ``minInSyncSlaves``): batches end at what enough slaves hold,
  rounded down to a known record boundary, and partitions may be read from a slave's HA port; see
  :mod:`connector.planning`, which also holds the SYNC_MASTER acknowledgement rule.
* **HA variants.** The first contact asks GET_BROKER_CONFIG: a 5.x broker in controller mode is read over
  AutoSwitch HA (:mod:`connector.client.ha_autoswitch`) and its batches end at or below the master's
  confirmOffset (docs/source.md "RocketMQ 5.x controller mode"); a DLedger broker fails fast with
  UnsupportedBrokerModeError.

Modules, each using only those after it: :mod:`connector.source.reader` (the Spark classes) →
:mod:`connector.source.brokers` (remoting samples of each broker set), :mod:`connector.source.batch_ends`
(offsets, read limits, batch ends) and :mod:`connector.source.offsets` (the offset JSON) →
:mod:`connector.source.partitions` (the InputPartition and its building) → :mod:`connector.source.read`
(the executors' :func:`read_partition`).
"""

from connector.source.brokers import ack_window_ms
from connector.source.partitions import HAReplicaInputPartition
from connector.source.read import read_partition
from connector.source.reader import HAReplicaDataSource, HAReplicaStreamReader, warn_without_admission_control

__all__ = [
    "HAReplicaDataSource",
    "HAReplicaInputPartition",
    "HAReplicaStreamReader",
    "ack_window_ms",
    "read_partition",
    "warn_without_admission_control",
]
