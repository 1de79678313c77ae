"""The name server's GET_BROKER_CLUSTER_INFO (106) answer as values, and a name-server address list as addresses.

The body is RocketMQ's ``ClusterInfo`` as 4.9.8's fastjson writes it (docs/protocol.md §4.7,
docs/source.md "Discovery"): ``brokerAddrTable`` brokerName → ``BrokerData`` ``{cluster, brokerName,
brokerAddrs {brokerId: "host:port"}}`` and ``clusterAddrTable`` cluster → [brokerName]. ``brokerAddrs`` is a
``HashMap<Long, String>``, whose keys fastjson writes bare (``{0:"10.0.0.1:10911"}``), which is not strict
JSON; :func:`fastjson_body` reads that form. Pure: bytes in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connector.errors import AddressError, RemotingProtocolError
from connector.protocol.address import split_host_port
from connector.protocol.broker import MASTER_ID
from connector.protocol.fastjson import loads

#: separator of the addresses in a name-server address list (RocketMQ's syntax: host:port;host:port)
NAMESRV_ADDR_SEPARATOR = ";"


def fastjson_body(body: bytes | str) -> object:
    """A remoting body as fastjson 1.x writes it (:func:`connector.protocol.fastjson.loads`: bare integer map keys
    come out as strings). Raises RemotingProtocolError when it is not UTF-8 or not JSON."""
    try:
        return loads(body)
    except ValueError as exc:  # UnicodeDecodeError too
        raise RemotingProtocolError(f"fastjson body is not JSON: {exc}") from None


@dataclass(frozen=True, slots=True)
class BrokerData:
    """One broker set of the route: its cluster, brokerName and members, brokerId → remoting ``host:port``
    (``MixAll.MASTER_ID`` 0 is the master; RocketMQ's ``BrokerData``)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        """The master's remoting address, None when the route has no brokerId 0."""
        return self.broker_addrs.get(MASTER_ID)

    @property
    def slave_addrs(self) -> tuple[str, ...]:
        """The slaves' remoting addresses in brokerId order."""
        return tuple(self.broker_addrs[i] for i in sorted(self.broker_addrs) if i != MASTER_ID)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """RocketMQ's ``ClusterInfo``: ``broker_addr_table`` brokerName → :class:`BrokerData`; ``cluster_addr_table``
    cluster → brokerNames (the order the body lists them)."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, tuple[str, ...]]


def decode_cluster_info(body: bytes) -> ClusterInfo:
    """Decode a GET_BROKER_CLUSTER_INFO body (module doc).

    Raises RemotingProtocolError naming the field (``brokerAddrTable.<name>.brokerAddrs``, ...) that is
    missing or of the wrong type. An empty body is a name server that knows no broker: both tables empty.
    """
    if not body:
        return ClusterInfo({}, {})
    obj = fastjson_body(body)
    if not isinstance(obj, dict):
        raise RemotingProtocolError("GET_BROKER_CLUSTER_INFO body is not a JSON object")
    table = obj.get("brokerAddrTable") or {}
    clusters = obj.get("clusterAddrTable") or {}
    if not isinstance(table, dict) or not isinstance(clusters, dict):
        raise RemotingProtocolError("GET_BROKER_CLUSTER_INFO body: brokerAddrTable and clusterAddrTable must be "
                                    "JSON objects")
    brokers: dict[str, BrokerData] = {}
    for name, data in table.items():
        where = f"GET_BROKER_CLUSTER_INFO body: field brokerAddrTable.{name}"
        if not isinstance(data, dict) or not isinstance(data.get("brokerAddrs") or {}, dict):
            raise RemotingProtocolError(f"{where} is not a BrokerData object with a brokerAddrs map")
        addrs: dict[int, str] = {}
        for key, addr in (data.get("brokerAddrs") or {}).items():
            try:
                broker_id = int(key)
            except ValueError:
                raise RemotingProtocolError(f"{where}.brokerAddrs has brokerId {key!r}, not an integer") from None
            if not isinstance(addr, str):
                raise RemotingProtocolError(f"{where}.brokerAddrs.{key} is {addr!r}, not a host:port string")
            addrs[broker_id] = addr
        brokers[str(name)] = BrokerData(str(data.get("cluster") or ""), str(data.get("brokerName") or name), addrs)
    cluster_table: dict[str, tuple[str, ...]] = {}
    for cluster, names in clusters.items():
        if not isinstance(names, list):
            raise RemotingProtocolError(f"GET_BROKER_CLUSTER_INFO body: field clusterAddrTable.{cluster} is not a "
                                        "list of brokerNames")
        cluster_table[str(cluster)] = tuple(str(n) for n in names)
    return ClusterInfo(brokers, cluster_table)


def split_namesrv_addr(text: str) -> tuple[str, ...]:
    """``host:port;host:port`` (RocketMQ's name-server address list) → the addresses in order, blanks and empty entries
    dropped. Raises AddressError naming the entry that is not ``host:port``, or when none is given."""
    addrs = tuple(a.strip() for a in str(text).split(NAMESRV_ADDR_SEPARATOR) if a.strip())
    if not addrs:
        raise AddressError(f"name server address list {text!r} names no host:port")
    for addr in addrs:
        split_host_port(addr, "name server address", bare_ipv6=True)
    return addrs
