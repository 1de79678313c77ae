"""Opening the TCP connections every blocking client of the project uses (remoting, producer, HA fetch)."""

from __future__ import annotations

import socket

from connector.protocol.address import split_host_port


def open_connection(addr: str, timeout_s: float) -> socket.socket:
    """A connected TCP socket to ``addr`` (``host:port``, IPv6 as ``[addr]:port`` or bare, RocketMQ's rule),
    with ``TCP_NODELAY`` set (small requests and reports go out at once) and ``timeout_s`` (seconds) as
    connect timeout and initial socket timeout.

    Raises AddressError (a ValueError) for a malformed address, OSError (TimeoutError, ConnectionError...)
    when the connection cannot be made.
    """
    host, port = split_host_port(addr, bare_ipv6=True)
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        sock.close()
        raise
    return sock
