"""Opening the TCP connections every blocking client of the project uses (remoting, producer, HA fetch)."""

from __future__ import annotations

import socket

from connector.protocol.address import split_host_port


def open_connection(addr: str, timeout_s: float, receive_buffer_bytes: int = 0) -> socket.socket:
    """A connected TCP socket to ``addr`` (``host:port``, IPv6 as ``[addr]:port`` or bare, RocketMQ's rule),
    with ``TCP_NODELAY`` set (small requests and reports go out at once) and ``timeout_s`` (seconds) as
    connect timeout and initial socket timeout. ``receive_buffer_bytes`` > 0 sets ``SO_RCVBUF`` before
    connecting, so that the TCP window scale the handshake agrees on can use it (Linux doubles the value and
    caps it at ``net.core.rmem_max``); 0 leaves the operating system's.

    Raises AddressError (a ValueError) for a malformed address, OSError (TimeoutError, ConnectionError...)
    when the connection cannot be made.
    """
    host, port = split_host_port(addr, bare_ipv6=True)
    if receive_buffer_bytes > 0:
        sock = _connect_with_receive_buffer(host, port, timeout_s, receive_buffer_bytes)
    else:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        sock.close()
        raise
    return sock


def _connect_with_receive_buffer(host: str, port: int, timeout_s: float, receive_buffer_bytes: int) -> socket.socket:
    """``socket.create_connection`` with ``SO_RCVBUF`` set before ``connect``: each address of ``host`` in turn,
    the last one's OSError raised when none connects."""
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            sock.settimeout(timeout_s)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error if error is not None else OSError(f"no address for {host}")
