"""A RocketMQ 4.9.8 broker's fixed numbers: its ports, the brokerId of a master, the permission bits.

* Ports (docs/protocol.md §2.1): the remoting port is ``listenPort``; the HA port is ``listenPort + 1``
  (``BrokerStartup`` sets ``haListenPort`` so), the VIP ("fast") remoting port ``listenPort - 2``
  (``MixAll.brokerVIPChannel``; a slave's GET_ALL_TOPIC_CONFIG goes there, §3.2).
* ``MASTER_ID``: a master is brokerId 0, a slave any brokerId > 0 (``MixAll.MASTER_ID``, §2.1, §3.1).
* Permission bits of a topic (``TopicConfig.perm``) and of a broker (``brokerPermission``):
  ``PermName``, docs/protocol.md §3.3.

Pure integers; the connector, the broker stub and the test peers import them. Address forms
(``host:port``) of the same rules are in :mod:`connector.protocol.address`.
"""

from __future__ import annotations

MASTER_ID = 0  # MixAll.MASTER_ID: the brokerId of a master

PERM_PRIORITY = 0x8  # PermName.PERM_PRIORITY (not a broker permission)
PERM_READ = 0x4  # PermName.PERM_READ
PERM_WRITE = 0x2  # PermName.PERM_WRITE
PERM_INHERIT = 0x1  # PermName.PERM_INHERIT: a topic created from this one (TBW102) inherits its config
PERM_READ_WRITE = PERM_READ | PERM_WRITE  # 6: a new topic's and a broker's default permission

_HA_PORT_OFFSET = 1
_VIP_PORT_OFFSET = -2


def ha_listen_port(listen_port: int) -> int:
    """The HA port of a broker whose remoting port is ``listen_port``: ``listenPort + 1`` (docs/protocol.md §2.1)."""
    return listen_port + _HA_PORT_OFFSET


def listen_port_of_ha(ha_port: int) -> int:
    """The remoting port of a broker whose HA port is ``ha_port`` (``haPort - 1``): the inverse of
    :func:`ha_listen_port`."""
    return ha_port - _HA_PORT_OFFSET


def vip_listen_port(listen_port: int) -> int:
    """The VIP ("fast") remoting port of a broker whose remoting port is ``listen_port``: ``listenPort - 2``
    (``MixAll.brokerVIPChannel``, docs/protocol.md §2.1)."""
    return listen_port + _VIP_PORT_OFFSET


def broker_ports(listen_port: int, *, vip: bool = True) -> tuple[int, ...]:
    """Every port a broker with remoting port ``listen_port`` binds: remoting, HA and (``vip``) VIP."""
    return (listen_port, ha_listen_port(listen_port)) + ((vip_listen_port(listen_port),) if vip else ())
