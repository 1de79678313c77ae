"""Stored host addresses (BORNHOST, STOREHOSTADDRESS) and the offset message id (docs/protocol.md §1.8)."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from connector.protocol.address import split_host_port

_PORT = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class HostAddress:
    """A socket address as stored in BORNHOST / STOREHOSTADDRESS: raw IP bytes (4 or 16) and port."""

    ip: bytes
    port: int

    @classmethod
    def parse(cls, text: str) -> HostAddress:
        """Parse ``"1.2.3.4:10911"`` or ``"[::1]:10911"`` (:func:`connector.protocol.address.split_host_port`,
        bare IPv6 accepted as RocketMQ writes it). Raises ValueError for anything else, a host name included."""
        host, port = split_host_port(text, bare_ipv6=True)
        return cls(ipaddress.ip_address(host).packed, port)

    @property
    def is_v6(self) -> bool:
        return len(self.ip) == 16

    def ip_text(self) -> str:
        """The IP as Java's ``InetAddress.getHostAddress()`` prints it (IPv6: 8 groups, uncompressed)."""
        if len(self.ip) == 4:
            return ".".join(str(b) for b in self.ip)
        return ":".join(f"{int.from_bytes(self.ip[i:i + 2], 'big'):x}" for i in range(0, 16, 2))

    def __str__(self) -> str:
        return f"{self.ip_text()}:{self.port}"


def offset_msg_id(store_host: HostAddress, commit_log_offset: int) -> str:
    """Offset msgId: upper-case hex of store IP + int port + long offset (docs/protocol.md §1.8), 32 or 56 chars."""
    return (store_host.ip + _PORT.pack(store_host.port) + _I64.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[HostAddress, int]:
    """Inverse of :func:`offset_msg_id` (MessageDecoder.decodeMessageId): 32 chars means IPv4.

    Raises ValueError for text that is not hex of the right length.
    """
    raw = bytes.fromhex(msg_id)
    ip_len = 4 if len(msg_id) == 32 else 16
    if len(raw) != ip_len + 12:
        raise ValueError(f"msgId {msg_id!r} has {len(msg_id)} hex characters, expected 32 or 56")
    port = _PORT.unpack_from(raw, ip_len)[0]
    offset = _I64.unpack_from(raw, ip_len + 4)[0]
    return HostAddress(raw[:ip_len], port), offset
