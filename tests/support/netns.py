"""Hosts for tests: Linux network namespaces joined by one bridge, each with its own IPv4 address, none on loopback.

:class:`NetworkLab` makes a bridge in the root namespace (address ``10.213.N.1/24``: the "driver host" where the
tests and Spark's driver run) and one namespace per :meth:`NetworkLab.host` (a broker, a name server or a Spark
Worker with its executors), linked to the bridge by a veth pair (``10.213.N.<k>/24``). A process runs on a host
under :attr:`NetHost.prefix` (``ip netns exec NAME``); :meth:`NetHost.link_down` cuts the host's cable (its veth
end in the root namespace), so peers see a silent network partition, not a reset. No route leaves the lab:
traffic stays between its namespaces. Needs root and ``ip`` (iproute2); :meth:`NetworkLab.close` removes
everything it made.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass, field

SUBNET_PREFIX = "10.213"


def _ip(*args: str, netns: str | None = None) -> None:
    cmd = (["ip", "netns", "exec", netns, "ip"] if netns else ["ip"]) + list(args)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")


@dataclass
class NetHost:
    """One namespace host: ``name`` (the namespace), ``ip`` (its address on the lab bridge)."""

    name: str
    ip: str
    veth_root: str
    veth_host: str
    extra_ips: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> tuple[str, ...]:
        """Command prefix that runs a program on this host."""
        return ("ip", "netns", "exec", self.name)

    @property
    def netns_inode(self) -> int:
        """The host's network namespace as an inode number: ``os.stat("/proc/PID/ns/net").st_ino`` of every
        process running on this host equals it."""
        return os.stat(f"/run/netns/{self.name}").st_ino

    def add_address(self, ip: str) -> None:
        """Give the host a second address on the bridge (e.g. a separate ``brokerIP2``)."""
        _ip("addr", "add", f"{ip}/24", "dev", self.veth_host, netns=self.name)
        self.extra_ips.append(ip)

    def link_down(self) -> None:
        """Unplug the host: its packets are dropped silently in both directions until :meth:`link_up`."""
        _ip("link", "set", self.veth_root, "down")

    def link_up(self) -> None:
        _ip("link", "set", self.veth_root, "up")


class NetworkLab:
    """A bridge and its namespace hosts (module doc). Use as a context manager."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(2)
        self.subnet = f"{SUBNET_PREFIX}.{int(self.token, 16) % 200 + 20}"
        self.bridge = f"hrb{self.token}"
        self.driver_ip = f"{self.subnet}.1"
        self.hosts: list[NetHost] = []
        _ip("link", "add", self.bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{self.driver_ip}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except RuntimeError:
            self.close()
            raise

    def host(self, label: str) -> NetHost:
        """A new namespace host ``hr-<token>-<label>`` with the next address of the lab's /24."""
        k = len(self.hosts) + 2
        host = NetHost(f"hr-{self.token}-{label}", f"{self.subnet}.{k * 10}", f"hr{self.token}r{k}",
                       f"hr{self.token}n{k}")
        subprocess.run(["ip", "netns", "add", host.name], check=True, capture_output=True, timeout=10)
        self.hosts.append(host)
        _ip("link", "add", host.veth_root, "type", "veth", "peer", "name", host.veth_host)
        _ip("link", "set", host.veth_host, "netns", host.name)
        _ip("link", "set", host.veth_root, "master", self.bridge)
        _ip("link", "set", host.veth_root, "up")
        _ip("addr", "add", f"{host.ip}/24", "dev", host.veth_host, netns=host.name)
        _ip("link", "set", host.veth_host, "up", netns=host.name)
        _ip("link", "set", "lo", "up", netns=host.name)
        return host

    def close(self) -> None:
        """Delete every namespace (their veth ends go with them) and the bridge; errors are ignored."""
        for host in self.hosts:
            subprocess.run(["ip", "link", "del", host.veth_root], capture_output=True, timeout=10)
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=10)

    def __enter__(self) -> NetworkLab:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
