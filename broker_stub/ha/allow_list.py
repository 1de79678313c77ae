"""HA-port address lists, a stub extension RocketMQ 4.9.8 has none of: ``haAllowedAddresses`` (who may connect to
the HA port) and ``haReplicaAddresses`` (whose reports count as replica acks), parsed from IPv4/IPv6 addresses
and CIDR networks. What they do and their syntax: docs/security.md "HA port".
"""

from __future__ import annotations

import ipaddress
import logging
import time

log = logging.getLogger(__name__)

_REFUSAL_LOG_INTERVAL_S = 1.0
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(key: str, text: str | None) -> tuple[Network, ...]:
    """The networks of an address-list value (``key`` names the config key in errors).

    Returns () for an empty value. Raises ValueError naming the key and the bad entry.
    """
    nets = []
    for entry in (text or "").replace(";", ",").split(","):
        entry = entry.strip()
        if not entry:
            continue
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"config key {key}: {entry!r} is not an IP address or CIDR network "
                             "(e.g. 10.0.0.11 or 10.0.0.0/24)") from None
    return tuple(nets)


def _matches(nets: tuple[Network, ...], host: str) -> bool:
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr.version == n.version and addr in n for n in nets)


class HAAddressPolicy:
    """Who may connect to the HA port and whose acks count (the two lists above)."""

    def __init__(self, allowed: str | None = None, replicas: str | None = None) -> None:
        """Raises ValueError (naming ``haAllowedAddresses`` / ``haReplicaAddresses``) for a bad entry."""
        self.allowed = parse_networks("haAllowedAddresses", allowed)
        self.replicas = parse_networks("haReplicaAddresses", replicas)
        self.refused_total = 0
        self._unlogged = 0
        self._last_log = 0.0

    def admit(self, host: str, port: int) -> bool:
        """True when ``host`` may connect; otherwise counts and (rate-limited) logs the refusal."""
        if not self.allowed or _matches(self.allowed, host):
            return True
        self.refused_total += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._last_log >= _REFUSAL_LOG_INTERVAL_S:
            log.warning("ha connection refused: peer %s:%d not in haAllowedAddresses refusedSinceLastLine=%d",
                        host, port, self._unlogged)
            self._last_log = now
            self._unlogged = 0
        return False

    def is_replica(self, host: str) -> bool:
        """True when reports from ``host`` count as replica acks (every peer when the list is empty)."""
        return not self.replicas or _matches(self.replicas, host)
