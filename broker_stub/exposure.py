"""What a broker started with RocketMQ 4.9.8's open defaults exposes, said once at start: :func:`open_exposure` words
the one WARNING line the broker logs when it listens beyond loopback with the remoting or HA port open, naming the
keys that close each. What is open and why the defaults stay: docs/security.md "Hardening checklist".
"""

from __future__ import annotations

import ipaddress

from broker_stub.config_rules import BrokerConfigError, resolve_host


def _beyond_loopback(key: str, host: str) -> bool:
    """True unless ``host`` is a loopback address (``0.0.0.0`` and ``::`` listen on every interface)."""
    try:
        return not ipaddress.ip_address(resolve_host(key, host)).is_loopback
    except BrokerConfigError:  # refused at start before this is asked; be safe if not
        return True


def open_exposure(cfg) -> str | None:
    """The WARNING text for a broker (:class:`broker_stub.config.BrokerStubConfig`) that listens beyond loopback
    with 4.9.8's open defaults, or None when every port it listens on beyond loopback is closed by its key.

    Checked: the remoting ports (``brokerIP1``: main and VIP) without ``aclEnable=true``; the HA port
    (``brokerIP2``) without ``haAllowedAddresses``; on a SYNC_MASTER the HA port without
    ``haReplicaAddresses``.
    """
    open_parts: list[str] = []
    keys: list[str] = []
    remoting = f"{cfg.broker_ip1}:{cfg.listen_port}"
    ha = f"{cfg.broker_ip2}:{cfg.ha_listen_port}"
    if _beyond_loopback("brokerIP1", cfg.broker_ip1) and not cfg.broker.aclEnable:
        open_parts.append(f"remoting {remoting} (and VIP port {cfg.vip_listen_port}) has no ACL: any client can "
                          "send and run admin commands such as DELETE_EXPIRED_COMMITLOG")
        keys.append("aclEnable=true with plain_acl.yml")
    if _beyond_loopback("brokerIP2", cfg.broker_ip2):
        if not cfg.store.haAllowedAddresses.strip():
            open_parts.append(f"HA {ha} serves the whole CommitLog to any peer")
            keys.append("haAllowedAddresses")
        if cfg.store.brokerRole == "SYNC_MASTER" and not cfg.store.haReplicaAddresses.strip():
            open_parts.append("any HA peer's reports count as replica acks, so producers get SEND_OK for messages "
                              "no slave holds")
            keys.append("haReplicaAddresses")
    if not open_parts:
        return None
    return (f"broker open to the network as RocketMQ 4.9.8 is by default: {'; '.join(open_parts)}; close it with "
            f"{', '.join(keys)} (docs/security.md, 'Hardening checklist')")
