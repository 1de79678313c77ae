"""The broker sets a query plans now: :class:`Route`, held by the driver apart from the user's options.

With ``brokers`` the route is what the ``brokers`` and ``slaves`` options give, for the whole query; with
``namesrv_addr`` discovery (:mod:`connector.source.driver.discovery`) replaces it by the live sets of the name
server's route each time it asks (docs/source.md "Discovery"). The user's
:class:`connector.options.parse.SourceOptions` never change.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.options.parse import BrokerEndpoint, SourceOptions


@dataclass(frozen=True, slots=True)
class Route:
    """The broker sets planned now: ``brokers``, one master endpoint per set in planning order, and ``slaves``,
    the endpoints of their slaves (or of a 5.x controller-mode set's other members; ``name`` = the set)."""

    brokers: tuple[BrokerEndpoint, ...] = ()
    slaves: tuple[BrokerEndpoint, ...] = ()

    @classmethod
    def of(cls, options: SourceOptions) -> Route:
        """The route the ``brokers`` and ``slaves`` options give (empty with ``namesrv_addr``, until discovery)."""
        return cls(options.brokers, options.slaves)

    @property
    def broker_names(self) -> list[str]:
        """The brokerNames of the planned sets, in order."""
        return [b.name for b in self.brokers]

    def slaves_of(self, name: str) -> tuple[BrokerEndpoint, ...]:
        """The slaves of broker set ``name``, in order."""
        return tuple(s for s in self.slaves if s.name == name)
