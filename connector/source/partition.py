"""``HAReplicaInputPartition``: what the driver hands a task, the one type both sides of the source share.

Built by :mod:`connector.source.driver.partitions`, read by :mod:`connector.source.task.read`
(docs/source.md "Offsets, batches, partitions").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from connector.options.settings import DecodeSettings, FetchSettings
from connector.protocol.ha import HA_PROTOCOL_CLASSIC


@dataclass
class HAReplicaInputPartition(InputPartition):
    """One Spark task: CommitLog bytes ``[start, end)`` of one broker, inside one mapped file.

    Offsets and ``mapped_file_size`` in bytes; ``ha_addr`` / ``remoting_addr`` are those of the server
    to read (the master, or a slave when the query reads from slaves), ``server_role`` says which; ``fetch``
    and ``decode`` carry the settings of the HA read and of the decoder. Picklable (module-level dataclass of
    plain values).
    """

    broker: str
    ha_addr: str
    remoting_addr: str
    start: int
    end: int
    mapped_file_size: int
    fetch: FetchSettings
    decode: DecodeSettings = field(default_factory=DecodeSettings)
    server_role: str = "master"
    #: the columns of a user-specified schema (names of spark_schema, in that schema's order); None: all
    columns: tuple[str, ...] | None = None
    #: the query's batch transform (connector.source.task.transform); ``columns`` are then the query schema's,
    #: its output
    transform: str | None = None
    #: the HA protocol of ``ha_addr``: ``"classic"`` or ``"autoswitch"`` (5.x controller mode)
    ha_protocol: str = HA_PROTOCOL_CLASSIC
    #: controller mode: ``(ha_addr, remoting_addr)`` of every member (a fetch follows a master switch among
    #: them) and the master's ``(epoch, startOffset)`` entries when the batch was planned
    members: tuple[tuple[str, str], ...] = ()
    epochs: tuple[tuple[int, int], ...] = ()
