"""Opening an HA fetch of one broker set's CommitLog bytes, for the tasks' reads and the driver's history checks.

Both sides of the source read through here: the one HA fetcher speaking the set's HA protocol (classic or AutoSwitch),
configured from the query's ``FetchSettings``, and in 5.x controller mode the member that is master now
(docs/source.md "Offsets, batches, partitions", "RocketMQ 5.x controller mode").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from connector.client.admin import BrokerAdminClient
from connector.client.ha import HARangeFetcher
from connector.client.ha_autoswitch import probe_master
from connector.errors import BrokerAdminError, HAReplicaError
from connector.protocol.acl import AclCredentials
from connector.settings import FetchSettings

log = logging.getLogger(__name__)

#: a report offset no master holds: probe_master then reads the handshake only and reports nothing
NO_REPORT = 1 << 62


def open_fetcher(fetch: FetchSettings, ha_addr: str, start: int, end: int, *, broker: str, protocol: str,
                 server_is_slave: bool, fail_on_data_loss: bool, **extra) -> HARangeFetcher:
    """The HA fetcher of CommitLog bytes ``[start, end)`` at ``ha_addr``, configured from the query's ``fetch``
    settings (timeouts, retries, heartbeat, reconnect backoff, outage bound): a :class:`HARangeFetcher`
    speaking ``protocol`` (``"classic"``, or ``"autoswitch"`` for 5.x controller mode). ``extra``: the
    fetcher's other keywords (``offsets_probe``, ``keep_views``, controller-mode ``locate_master``, ...)."""
    return HARangeFetcher(ha_addr, start, end, protocol=protocol, broker=broker, settings=fetch,
                          fail_on_data_loss=fail_on_data_loss, server_is_slave=server_is_slave, **extra)


def broker_role(remoting_addr: str, timeout_ms: int, credentials: AclCredentials | None = None) -> str | None:
    """The broker's ``brokerRole`` (GET_BROKER_CONFIG), e.g. ``SYNC_MASTER`` or ``SLAVE``; None when it does
    not answer."""
    try:
        with BrokerAdminClient(remoting_addr, timeout_ms, credentials) as admin:
            return admin.broker_config().get("brokerRole", "").strip().upper() or None
    except BrokerAdminError:
        return None


def is_master_role(role: str | None) -> bool:
    """True for ``SYNC_MASTER`` / ``ASYNC_MASTER`` (a controller-mode master reports SYNC_MASTER)."""
    return role is not None and role.endswith("MASTER")


def find_master(members: Sequence[tuple[str, str]], *, connect_timeout_ms: int, read_timeout_ms: int,
                credentials: AclCredentials | None = None) -> tuple[str, str, int] | None:
    """Among ``members`` (``(ha_addr, remoting_addr)`` pairs), the one that says it is a master, as
    ``(ha_addr, remoting_addr, last epoch)``; of several, the highest epoch (a deposed master that has not
    noticed yet has a lower one). None when no member is a reachable master (an election may be under way).
    Reads handshakes only: nothing is reported to any master."""
    best: tuple[str, str, int] | None = None
    for ha_addr, remoting_addr in members:
        if not is_master_role(broker_role(remoting_addr, read_timeout_ms, credentials)):
            continue
        try:
            epoch = probe_master(ha_addr, NO_REPORT, connect_timeout_ms=connect_timeout_ms,
                                 read_timeout_ms=read_timeout_ms).handshake.last_epoch
        except (OSError, HAReplicaError) as exc:
            log.info("controller-mode member %s says it is master but its HA port does not answer: %s", ha_addr, exc)
            continue
        if best is None or epoch > best[2]:
            best = (ha_addr, remoting_addr, epoch)
    return best


def master_locator(members: Sequence[tuple[str, str]], connect_timeout_ms: int, read_timeout_ms: int,
                   credentials: AclCredentials | None = None) -> Callable[[], tuple[str, str] | None]:
    """A function returning the current master's ``(ha_addr, remoting_addr)`` among ``members`` (None while
    none is), for :class:`connector.client.ha.HARangeFetcher`'s ``locate_master`` (AutoSwitch)."""
    def locate() -> tuple[str, str] | None:
        found = find_master(members, connect_timeout_ms=connect_timeout_ms, read_timeout_ms=read_timeout_ms,
                            credentials=credentials)
        return None if found is None else (found[0], found[1])
    return locate
