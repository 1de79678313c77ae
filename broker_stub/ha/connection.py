"""One master-side HA connection (RocketMQ 4.9.8 ``HAConnection``: ReadSocketService + WriteSocketService): reads the
slave's reports as acks and pushes CommitLog frames from the start the first report fixes.

Pushes go out with ``sendmsg`` of many frames at once (up to ``PUSH_BATCH_BYTES``), the bodies as views of the
mapped CommitLog file released before the coroutine yields (so files can always be unmapped); a frame left
half-sent is finished first on the next write, and a slow reader only blocks its own writer. The wire and 4.9.8's
rules: docs/protocol.md §2.2–§2.5; the stub's changes (reports above the max offset refused, pushes on append):
docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)", "Master HA", and "Better than 4.9.8, same wire".
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import TYPE_CHECKING, Protocol

from connector.protocol.ha import ReportReader, encode_transfer_header

if TYPE_CHECKING:
    from broker_stub.config import MessageStoreConfig
    from broker_stub.store.commit_log import CommitLog


class HAConnectionOwner(Protocol):
    """What an HAConnection uses of its HAService: the CommitLog it serves, the store config (batch size,
    housekeeping interval), the slave-ack wake-up and the connection set (HAService satisfies it)."""

    commit_log: CommitLog
    store_config: MessageStoreConfig

    def notify_transfer_some(self, offset: int, conn: HAConnection | None = None) -> None: ...

    def remove_connection(self, conn: HAConnection) -> None: ...

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 64 * 1024
PUSH_BATCH_BYTES = 4 * 1024 * 1024  # CommitLog bytes per sendmsg call
PUSH_BATCH_FRAMES = 256  # frames per sendmsg call (2 buffers each, well below IOV_MAX)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class HAConnection:
    """Serves one slave (or hareplica reader) on an accepted socket: ``await run()`` until it closes."""

    def __init__(self, service: HAConnectionOwner, sock: socket.socket, peer) -> None:
        self.service = service
        self.sock = sock
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.client_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.is_replica = True  # False: a reader outside haReplicaAddresses, its acks do not count
        self.max_reported_offset = -1
        self.next_transfer_from_where = -1
        self.last_read_timestamp_ms = _now_ms()
        self.last_write_timestamp_ms = _now_ms()
        self.requested_offset_missing = False
        self.bytes_sent = 0
        self.close_reason: str | None = None
        self._first_report = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._unsent = b""  # the rest of a frame the socket did not take

    def wakeup(self) -> None:
        """New CommitLog data: let the writer look again (called on every append)."""
        self._wakeup.set()

    async def run(self) -> None:
        """Run the read and write sides until either ends, then close and unregister."""
        log.info("ha connection accepted peer=%s", self.client_addr)
        read_task = asyncio.create_task(self._read_loop(), name=f"HAConnection.read {self.client_addr}")
        write_task = asyncio.create_task(self._write_loop(), name=f"HAConnection.write {self.client_addr}")
        try:
            done, pending = await asyncio.wait({read_task, write_task}, return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                t.cancel()
            for t in pending:
                try:
                    await t
                except asyncio.CancelledError:
                    pass
            for t in done:
                exc = t.exception()
                if exc is not None and not isinstance(exc, OSError):
                    log.error("ha connection failed peer=%s error=%r", self.client_addr, exc)
                    self.close_reason = self.close_reason or f"error {exc!r}"
                elif exc is not None:
                    self.close_reason = self.close_reason or f"socket {exc!r}"
        except asyncio.CancelledError:
            read_task.cancel()
            write_task.cancel()
            self.close_reason = self.close_reason or "broker shutdown"
            raise
        finally:
            self._close()

    def _close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        self.service.remove_connection(self)
        log.info("ha connection closed peer=%s reason=%s slaveAckOffset=%d bytesSent=%d", self.client_addr,
                 self.close_reason or "peer closed", self.slave_ack_offset, self.bytes_sent)

    # --- ReadSocketService ---------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        reports = ReportReader()
        housekeeping_ms = self.service.store_config.haHousekeepingInterval
        while True:
            idle_ms = _now_ms() - self.last_read_timestamp_ms
            if idle_ms > housekeeping_ms:
                self.close_reason = f"ha housekeeping: no read for {int(idle_ms)} ms"
                log.warning("ha housekeeping, connection expired peer=%s idleMs=%d", self.client_addr, idle_ms)
                return
            try:
                data = await asyncio.wait_for(loop.sock_recv(self.sock, READ_CHUNK_BYTES),
                                              timeout=(housekeeping_ms - idle_ms) / 1000 + 0.001)
            except TimeoutError:
                continue
            if not data:
                self.close_reason = "peer closed"
                return
            self.last_read_timestamp_ms = _now_ms()
            value = reports.feed(data)
            if value is None:
                continue
            if not self._accept_report(value):
                return

    def _accept_report(self, offset: int) -> bool:
        """Apply one report; False closes the connection (negative, or above the master's max offset)."""
        self.slave_ack_offset = offset
        if offset > self.max_reported_offset:
            self.max_reported_offset = offset
        max_offset = self.service.commit_log.max_offset
        first = self.slave_request_offset < 0
        if offset < 0 or offset > max_offset:
            self.close_reason = (f"slave {'request' if first else 'ack'} offset {offset} is outside "
                                 f"[0, commitLogMaxOffset {max_offset}]")
            log.warning("slave reported offset greater than local commitLog offset, closing peer=%s offset=%d "
                        "maxOffset=%d first=%s", self.client_addr, offset, max_offset, first)
            return False
        if first:
            self.slave_request_offset = offset
            log.info("slave request offset peer=%s offset=%d", self.client_addr, offset)
            self._first_report.set()
        self.service.notify_transfer_some(offset, self)
        return True

    # --- WriteSocketService --------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        await self._first_report.wait()
        store_cfg = self.service.store_config
        commit_log = self.service.commit_log
        if self.slave_request_offset == 0:
            master_offset = commit_log.max_offset
            self.next_transfer_from_where = max(master_offset - master_offset % commit_log.file_size, 0)
        else:
            self.next_transfer_from_where = self.slave_request_offset
        log.info("master transfer data from=%d peer=%s slaveRequest=%d", self.next_transfer_from_where,
                 self.client_addr, self.slave_request_offset)
        heartbeat_ms = store_cfg.haSendHeartbeatInterval
        while True:
            if self._unsent:
                await self._send_unsent()
                continue
            if _now_ms() - self.last_write_timestamp_ms > heartbeat_ms:
                self._unsent = encode_transfer_header(self.next_transfer_from_where, 0)
                await self._send_unsent()
            pushed = self._push_batch()
            if pushed is not None:
                if not pushed:
                    await self._writable()  # the socket buffer is full: a slow reader only waits here
                else:
                    await asyncio.sleep(0)  # let acks, appends and other connections in between batches
                continue
            self._note_missing_offset()
            self._wakeup.clear()
            wait_ms = heartbeat_ms - (_now_ms() - self.last_write_timestamp_ms) + 1
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout=max(wait_ms, 1) / 1000)
            except TimeoutError:
                pass

    def _push_batch(self) -> bool | None:
        """Send the frames that are ready with one ``sendmsg``: None when there was nothing to send, True when
        the socket took everything, False when it is full (wait until it is writable).

        Frames carry at most ``haTransferBatchSize`` bytes and stop at the read position of their file.
        Raises OSError when the socket fails.
        """
        commit_log = self.service.commit_log
        batch = self.service.store_config.haTransferBatchSize
        queue = commit_log.mapped_file_queue
        buffers: list = []
        frames: list[tuple[int, int]] = []  # (offset, size) per frame, in order
        views: list[memoryview] = []
        offset = self.next_transfer_from_where
        total = 0
        try:
            while total < PUSH_BATCH_BYTES and len(frames) < PUSH_BATCH_FRAMES:
                mf = queue.find_mapped_file_by_offset(offset)
                if mf is None:
                    break
                pos = offset - mf.file_from_offset
                size = min(batch, mf.wrote_position - pos)
                if size <= 0:
                    break
                view = memoryview(mf.mapping)[pos:pos + size]
                views.append(view)
                buffers.append(encode_transfer_header(offset, size))
                buffers.append(view)
                frames.append((offset, size))
                offset += size
                total += size
            if not frames:
                return None
            try:
                sent = self.sock.sendmsg(buffers)
            except (BlockingIOError, InterruptedError):
                sent = 0
            self._account(frames, buffers, sent)
        finally:
            for v in views:
                v.release()
        return sent == total + 12 * len(frames)

    def _account(self, frames: list[tuple[int, int]], buffers: list, sent: int) -> None:
        """Advance past the frames the socket took; keep a copy of a half-sent frame in ``_unsent``."""
        if sent > 0:
            self.last_write_timestamp_ms = _now_ms()
        for i, (offset, size) in enumerate(frames):
            frame_len = 12 + size
            if sent >= frame_len:
                sent -= frame_len
                self.next_transfer_from_where = offset + size
                self.bytes_sent += size
                continue
            if sent > 0:  # this frame is half out: copy its rest aside (once) and finish it before anything else
                header, body = buffers[2 * i], buffers[2 * i + 1]
                self._unsent = header[sent:] + body if sent < len(header) else bytes(body[sent - len(header):])
                self.next_transfer_from_where = offset + size
                self.bytes_sent += size
            return

    async def _writable(self) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        fd = self.sock.fileno()
        loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            loop.remove_writer(fd)

    async def _send_unsent(self) -> None:
        """Write ``_unsent`` completely (waiting for the socket as needed). Raises OSError."""
        while self._unsent:
            try:
                n = self.sock.send(self._unsent)
            except (BlockingIOError, InterruptedError):
                n = 0
            if n:
                self._unsent = self._unsent[n:]
                self.last_write_timestamp_ms = _now_ms()
            if self._unsent:
                await self._writable()

    def _note_missing_offset(self) -> None:
        commit_log = self.service.commit_log
        offset = self.next_transfer_from_where
        missing = commit_log.min_offset >= 0 and offset < commit_log.min_offset
        if missing and not self.requested_offset_missing:
            log.warning("slave requested an offset the master no longer has; sending heartbeats only "
                        "peer=%s offset=%d commitLogMinOffset=%d", self.client_addr, offset, commit_log.min_offset)
        self.requested_offset_missing = missing

    def status(self) -> dict:
        """Figures for status, metrics and GET_BROKER_RUNTIME_INFO ``haConnections`` (round-2 contract).

        Keys: ``peer`` ("ip:port"), ``slaveRequestOffset`` (first report, −1 before it), ``slaveAckOffset``
        (last report), ``maxReportedOffset`` (highest report ever on this connection), ``nextTransferFromWhere``
        (next byte to push), ``lagBytes`` (commitLogMaxOffset − slaveAckOffset, ≥ 0), ``msSinceLastRead`` (ms),
        ``requestedOffsetMissing`` (the start offset is below commitLogMinOffset: only heartbeats are sent),
        ``bytesSent`` (CommitLog bytes pushed, headers excluded). Offsets are CommitLog bytes.
        """
        max_offset = self.service.commit_log.max_offset
        return {
            "peer": self.client_addr,
            "slaveRequestOffset": self.slave_request_offset,
            "slaveAckOffset": self.slave_ack_offset,
            "maxReportedOffset": self.max_reported_offset,
            "nextTransferFromWhere": self.next_transfer_from_where,
            "lagBytes": max(max_offset - max(self.slave_ack_offset, 0), 0),
            "msSinceLastRead": int(_now_ms() - self.last_read_timestamp_ms),
            "requestedOffsetMissing": self.requested_offset_missing,
            "bytesSent": self.bytes_sent,
        }
