"""The broker's remoting server (RocketMQ 4.9.8 ``NettyRemotingServer`` + ``NettyRemotingAbstract``): frames in,
requests dispatched by code through one code → handler table (each processor's ``handlers()``), responses out.

A handler returns a response command, an awaitable of one (replies may then go out of order, matched by
``opaque``), or None for no reply. ``connection_closed_listeners`` are told the peer ``"ip:port"`` of every closed
connection (the name server drops brokers whose registration connection closed). Frames and reserved answers:
docs/protocol.md §4.1–§4.2; limits and rejected frames: docs/broker_stub.md "Connections and frames".
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from connector.errors import HAReplicaError, RemotingProtocolError
from connector.protocol.commitlog import HostAddress
from connector.protocol.remoting import RPC_ONEWAY_FLAG, RemotingCommand, ResponseCode, decode_frame

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 256 * 1024
DEFAULT_MAX_IDLE_S = 120.0  # NettyServerConfig.serverChannelMaxIdleTimeSeconds
DEFAULT_MAX_CONNECTIONS = 10000
DEFAULT_MAX_PENDING_FRAME_BYTES = 64 * 1024 * 1024
_REFUSAL_LOG_INTERVAL_S = 1.0


class ConnectionLimiter:
    """The ``serverMaxConnections`` cap of one listening port, with rate-limited refusal lines.

    ``try_acquire(peer)`` returns False (and logs at most one WARNING per second, counting the rest) when
    ``max_connections`` connections are open; ``release()`` frees a slot.
    """

    def __init__(self, what: str, max_connections: int) -> None:
        self.what = what
        self.max_connections = max_connections
        self.open = 0
        self.refused_total = 0
        self._unlogged = 0
        self._last_log = 0.0

    def try_acquire(self, peer: str) -> bool:
        if self.open < self.max_connections:
            self.open += 1
            return True
        self.refused_total += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._last_log >= _REFUSAL_LOG_INTERVAL_S:
            log.warning("%s connection refused: serverMaxConnections=%d reached peer=%s refusedSinceLastLine=%d",
                        self.what, self.max_connections, peer, self._unlogged)
            self._last_log = now
            self._unlogged = 0
        return False

    def release(self) -> None:
        self.open -= 1


class _Connection:
    """One served connection: its request context, writer, unfinished-frame buffer and last I/O time."""

    __slots__ = ("ctx", "writer", "buf", "last_io", "idle_closed")

    def __init__(self, ctx: RequestContext, writer: asyncio.StreamWriter) -> None:
        self.ctx = ctx
        self.writer = writer
        self.buf = bytearray()
        self.last_io = time.monotonic()
        self.idle_closed = False


@dataclass
class RequestContext:
    """Per-request channel facts a processor needs: the peer address as RocketMQ stores it (bornHost), and
    the connection's writer (None outside a server) for requests the broker sends to the client."""

    peer: HostAddress
    peer_text: str
    writer: asyncio.StreamWriter | None = None

    @property
    def active(self) -> bool:
        """True while the connection is open (Netty ``channel.isActive()``)."""
        return self.writer is not None and not self.writer.is_closing()

    def invoke_oneway(self, request: RemotingCommand) -> bool:
        """Send ``request`` to the client as a one-way request (NettyRemotingServer.invokeOneway): the oneway
        flag is set and no answer is awaited. False when the connection is closed (nothing sent)."""
        if not self.active:
            return False
        request.flag |= RPC_ONEWAY_FLAG
        assert self.writer is not None
        self.writer.write(request.encode())
        return True


Processor = Callable[[RequestContext, RemotingCommand], "RemotingCommand | Awaitable[RemotingCommand | None] | None"]
"""A request handler: ``(channel context, request) → response | awaitable of one | None`` (no reply)."""


def request_only(handler: Callable[[RemotingCommand], RemotingCommand | None]) -> Processor:
    """A :data:`Processor` for a handler that needs only the request, not the channel it came on."""
    return lambda _ctx, request: handler(request)


def peer_host_address(peername) -> HostAddress:
    """The remote socket address as Java sees it; IPv4-mapped IPv6 peers count as IPv4 (Inet4Address)."""
    host, port = peername[0], peername[1]
    addr = HostAddress.parse(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    if addr.is_v6 and addr.ip[:12] == b"\0" * 10 + b"\xff\xff":
        return HostAddress(addr.ip[12:], port)
    return addr


class RemotingServer:
    """Listens on ``host:port`` and serves registered request processors."""

    def __init__(self, host: str, port: int, *, max_idle_s: float = DEFAULT_MAX_IDLE_S,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_pending_frame_bytes: int = DEFAULT_MAX_PENDING_FRAME_BYTES) -> None:
        """``max_idle_s`` ≤ 0 turns the idle timeout off; limits as in the module doc."""
        self.host = host
        self.port = port
        self.max_idle_s = max_idle_s
        self.limiter = ConnectionLimiter("remoting", max_connections)
        self.max_pending_frame_bytes = max_pending_frame_bytes
        self.pending_frame_bytes = 0  # bytes of unfinished frames buffered over all connections
        self._conns: dict[asyncio.StreamWriter, _Connection] = {}
        self._sweeper: asyncio.Task | None = None
        self.processors: dict[int, Processor] = {}
        self._server: asyncio.base_events.Server | None = None
        self._conn_tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._pending: set[asyncio.Task] = set()
        self.connection_closed_listeners: list[Callable[[str], None]] = []  # called with the peer "ip:port"
        # aclEnable: checks each request before its processor (broker_stub.remoting.acl.PlainAccessValidator)
        self.access_validator = None

    def register(self, codes: int | tuple[int, ...], processor: Processor) -> None:
        """Route requests with these codes to ``processor`` (a later registration wins)."""
        for code in (codes,) if isinstance(codes, int) else codes:
            self.processors[code] = processor

    def register_handlers(self, handlers: Mapping[int, Processor]) -> None:
        """Add a processor's code → handler table (``handlers()`` of a broker processor; a later one wins)."""
        self.processors.update(handlers)

    async def start(self) -> None:
        """Bind and listen. Raises OSError when the port is taken."""
        self._server = await asyncio.start_server(self._serve, host=self.host, port=self.port,
                                                  reuse_address=True, backlog=1024, limit=READ_CHUNK_BYTES)
        if self.max_idle_s > 0:
            self._sweeper = asyncio.create_task(self._idle_sweep(), name=f"RemotingServer.idle:{self.port}")
        log.debug("remoting server listening host=%s listenPort=%d serverChannelMaxIdleTimeSeconds=%g "
                 "serverMaxConnections=%d serverMaxPendingFrameBytes=%d", self.host, self.port, self.max_idle_s,
                 self.limiter.max_connections, self.max_pending_frame_bytes)

    async def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()

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
        log.debug("remoting server stopped")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer_text = f"{peername[0]}:{peername[1]}" if peername else "?"
        if not self.limiter.try_acquire(peer_text):
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._conn_tasks.add(task)
        self._writers.add(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        conn = _Connection(RequestContext(peer_host_address(peername), peer_text, writer), writer)
        self._conns[writer] = conn
        log.debug("remoting connection opened peer=%s", peer_text)
        reason = "peer closed"
        try:
            reason = await self._read_frames(reader, conn)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            reason = f"socket {exc!r}"
        except asyncio.CancelledError:
            reason = "broker shutdown"
            raise
        finally:
            self.pending_frame_bytes -= len(conn.buf)
            self.limiter.release()
            self._writers.discard(writer)
            self._conns.pop(writer, None)
            writer.close()
            if task is not None:
                self._conn_tasks.discard(task)
            log.debug("remoting connection closed peer=%s reason=%s", peer_text, reason)
            for listener in self.connection_closed_listeners:
                try:
                    listener(peer_text)
                except Exception:  # noqa: BLE001 - a listener bug must not break the server
                    log.exception("connection-closed listener failed peer=%s", peer_text)

    async def _idle_sweep(self) -> None:
        """Close connections without a byte read or written for ``max_idle_s`` (checked 4× per period)."""
        period = min(max(self.max_idle_s / 4, 0.05), 10.0)
        while True:
            await asyncio.sleep(period)
            deadline = time.monotonic() - self.max_idle_s
            for conn in list(self._conns.values()):
                if conn.last_io < deadline and not conn.idle_closed:
                    conn.idle_closed = True
                    log.info("remoting connection closed: idle for serverChannelMaxIdleTimeSeconds=%g peer=%s",
                             self.max_idle_s, conn.ctx.peer_text)
                    conn.writer.close()

    async def _read_frames(self, reader: asyncio.StreamReader, conn: _Connection) -> str:
        """Serve frames until the peer closes; returns why the connection ends (see module doc)."""
        writer = conn.writer
        while True:
            data = await reader.read(READ_CHUNK_BYTES)
            if not data or conn.idle_closed:
                return "idle" if conn.idle_closed else "peer closed"
            conn.last_io = time.monotonic()
            conn.buf += data
            self.pending_frame_bytes += len(data)
            replies: list[bytes] = []
            error = None
            before = len(conn.buf)
            while True:  # frames before a malformed one are still served, as Netty's decoder does
                try:
                    decoded = decode_frame(conn.buf)
                except RemotingProtocolError as exc:
                    error = str(exc)
                    break
                except Exception as exc:  # noqa: BLE001 - a decoder bug is still one rejection line
                    error = f"{type(exc).__name__}: {exc}"
                    break
                if decoded is None:
                    break
                cmd, used = decoded
                del conn.buf[:used]
                reply = self._dispatch(conn.ctx, cmd, writer)
                if reply is not None:
                    replies.append(reply)
            self.pending_frame_bytes -= before - len(conn.buf)
            if not conn.buf:
                conn.buf = bytearray()  # give back the capacity a big frame left behind
            if replies:  # one write per read chunk: pipelined requests get their replies in one segment
                writer.write(b"".join(replies))
                conn.last_io = time.monotonic()
            if error is None and conn.buf and self.pending_frame_bytes > self.max_pending_frame_bytes:
                error = (f"unfinished frames of all connections hold {self.pending_frame_bytes} bytes, over "
                         f"serverMaxPendingFrameBytes={self.max_pending_frame_bytes} (this one: {len(conn.buf)})")
            if error is not None:
                log.warning("remoting frame rejected, closing connection peer=%s error=%s", conn.ctx.peer_text, error)
                await writer.drain()
                return f"malformed frame: {error}"
            await writer.drain()

    def _dispatch(self, ctx: RequestContext, cmd: RemotingCommand, writer: asyncio.StreamWriter) -> bytes | None:
        """Run the processor; returns the encoded reply when it is ready now (None: no reply or later)."""
        if cmd.is_response:
            log.warning("remoting response with no pending request dropped peer=%s opaque=%d code=%d",
                        ctx.peer_text, cmd.opaque, cmd.code)
            return None
        processor = self.processors.get(cmd.code)
        try:
            if self.access_validator is not None:
                refused = self.access_validator.check(cmd, ctx.peer.ip_text())
                if refused is not None:
                    log.warning("acl refused request peer=%s code=%d: %s", ctx.peer_text, cmd.code, refused)
                    return self._encode_reply(cmd, cmd.response(ResponseCode.SYSTEM_ERROR, remark=refused))
            if processor is None:
                log.warning("remoting request code not supported peer=%s code=%d", ctx.peer_text, cmd.code)
                return self._encode_reply(cmd, cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                            remark=f" request type {cmd.code} not supported"))
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
            conn = self._conns.get(writer)
            if conn is not None:
                conn.last_io = time.monotonic()
