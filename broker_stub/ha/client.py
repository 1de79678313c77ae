"""The slave's HA client (RocketMQ 4.9.8 ``HAService.HAClient``): reports the slave's CommitLog max offset, checks
each frame's continuity and appends the master's bytes verbatim to the slave's own CommitLog
(:meth:`CommitLog.append_data`), so its files equal the master's. The receive side is an
``asyncio.BufferedProtocol`` over a 4 MiB buffer, so bytes go from the socket buffer straight into the mapped file.

The wire and the rules kept: docs/protocol.md §2.4–§2.7; where the master address comes from: §3.1; what the stub
does better on the same wire (first report at once, silent masters, backoff): docs/broker_stub.md "Better than
4.9.8, same wire".
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import TYPE_CHECKING

from broker_stub.store.commit_log import CommitLogAppendError
from connector.errors import HAProtocolError, HAReplicaError
from connector.protocol.address import split_host_port
from connector.protocol.ha import (
    HA_CLIENT_READ_MAX_BUFFER_SIZE_BYTES,
    HA_CONNECT_TIMEOUT_MS,
    HA_MAX_TRANSFER_BODY_BYTES,
    TransferFrameReader,
    encode_report,
)

if TYPE_CHECKING:
    from broker_stub.config import MessageStoreConfig
    from broker_stub.store.commit_log import CommitLog

log = logging.getLogger(__name__)

HA_CLIENT_RECONNECT_MIN_BACKOFF_MS = 100
HA_CLIENT_RECONNECT_MAX_BACKOFF_MS = 5000  # upstream waits this long after every failure
GET_BUFFER_MIN_FREE_BYTES = 64 * 1024  # compact the receive buffer before offering less than this


class HAContinuityError(HAReplicaError):
    """The master pushed an offset that does not continue the slave's CommitLog (docs/protocol.md §2.6 step 2)."""


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class _MasterChannel(asyncio.BufferedProtocol):
    """Receive side of one connection: frames parsed in place (:class:`connector.protocol.ha.TransferFrameReader`
    over a 4 MiB buffer the socket reads into), bodies appended."""

    def __init__(self, client: HAClient) -> None:
        self.client = client
        self.reader = TransferFrameReader(HA_MAX_TRANSFER_BODY_BYTES, buffer_bytes=HA_CLIENT_READ_MAX_BUFFER_SIZE_BYTES,
                                          compact_below_free_bytes=GET_BUFFER_MIN_FREE_BYTES)
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()
        self.error: BaseException | None = None

    # asyncio.BufferedProtocol -----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.writable()  # moves a partial frame to the front when < 64 KiB are free

    def buffer_updated(self, nbytes: int) -> None:
        self.reader.wrote(nbytes)
        client = self.client
        client.last_read_timestamp_ms = _now_ms()
        client.bytes_received += nbytes
        try:
            self._dispatch()
        except (HAReplicaError, ValueError, OSError) as exc:
            self.fail(exc)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(self.error or exc)

    # frames -----------------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Append every complete frame in the buffer (one vectored write per file), then report."""
        client = self.client
        commit_log = client.commit_log
        reader = self.reader
        frames: list[tuple[int, memoryview]] = []
        expected = commit_log.max_offset  # what the slave's max offset is once the collected frames are in
        error: HAReplicaError | None = None
        try:
            while (header := reader.peek_header()) is not None:
                master_offset, size = header
                if expected != 0 and expected != master_offset:
                    error = HAContinuityError(
                        f"master pushed offset not equal the max phy offset in slave, SLAVE: {expected} "
                        f"MASTER: {master_offset}")
                    break
                frame = reader.next_frame_view()
                if frame is None:
                    break
                frames.append(frame)
                expected = master_offset + size
                client.frames_received += 1
            if frames:
                try:
                    commit_log.append_data_batch(frames)
                except CommitLogAppendError as exc:
                    raise HAContinuityError(str(exc)) from exc
                client.master_phy_offset = frames[-1][0] + len(frames[-1][1])
                if any(len(v) for _, v in frames):
                    client.last_append_ms = _now_ms()
        finally:
            for _, v in frames:
                v.release()
        if error is not None:
            raise error
        client.report_if_grown()

    def fail(self, exc: BaseException) -> None:
        """Close this connection because of ``exc`` (logged by the client)."""
        if self.error is None:
            self.error = exc
        if self.transport is not None:
            self.transport.abort()
        if not self.lost.done():
            self.lost.set_result(exc)


class HAClient:
    """Replicates the master's CommitLog into ``commit_log``. ``await run()`` until cancelled.

    Args:
        commit_log: the slave's CommitLog (appended with :meth:`CommitLog.append_data`).
        store_config: ``haSendHeartbeatInterval`` and ``haHousekeepingInterval`` (ms) are used.
        master_address: the pinned ``haMasterAddress`` ("host:port"), or None to wait for one from the
            name server (:meth:`update_master_address`).
    """

    def __init__(self, commit_log: CommitLog, store_config: MessageStoreConfig, master_address: str | None) -> None:
        self.commit_log = commit_log
        self.store_config = store_config
        self.master_address = master_address
        self.connected = False
        self.master_phy_offset = -1  # end offset of the last frame received (heartbeats included)
        self.current_reported_offset = -1
        self.last_read_timestamp_ms = _now_ms()
        self.last_write_timestamp_ms = _now_ms()
        self.connect_count = 0
        self.bytes_received = 0
        self.frames_received = 0
        self.last_error: str | None = None
        self.connected_at_ms = 0.0  # monotonic ms when the current connection was made
        self.last_append_ms = 0.0  # monotonic ms of the last frame that carried CommitLog bytes
        self.max_offset_at_connect = 0
        self._channel: _MasterChannel | None = None
        self._address_changed = asyncio.Event()

    # --- address -------------------------------------------------------------------------------------
    def update_master_address(self, address: str | None) -> None:
        """HAClient.updateMasterAddress: use ``address`` for the next connection (docs/protocol.md §3.1).

        An open connection is kept (as upstream); a client waiting to reconnect tries the new one at once.
        """
        if not address or address == self.master_address:
            return
        log.info("update master address, OLD: %s NEW: %s", self.master_address, address)
        self.master_address = address
        self._address_changed.set()

    # --- reports -------------------------------------------------------------------------------------
    def _report(self, offset: int) -> None:
        channel = self._channel
        if channel is None or channel.transport is None or channel.transport.is_closing():
            return
        channel.transport.write(encode_report(offset))
        self.current_reported_offset = offset
        self.last_write_timestamp_ms = _now_ms()

    def report_if_grown(self) -> None:
        """reportSlaveMaxOffsetPlus: report the max offset when it grew since the last report."""
        current = self.commit_log.max_offset
        if current > self.current_reported_offset:
            self._report(current)

    # --- main loop -----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Connect, replicate, reconnect with backoff — until cancelled."""
        backoff_ms = HA_CLIENT_RECONNECT_MIN_BACKOFF_MS
        while True:
            address = self.master_address
            if not address:
                self._address_changed.clear()
                await self._address_changed.wait()
                continue
            frames_before = self.frames_received
            try:
                await self._connect_and_replicate(address)
            except (OSError, TimeoutError, ValueError) as exc:
                self.last_error = f"connect to {address} failed: {exc!r}"
                log.warning("ha client cannot connect master=%s error=%r retryInMs=%d", address, exc, backoff_ms)
            if self.frames_received > frames_before:
                backoff_ms = HA_CLIENT_RECONNECT_MIN_BACKOFF_MS
            self._address_changed.clear()
            try:
                await asyncio.wait_for(self._address_changed.wait(), timeout=backoff_ms / 1000)
            except TimeoutError:
                pass
            backoff_ms = min(backoff_ms * 2, HA_CLIENT_RECONNECT_MAX_BACKOFF_MS)

    async def _connect_and_replicate(self, address: str) -> None:
        host, port = split_host_port(address, bare_ipv6=True)
        loop = asyncio.get_running_loop()
        transport, channel = await asyncio.wait_for(
            loop.create_connection(lambda: _MasterChannel(self), host, port),
            timeout=HA_CONNECT_TIMEOUT_MS / 1000)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._channel = channel
        self.connected = True
        self.connect_count += 1
        self.connected_at_ms = self.last_append_ms = _now_ms()
        self.max_offset_at_connect = self.commit_log.max_offset
        self.last_read_timestamp_ms = _now_ms()
        self.current_reported_offset = -1
        local = transport.get_extra_info("sockname")
        log.info("ha client connected master=%s local=%s slaveMaxOffset=%d", address,
                 f"{local[0]}:{local[1]}" if local else "?", self.commit_log.max_offset)
        reason = "master closed the connection"
        try:
            self._report(self.commit_log.max_offset)  # at once (upstream: after haSendHeartbeatInterval)
            heartbeat_ms = self.store_config.haSendHeartbeatInterval
            housekeeping_ms = self.store_config.haHousekeepingInterval
            while not channel.lost.done():
                now = _now_ms()
                silent_ms = now - self.last_read_timestamp_ms
                if silent_ms > housekeeping_ms:
                    reason = f"master silent for {int(silent_ms)} ms (haHousekeepingInterval {housekeeping_ms})"
                    channel.fail(TimeoutError(reason))
                    break
                if now - self.last_write_timestamp_ms > heartbeat_ms:
                    self._report(self.commit_log.max_offset)
                wait_ms = min(heartbeat_ms - (now - self.last_write_timestamp_ms),
                              housekeeping_ms - silent_ms) + 1
                try:
                    await asyncio.wait_for(asyncio.shield(channel.lost), timeout=max(wait_ms, 1) / 1000)
                except TimeoutError:
                    pass
            error = channel.lost.result() if channel.lost.done() else None
            if error is not None and not isinstance(error, TimeoutError):
                reason = f"{type(error).__name__}: {error}"
            if isinstance(error, (HAProtocolError, HAContinuityError)):
                log.error("ha client closing connection master=%s error=%s", address, error)
        finally:
            self.connected = False
            self._channel = None
            if channel.transport is not None:
                channel.transport.abort()
            self.last_error = reason
            log.info("ha client disconnected master=%s reason=%s slaveMaxOffset=%d", address, reason,
                     self.commit_log.max_offset)

    # --- status --------------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        """The SLAVE keys of GET_BROKER_RUNTIME_INFO, as strings: the round-2 contract (``haMasterAddress``,
        ``masterPhyOffset``, ``slaveConnected``) plus ``haClientConnectedMs`` (ms since the current connection
        was made), ``haClientMsSinceLastAppend`` (ms since the last frame with CommitLog bytes) and
        ``haClientMaxOffsetAtConnect`` (the slave's max offset when it connected) — catch-up timing."""
        now = _now_ms()
        return {
            "haMasterAddress": self.master_address or "",
            "masterPhyOffset": str(self.master_phy_offset),
            "slaveConnected": "true" if self.connected else "false",
            "haClientConnectedMs": str(int(now - self.connected_at_ms) if self.connected else -1),
            "haClientMsSinceLastAppend": str(int(now - self.last_append_ms) if self.connected else -1),
            "haClientMaxOffsetAtConnect": str(self.max_offset_at_connect),
        }

    def status(self) -> dict:
        """Figures for the status command and metrics (offsets in bytes, times in ms)."""
        return {
            "haMasterAddress": self.master_address,
            "slaveConnected": self.connected,
            "masterPhyOffset": self.master_phy_offset,
            "slaveMaxOffset": self.commit_log.max_offset,
            "currentReportedOffset": self.current_reported_offset,
            "msSinceLastRead": int(_now_ms() - self.last_read_timestamp_ms),
            "connectCount": self.connect_count,
            "bytesReceived": self.bytes_received,
            "framesReceived": self.frames_received,
            "lastError": self.last_error,
        }
