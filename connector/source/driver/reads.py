"""The driver's small HA reads of a broker set's CommitLog, the byte source of the history checks.

:class:`DriverReads` is the :class:`connector.source.driver.history.CommitLogBytes` the reader hands
:mod:`connector.source.driver.history` (docs/source.md "Rewritten history").
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.protocol.ha import HA_PROTOCOL_CLASSIC
from connector.settings import FetchSettings
from connector.source.driver.broker_view import BrokerSetView
from connector.source.fetch import open_fetcher


def fetch_range(fetch: FetchSettings, ha_addr: str, start: int, end: int, *, broker: str, server_is_slave: bool,
                protocol: str = HA_PROTOCOL_CLASSIC) -> bytes:
    """CommitLog bytes ``[start, end)`` over the HA port, for the driver's history checks
    (:mod:`connector.source.driver.history`), reporting ``start`` (see :mod:`connector.client.ha` for why a report
    acknowledges nothing new when ``start`` is already landed); ``protocol``: ``"classic"`` or ``"autoswitch"``. Raises
    what HARangeFetcher raises."""
    if end <= start:
        return b""
    with open_fetcher(fetch, ha_addr, start, end, broker=broker, protocol=protocol, server_is_slave=server_is_slave,
                      fail_on_data_loss=True) as fetcher:
        return b"".join(chunk for _, chunk in fetcher)


@dataclass(frozen=True, slots=True)
class DriverReads:
    """The driver's small HA reads of one broker set's CommitLog, for the history checks
    (:class:`connector.source.driver.history.CommitLogBytes`): each :meth:`read` fetches from the server that would read
    the same slice for an executor (:meth:`connector.source.driver.broker_view.BrokerSetView.server_for`, a slave first
    when ``prefer_slave``), over the set's HA ``protocol`` (``"classic"`` or ``"autoswitch"``)."""

    fetch: FetchSettings
    view: BrokerSetView
    protocol: str = HA_PROTOCOL_CLASSIC
    prefer_slave: bool = False

    def read(self, lo: int, hi: int) -> bytes:
        """CommitLog bytes ``[lo, hi)``; raises ValueError (no master known) or what :func:`fetch_range` raises."""
        server = self.view.server_for(lo, hi, self.prefer_slave)
        return fetch_range(self.fetch, server.endpoint.ha_addr, lo, hi, broker=self.view.name,
                           server_is_slave=server.role == "slave", protocol=self.protocol)
