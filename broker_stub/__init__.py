"""The bundled RocketMQ 4.9.8 broker stub: a master (ASYNC_MASTER / SYNC_MASTER, ASYNC_FLUSH) with the CommitLog,
its recovery, the classic HA port and the remoting port, plus a Python producer (:mod:`broker_stub.producer`).

Run it with ``python -m broker_stub -c broker.conf``. Only :mod:`connector.protocol` is imported from the
connector package (DESIGN §2).
"""
