"""RocketMQ 5.x controller-mode broker sets: finding the master, its committed end, following a switch
(docs/source.md "RocketMQ 5.x controller mode", docs/protocol.md §10).

A controller-mode broker set is the master named in ``brokers`` plus the members named in ``slaves``; the
controller may make any of them master (it raises the epoch each time). Two sides use this module:

* the **driver** (:class:`ControllerModeSet`, one per broker set): asks the current master for its epoch
  entries and confirmOffset before each batch; when the master stops answering or says it is a SLAVE, it
  looks for the member that now says it is a master (GET_BROKER_CONFIG ``brokerRole``; the highest epoch
  wins if two do) and computes what the switch cost (:class:`MasterSwitch`): the point where the old and
  new histories agree (RocketMQ's consistent point), and the old master's tail past it that the new master
  never received;
* the **executors** (:func:`connector.client.ha_autoswitch.find_master`): a fetch whose master went away reconnects to
  the new one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from connector.client.ha_autoswitch import (
    NO_REPORT,
    AutoSwitchMasterState,
    broker_role,
    find_master,
    is_master_role,
    probe_master,
)
from connector.data_loss import on_data_loss
from connector.errors import HAReplicaError
from connector.protocol.acl import AclCredentials
from connector.protocol.ha_autoswitch import EpochHistory

log = logging.getLogger(__name__)

#: the key of a batch's end offset under which master switches are recorded (``{broker: [switch, ...]}``)
SWITCH_KEY = "@masterSwitches"

@dataclass(frozen=True, slots=True)
class MasterSwitch:
    """One master switch as the driver saw it; offsets in bytes.

    ``common_point``: where the old master's and the new master's logs agree up to (RocketMQ's consistent
    point, docs/protocol.md §10.4); ``old_end``: the old master's last known max offset; the bytes
    ``[common_point, old_end)`` (when non-empty) the old master had and the new one never received.
    """

    old_master: str
    new_master: str
    epoch: int
    epoch_start_offset: int
    common_point: int
    old_end: int

    @property
    def lost_tail(self) -> tuple[int, int] | None:
        """``(lo, hi)`` of the old master's bytes the new master never received, or None."""
        return (self.common_point, self.old_end) if self.old_end > self.common_point else None

    def to_json(self) -> dict:
        """The record kept in the batch's end offset under :data:`SWITCH_KEY`."""
        return {"from": self.old_master, "to": self.new_master, "epoch": self.epoch,
                "epochStartOffset": self.epoch_start_offset, "lost": list(self.lost_tail) if self.lost_tail else None}


class ControllerModeSet:
    """Driver-side state of one controller-mode broker set.

    Args:
        members: ``(ha_addr, remoting_addr)`` of every broker of the set, the configured master first.
        connect_timeout_ms, read_timeout_ms, credentials: as the query's FetchSettings.
    """

    def __init__(self, name: str, members: Sequence[tuple[str, str]], *, connect_timeout_ms: int,
                 read_timeout_ms: int, credentials: AclCredentials | None = None):
        self.name = name
        self.members = tuple(members)
        self.current = self.members[0]
        self.connect_timeout_ms = connect_timeout_ms
        self.read_timeout_ms = read_timeout_ms
        self.credentials = credentials
        #: the current master's epoch entries and max offset from its latest handshake (None before one)
        self.history: EpochHistory | None = None
        #: switches not yet in a committed batch end offset (recorded there under SWITCH_KEY)
        self.switches: list[MasterSwitch] = []
        self._checked: set[MasterSwitch] = set()  # switches whose first batch start was checked

    def endpoint(self, candidates: Sequence):
        """The one of ``candidates`` (:class:`connector.options.parse.BrokerEndpoint`, the configured members) that is
        the current master."""
        return next(e for e in candidates if e.ha_addr == self.current[0])

    def partition_fields(self) -> dict:
        """The fields of :class:`connector.source.HAReplicaInputPartition` for this set: the members (a task
        follows a switch among them) and the epoch entries the batch is planned under."""
        epochs = tuple((e.epoch, e.start_offset) for e in self.history.entries) if self.history else ()
        return {"members": self.members, "epochs": epochs}

    def follow_switch(self, view) -> bool:
        """The current master is down or demoted: switch to the member that is master now, if any (see
        :meth:`follow`; ``view`` is the set's :class:`connector.source.driver.brokers.BrokerSetView`, whose
        boundaries from the old master are forgotten). The switch is kept in :attr:`switches`. True when it switched."""
        old_end = view.master.max_offset if view.master is not None and view.master.reachable else None
        try:
            switch = self.follow(old_end)
        except (OSError, HAReplicaError) as exc:
            log.info("broker %s: no new master yet (%s)", self.name, exc)
            return False
        if switch is None:
            return False
        view.forget_boundaries()
        self.switches.append(switch)
        return True

    def check_landed(self, begin: int, fail_on_data_loss: bool) -> None:
        """The first batch after a switch starts at ``begin`` (what the query landed): bytes past the switch's
        consistent point were never on the new master — DataLossError naming them, or a logged loss."""
        for switch in self.switches:
            if switch in self._checked:
                continue
            self._checked.add(switch)  # later batches start past it, on the new master's own bytes
            if begin > switch.common_point:
                on_data_loss(fail_on_data_loss,
                             f"broker {self.name}: the query landed CommitLog bytes [{switch.common_point}, {begin}) "
                             f"from master {switch.old_master}, which the new master {switch.new_master} (epoch "
                             f"{switch.epoch} from offset {switch.epoch_start_offset}) never received",
                             instead="go on with what the new master holds", logger=log)

    def records(self) -> list[dict]:
        """The pending switches as recorded in a batch end offset."""
        return [s.to_json() for s in self.switches]

    def committed(self) -> None:
        """A batch end offset holding the pending switches was committed: forget them."""
        self.switches.clear()
        self._checked.clear()

    def probe(self, report_offset: int) -> AutoSwitchMasterState:
        """Handshake with the current master (reporting ``report_offset``, an offset already landed) and keep
        its epoch history. Raises OSError / HAReplicaError as :func:`probe_master`."""
        state = probe_master(self.current[0], report_offset, connect_timeout_ms=self.connect_timeout_ms,
                             read_timeout_ms=self.read_timeout_ms)
        self.history = state.handshake.history()
        return state

    def confirmed_end(self, view, begin: int) -> int:
        """Where a batch starting at ``begin`` may end: the current master's confirmOffset (docs/protocol.md
        §10.6) rounded down to a record boundary ``view`` (:class:`connector.source.driver.brokers.BrokerSetView`)
        knows, or its commitLogMaxOffset when confirmOffset is not below it; ``begin`` when the master cannot be
        asked (the batch waits)."""
        try:
            state = self.probe(begin)
        except (OSError, HAReplicaError) as exc:
            log.warning("broker %s: cannot ask the controller-mode master %s for its confirmOffset (%s); the batch "
                        "waits", self.name, self.current[0], exc)
            return begin
        confirm = state.confirm_offset
        if confirm is None or confirm >= view.master.max_offset:
            return view.master.max_offset
        log.info("broker %s: confirmOffset %d is below commitLogMaxOffset %d; the batch ends at or below it",
                 self.name, confirm, view.master.max_offset)
        return view.floor_boundary(confirm, begin)

    def current_is_master(self) -> bool:
        """True when the current master still says it is one (GET_BROKER_CONFIG)."""
        return is_master_role(broker_role(self.current[1], self.read_timeout_ms, self.credentials))

    def follow(self, old_end: int | None) -> MasterSwitch | None:
        """Look for a new master; when another member is master now, switch to it and return what the switch
        cost (``old_end``: the old master's last known max offset). None when no other member is master."""
        found = find_master(self.members, connect_timeout_ms=self.connect_timeout_ms,
                            read_timeout_ms=self.read_timeout_ms, credentials=self.credentials)
        if found is None or (found[0], found[1]) == self.current:
            return None
        old, old_history = self.current, self.history
        self.current = (found[0], found[1])
        new_history = probe_master(found[0], NO_REPORT, connect_timeout_ms=self.connect_timeout_ms,
                                   read_timeout_ms=self.read_timeout_ms).handshake.history()
        self.history = new_history
        last = new_history.entries[-1]
        if old_history is None:
            common = last.start_offset
            end = last.start_offset
        else:
            known_end = max(old_history.max_offset, old_end or 0)
            common = EpochHistory(old_history.entries, known_end).common_point(new_history)
            end = known_end
            if common < 0:
                common = 0
        switch = MasterSwitch(old[0], found[0], last.epoch, last.start_offset, common, end)
        log.warning("broker %s: the controller made %s master (epoch %d from offset %d) instead of %s%s", self.name,
                    found[0], last.epoch, last.start_offset, old[0],
                    f"; the old master's CommitLog bytes [{switch.lost_tail[0]}, {switch.lost_tail[1]}) never "
                    "reached the new master and are lost" if switch.lost_tail else "; nothing was lost")
        return switch
