"""Blocking network clients of RocketMQ brokers, on top of the sans-IO codecs in :mod:`connector.protocol`.

* :mod:`connector.client.remoting` — the blocking remoting connections: one request at a time
  (:class:`~connector.client.remoting.RemotingConnection`) or pipelined
  (:class:`~connector.client.remoting.PipelinedConnection`), ACL signing, and their errors;
* :mod:`connector.client.net` — opening a TCP connection to ``host:port`` (remoting and HA clients);
* :mod:`connector.client.admin` — :class:`BrokerAdminClient`: runtime info and broker config for the source,
  the apps' preflight and status, and the stub's ``status`` command;
* :mod:`connector.client.ha` — the HA-port client of the source: :class:`~connector.client.ha.HARangeFetcher`,
  one frame loop for the classic and the AutoSwitch protocol, and its prefetch thread;
* :mod:`connector.client.ha_connection` — :class:`~connector.client.ha_connection.HATransferConnection`, the only
  owner of a blocking HA socket (connect, reports, receive, close);
* :mod:`connector.client.ha_wire` — what the frame loop asks of a protocol, and the classic protocol's answers;
* :mod:`connector.client.ha_autoswitch` — the RocketMQ 5.x AutoSwitch protocol's answers, and the driver's
  master probe;
* :mod:`connector.client.reconnect` — :class:`~connector.client.reconnect.OutageWait`, the reconnect backoff
  and outage bound of the HA fetches and the driver's remoting calls.

The broker stub's own asyncio clients (BrokerOuterAPI, HAClient) live in ``broker_stub`` and share the same
codecs and address parser.
"""
