"""The broker's outgoing remoting client (RocketMQ 4.9.8 ``NettyRemotingClient`` as ``BrokerOuterAPI`` uses it).

Used for name-server registration (REGISTER_BROKER) and the slave's metadata sync (docs/protocol.md §3); frames go
through
:mod:`connector.protocol.remoting`, addresses through :mod:`connector.protocol.address`. One
connection per address, opened on first use and reused; requests are matched to responses by ``opaque``,
so several may be in flight. Every call has a timeout (``invoke(..., timeout_ms)``); a timed-out or
failed connection is closed so the next call reconnects (``clientCloseSocketIfTimeout``, default true).
"""

from __future__ import annotations

import asyncio
import logging

from connector.errors import HAReplicaError, RemotingProtocolError
from connector.protocol.address import split_host_port
from connector.protocol.remoting import FrameDecoder, RemotingCommand

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 256 * 1024


class RemotingClientError(HAReplicaError):
    """A request could not be answered: connect failure, timeout, closed or malformed connection."""


class _Channel:
    def __init__(self, addr: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.addr = addr
        self.reader = reader
        self.writer = writer
        self.pending: dict[int, asyncio.Future] = {}
        self.task = asyncio.create_task(self._read_loop(), name=f"RemotingClient.read {addr}")

    async def _read_loop(self) -> None:
        decoder = FrameDecoder()
        error: BaseException | None = None
        try:
            while True:
                data = await self.reader.read(READ_CHUNK_BYTES)
                if not data:
                    break
                for cmd in decoder.feed(data):
                    fut = self.pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done() and cmd.is_response:
                        fut.set_result(cmd)
        except (OSError, RemotingProtocolError) as exc:
            error = exc
        finally:
            self.close()
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(RemotingClientError(f"connection to {self.addr} closed: {error or 'EOF'}"))
            self.pending.clear()

    @property
    def is_open(self) -> bool:
        return not self.writer.is_closing() and not self.task.done()

    def close(self) -> None:
        self.writer.close()


class RemotingClient:
    """Async request/response client. ``await invoke(addr, cmd, timeout_ms)`` → response command.

    Args:
        connect_timeout_ms: TCP connect timeout (``connectTimeoutMillis``, 3000 ms upstream).
    """

    def __init__(self, connect_timeout_ms: int = 3000) -> None:
        self.connect_timeout_ms = connect_timeout_ms
        self._channels: dict[str, _Channel] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def _channel(self, addr: str, deadline: float) -> _Channel:
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            ch = self._channels.get(addr)
            if ch is not None and ch.is_open:
                return ch
            host, port = split_host_port(addr, bare_ipv6=True)
            loop = asyncio.get_running_loop()
            timeout = max(min(self.connect_timeout_ms / 1000, deadline - loop.time()), 0.001)
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=timeout)
            except (OSError, TimeoutError) as exc:
                raise RemotingClientError(f"cannot connect to {addr}: {exc!r}") from exc
            ch = _Channel(addr, reader, writer)
            self._channels[addr] = ch
            return ch

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and return its response within ``timeout_ms``.

        Raises RemotingClientError on connect failure, timeout or a lost connection; ValueError for a
        malformed address.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        ch = await self._channel(addr, deadline)
        fut: asyncio.Future = loop.create_future()
        ch.pending[cmd.opaque] = fut
        try:
            ch.writer.write(cmd.encode())
            remaining = max(deadline - loop.time(), 0.001)
            return await asyncio.wait_for(fut, timeout=remaining)
        except TimeoutError:
            ch.close()  # clientCloseSocketIfTimeout
            raise RemotingClientError(f"request code {cmd.code} to {addr} timed out after {timeout_ms} ms") from None
        finally:
            ch.pending.pop(cmd.opaque, None)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand, timeout_ms: int = 3000) -> None:
        """Send a request without waiting for a response (the oneway flag is set by the caller)."""
        loop = asyncio.get_running_loop()
        ch = await self._channel(addr, loop.time() + timeout_ms / 1000)
        ch.writer.write(cmd.encode())

    async def close(self) -> None:
        """Close every connection."""
        channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            ch.close()
        for ch in channels:
            try:
                await asyncio.wait_for(ch.task, timeout=1.0)
            except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
