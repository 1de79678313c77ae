"""Blocking network clients of RocketMQ brokers, on top of the sans-IO codecs in :mod:`connector.protocol`.

* :mod:`connector.client.remoting` — the one blocking remoting connection (connect, send a
  RemotingCommand, read its response, ACL signing) and its errors;
* :mod:`connector.client.admin` — :class:`BrokerAdminClient`: runtime info and broker config for the source,
  the apps' preflight and status, and the stub's ``status`` command;
* :mod:`connector.client.producer` — a producer that sends like the RocketMQ 4.9.8 Java client.

The HA-port client of the source is :mod:`connector.ha_fetch`; the broker stub's own asyncio clients
(BrokerOuterAPI, HAClient) live in ``broker_stub`` and share the same codecs and address parser.
"""
