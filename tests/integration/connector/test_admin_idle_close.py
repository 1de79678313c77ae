"""The driver's kept remoting connection outlives the broker's idle close (docs/source.md "Broker outages").

A broker closes a connection that was idle for ``serverChannelMaxIdleTimeSeconds`` (120 s in 4.9 and in
the stub). A query whose trigger interval is longer than that finds its kept connection closed at the
next planning call: that must be one quiet reconnect, not an outage (a WARNING, a backoff, and with a
short ``maxOutageMs`` a failed query).
"""

from __future__ import annotations

import logging
import socket

from connector.client.admin import BrokerAdminClient
from tests.support.brokers import wait_for


def test_a_kept_connection_closed_for_idleness_is_reopened_once(broker_factory, caplog):
    broker = broker_factory(serverChannelMaxIdleTimeSeconds=1)
    with BrokerAdminClient(broker.remoting_addr, 3000) as admin:
        first = admin.commit_log_offsets()
        kept = admin.connection.sock
        assert kept is not None
        # the broker closes it after 1 s idle; wait until the close has reached us (EOF on the socket)
        kept.setblocking(False)
        wait_for(lambda: _closed_by_peer(kept), "the broker's idle close", timeout_s=10)
        kept.setblocking(True)
        with caplog.at_level(logging.WARNING, logger="connector"):
            assert admin.commit_log_offsets() == first
            assert admin.broker_config()  # and the fresh connection goes on serving
        assert admin.connection.sock is not kept
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def _closed_by_peer(sock) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""  # b"" is the peer's FIN
    except BlockingIOError:
        return False
