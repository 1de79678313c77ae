"""The bundled RocketMQ 4.9.8 broker stub: a master (ASYNC_MASTER / SYNC_MASTER, ASYNC_FLUSH) with the CommitLog,
its recovery, the classic HA port and the remoting port. Producers are clients, not part of the server:
:mod:`connector.client.producer`.

Run it with ``python -m broker_stub -c broker.conf``. The broker imports only :mod:`connector.protocol` from
the connector package (docs/architecture.md "Layers"); its ``status`` / ``delete-expired`` commands query a broker with
:mod:`connector.client.admin`.
"""
