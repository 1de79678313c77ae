"""Blocking network clients of RocketMQ brokers, on top of the sans-IO codecs in :mod:`connector.protocol`.

* :mod:`connector.client.remoting` — the blocking remoting connections: one request at a time
  (:class:`~connector.client.remoting.RemotingConnection`) or pipelined
  (:class:`~connector.client.remoting.PipelinedConnection`), ACL signing, and their errors;
* :mod:`connector.client.net` — opening a TCP connection to ``host:port`` (remoting and HA clients);
* :mod:`connector.client.admin` — :class:`BrokerAdminClient`: runtime info and broker config for the source,
  the apps' preflight and status, and the stub's ``status`` command;
* :mod:`connector.client.producer` — a producer that sends like the RocketMQ 4.9.8 Java client.

The HA-port client of the source is :mod:`connector.ha_fetch`; the broker stub's own asyncio clients
(BrokerOuterAPI, HAClient) live in ``broker_stub`` and share the same codecs and address parser.
"""
