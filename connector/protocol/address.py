"""Socket addresses as RocketMQ configurations and name servers write them: ``host:port``.

The one parser and joiner of the project (options ``brokers``/``slaves``, the broker stub's
``namesrvAddr``/``haMasterAddress``, every client's target). Rules:

* ``host:port`` with a host name or IPv4 literal, or ``[v6]:port`` with an IPv6 literal in brackets;
* the port is decimal, within 1..65535;
* ``bare_ipv6=True`` also accepts an IPv6 literal without brackets, split at the *last* colon
  (``::1:10911`` → ``::1``, 10911) — how RocketMQ 4.9.8's ``RemotingHelper.string2SocketAddress`` reads
  an address, and how a Java broker on IPv6 writes its own (``RemotingUtil.socketAddress2String``).

Pure: no sockets, no name resolution.
"""

from __future__ import annotations

import ipaddress

from connector.errors import AddressError
from connector.protocol.broker import listen_port_of_ha, vip_listen_port


def split_host_port(text: str, what: str = "address", *, bare_ipv6: bool = False) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` → ``(host, port)``, the host without brackets.

    Args:
        text: the address; surrounding blanks are ignored.
        what: what the address is, for the error message (e.g. ``"HA address of broker-a"``).
        bare_ipv6: also accept an unbracketed IPv6 literal before the last colon (module doc).

    Raises AddressError (a ValueError) ``"<what> '<text>' is not host:port with a port in 1..65535
    (IPv6 as [addr]:port)"`` for anything else.
    """
    stripped = text.strip()
    if stripped.startswith("["):
        host, sep, port = stripped[1:].partition("]:")
        if sep and not _is_ipv6(host):
            sep = ""
    else:
        host, sep, port = stripped.rpartition(":")
        if ":" in host and not (bare_ipv6 and _is_ipv6(host)):
            sep = ""
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise AddressError(f"{what} {stripped!r} is not host:port with a port in 1..65535 (IPv6 as [addr]:port)")
    return host, int(port)


def join_host_port(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets (``[::1]:10911``): the form :func:`split_host_port` reads."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def vip_channel_address(addr: str) -> str:
    """``MixAll.brokerVIPChannel(true, addr)``: the same host with the broker's VIP remoting port
    (:func:`connector.protocol.broker.vip_listen_port`). Raises AddressError."""
    host, port = split_host_port(addr, bare_ipv6=True)
    return join_host_port(host, vip_listen_port(port))


def remoting_address_of_ha(addr: str) -> str:
    """The remoting address of the broker whose HA address is ``addr``: the same host with
    :func:`connector.protocol.broker.listen_port_of_ha` (``haListenPort`` = ``listenPort + 1``). Raises
    AddressError."""
    host, port = split_host_port(addr, bare_ipv6=True)
    return join_host_port(host, listen_port_of_ha(port))


def _is_ipv6(host: str) -> bool:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True
