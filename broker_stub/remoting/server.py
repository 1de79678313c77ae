"""The broker's remoting server (RocketMQ 4.9.8 ``NettyRemotingServer`` + ``NettyRemotingAbstract``, spec §4).

Frames are decoded with :func:`connector.protocol.remoting.decode_frame` (16 MiB limit). Requests are
dispatched by code to registered processors; each processor returns a response command, an awaitable
of one (replies may then go out of order, matched by ``opaque`` as upstream), or None for "no reply".

* Unknown codes → REQUEST_CODE_NOT_SUPPORTED (3) with remark `` request type N not supported``.
* Oneway requests (flag bit 1) never get a response.
* A processor exception → SYSTEM_ERROR (1) with the exception text as remark; the connection stays up.
* A malformed frame or one over 16 MiB → the connection is closed and logged; others keep working.
* Responses use the request's serialize type (JSON or ROCKETMQ).
* Responses received by the server (no request of ours is pending) are logged and dropped.
* ``connection_closed_listeners`` are told the peer ``"ip:port"`` of every closed connection (the name
  server drops brokers whose registration connection closed).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from connector.protocol.commitlog import HostAddress
from connector.protocol.errors import HAReplicaError, RemotingProtocolError
from connector.protocol.remoting import RemotingCommand, ResponseCode, decode_frame

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 256 * 1024


@dataclass
class RequestContext:
    """Per-request channel facts a processor needs: the peer address as RocketMQ stores it (bornHost)."""

    peer: HostAddress
    peer_text: str


Processor = Callable[[RequestContext, RemotingCommand], "RemotingCommand | Awaitable[RemotingCommand | None] | None"]


def peer_host_address(peername) -> HostAddress:
    """The remote socket address as Java sees it; IPv4-mapped IPv6 peers count as IPv4 (Inet4Address)."""
    host, port = peername[0], peername[1]
    addr = HostAddress.parse(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    if addr.is_v6 and addr.ip[:12] == b"\0" * 10 + b"\xff\xff":
        return HostAddress(addr.ip[12:], port)
    return addr


class RemotingServer:
    """Listens on ``host:port`` and serves registered request processors."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.processors: dict[int, Processor] = {}
        self._server: asyncio.base_events.Server | None = None
        self._conn_tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._pending: set[asyncio.Task] = set()
        self.connection_closed_listeners: list[Callable[[str], None]] = []  # called with the peer "ip:port"

    def register(self, codes: int | tuple[int, ...], processor: Processor) -> None:
        """Route requests with these codes to ``processor`` (a later registration wins)."""
        for code in (codes,) if isinstance(codes, int) else codes:
            self.processors[code] = processor

    async def start(self) -> None:
        """Bind and listen. Raises OSError when the port is taken."""
        self._server = await asyncio.start_server(self._serve, host=self.host, port=self.port,
                                                  reuse_address=True, backlog=1024, limit=READ_CHUNK_BYTES)
        log.info("remoting server listening host=%s listenPort=%d", self.host, self.port)

    async def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight replies finish briefly, close every connection."""
        await self.stop_accepting()
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=1.0)
        for w in list(self._writers):
            w.close()
        for t in list(self._conn_tasks):
            t.cancel()
        for t in list(self._conn_tasks):
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
        log.info("remoting server stopped")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conn_tasks.add(task)
        self._writers.add(writer)
        peername = writer.get_extra_info("peername")
        peer_text = f"{peername[0]}:{peername[1]}" if peername else "?"
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        ctx = RequestContext(peer_host_address(peername), peer_text)
        buf = bytearray()
        log.debug("remoting connection opened peer=%s", peer_text)
        reason = "peer closed"
        try:
            while True:
                data = await reader.read(READ_CHUNK_BYTES)
                if not data:
                    break
                buf += data
                replies: list[bytes] = []
                error = None
                while True:  # frames before a malformed one are still served, as Netty's decoder does
                    try:
                        decoded = decode_frame(buf)
                    except RemotingProtocolError as exc:
                        error = exc
                        break
                    if decoded is None:
                        break
                    cmd, used = decoded
                    del buf[:used]
                    reply = self._dispatch(ctx, cmd, writer)
                    if reply is not None:
                        replies.append(reply)
                if replies:  # one write per read chunk: pipelined requests get their replies in one segment
                    writer.write(b"".join(replies))
                if error is not None:
                    reason = f"malformed frame: {error}"
                    log.warning("remoting frame rejected, closing connection peer=%s error=%s", peer_text, error)
                    await writer.drain()
                    break
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            reason = f"socket {exc!r}"
        except asyncio.CancelledError:
            reason = "broker shutdown"
            raise
        finally:
            self._writers.discard(writer)
            writer.close()
            if task is not None:
                self._conn_tasks.discard(task)
            log.debug("remoting connection closed peer=%s reason=%s", peer_text, reason)
            for listener in self.connection_closed_listeners:
                try:
                    listener(peer_text)
                except Exception:  # noqa: BLE001 - a listener bug must not break the server
                    log.exception("connection-closed listener failed peer=%s", peer_text)

    def _dispatch(self, ctx: RequestContext, cmd: RemotingCommand, writer: asyncio.StreamWriter) -> bytes | None:
        """Run the processor; returns the encoded reply when it is ready now (None: no reply or later)."""
        if cmd.is_response:
            log.warning("remoting response with no pending request dropped peer=%s opaque=%d code=%d",
                        ctx.peer_text, cmd.opaque, cmd.code)
            return None
        processor = self.processors.get(cmd.code)
        if processor is None:
            log.warning("remoting request code not supported peer=%s code=%d", ctx.peer_text, cmd.code)
            return self._encode_reply(cmd, cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                        remark=f" request type {cmd.code} not supported"))
        try:
            result = processor(ctx, cmd)
        except HAReplicaError as exc:
            return self._encode_reply(cmd, cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(exc)))
        except Exception as exc:  # noqa: BLE001 - a processor bug must not kill the connection
            log.exception("remoting processor failed peer=%s code=%d", ctx.peer_text, cmd.code)
            return self._encode_reply(cmd, cmd.response(ResponseCode.SYSTEM_ERROR,
                                                        remark=f"{type(exc).__name__}: {exc}"))
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._finish(ctx, cmd, result, writer))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
            return None
        if result is None:
            return None
        return self._encode_reply(cmd, result)

    @staticmethod
    def _encode_reply(request: RemotingCommand, response: RemotingCommand) -> bytes | None:
        return None if request.is_oneway else response.encode()

    async def _finish(self, ctx: RequestContext, cmd: RemotingCommand, result: Awaitable,
                      writer: asyncio.StreamWriter) -> None:
        try:
            response = await result
        except Exception as exc:  # noqa: BLE001 - answered as SYSTEM_ERROR like upstream
            log.exception("remoting processor failed peer=%s code=%d", ctx.peer_text, cmd.code)
            response = cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
        data = self._encode_reply(cmd, response) if response is not None else None
        if data is not None and not writer.is_closing():
            writer.write(data)
