"""Blocking network clients of RocketMQ brokers, on top of the sans-IO codecs in :mod:`connector.protocol`:
remoting connections and the admin client the source, the apps and the stub's ``status`` use; the source's HA
client for the classic and AutoSwitch protocols; the outage wait they share. The broker stub's own asyncio
clients live in ``broker_stub`` and share the same codecs. Every module: docs/architecture.md "Every module".
"""
