"""Name-server registration (RocketMQ 4.9.8 ``BrokerOuterAPI.registerBrokerAll`` run by BrokerController):
REGISTER_BROKER (103) at start, every ``registerNameServerPeriod`` and at once when a topic is created,
UNREGISTER_BROKER (104) at shutdown, and a SLAVE's use of the answer (its HA master and metadata addresses).

The request, the answer and the periods: docs/protocol.md §3.1, the body's text §4.7; the faster re-registration
of a slave that has no master yet: docs/broker_stub.md "Better than 4.9.8, same wire".
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import TYPE_CHECKING, Protocol

from broker_stub.remoting.client import RemotingClientError
from connector.protocol.fastjson import Bean, encode
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.ha.client import HAClient
    from broker_stub.remoting.client import RemotingClient
    from broker_stub.topic_config import TopicConfigManager


class OuterAPIContext(Protocol):
    """What outer_api uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    topic_config_manager: TopicConfigManager
    remoting_client: RemotingClient
    ha_client: HAClient | None


log = logging.getLogger(__name__)

REGISTER_PERIOD_MIN_MS = 10_000
REGISTER_PERIOD_MAX_MS = 60_000
SLAVE_RETRY_START_MS = 1_000
UNREGISTER_TIMEOUT_MS = 1_000


def name_server_addresses(namesrv_addr: str | None) -> list[str]:
    """``namesrvAddr`` split on ``;`` (blank entries dropped)."""
    return [a.strip() for a in (namesrv_addr or "").split(";") if a.strip()]


class BrokerOuterAPI:
    """Registers the broker with its name servers (see module doc). ``await run()`` until cancelled."""

    def __init__(self, context: OuterAPIContext) -> None:
        self.context = context
        self.name_servers = name_server_addresses(context.config.broker.namesrvAddr)
        self.master_addr: str | None = None  # learned from registration (slaves)
        self.master_ha_addr: str | None = None
        self.registrations = 0
        self.last_error: str | None = None

    def _body(self) -> bytes:
        return register_broker_body(self.context.topic_config_manager.wrapper())

    def _header(self) -> dict:
        cfg = self.context.config
        return {"brokerAddr": cfg.store_host, "brokerId": cfg.broker.brokerId, "brokerName": cfg.broker.brokerName,
                "clusterName": cfg.broker.brokerClusterName,
                "haServerAddr": _join(cfg.broker_ip2, cfg.ha_listen_port)}

    async def register_broker_all(self) -> None:
        """One REGISTER_BROKER round to every name server; applies the first answer that names a master."""
        if not self.name_servers:
            return
        body = self._body()
        header = dict(self._header(), compressed=False, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
        timeout = self.context.config.broker.registerBrokerTimeoutMills
        results = await asyncio.gather(*(self._register_one(addr, header, body, timeout) for addr in self.name_servers))
        for resp in results:
            if resp is None:
                continue
            ext = resp.ext_fields or {}
            if ext.get("masterAddr") or ext.get("haServerAddr"):
                self._apply(ext.get("masterAddr"), ext.get("haServerAddr"))
                break

    async def _register_one(self, addr: str, header: dict, body: bytes, timeout_ms: int) -> RemotingCommand | None:
        try:
            resp = await self.context.remoting_client.invoke(
                addr, RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body), timeout_ms)
        except (RemotingClientError, ValueError) as exc:
            self.last_error = str(exc)
            log.warning("register broker to name server failed namesrv=%s error=%s", addr, exc)
            return None
        if resp.code != ResponseCode.SUCCESS:
            self.last_error = f"code {resp.code}: {resp.remark}"
            log.warning("register broker to name server refused namesrv=%s code=%d remark=%s", addr, resp.code,
                        resp.remark)
            return None
        self.registrations += 1
        log.debug("registered to name server namesrv=%s", addr)
        return resp

    def _apply(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        c = self.context
        if not c.config.is_slave:
            return
        if master_addr and master_addr != self.master_addr:
            log.info("master address learned from name server masterAddr=%s", master_addr)
            self.master_addr = master_addr
        if ha_server_addr:
            self.master_ha_addr = ha_server_addr
            if c.ha_client is not None and c.config.fixed_ha_master_address is None:
                c.ha_client.update_master_address(ha_server_addr)

    async def run(self) -> None:
        """Register at start, then periodically (slaves without a master: sooner, see module doc)."""
        if not self.name_servers:
            return
        period = min(max(self.context.config.broker.registerNameServerPeriod, REGISTER_PERIOD_MIN_MS),
                     REGISTER_PERIOD_MAX_MS)
        retry = SLAVE_RETRY_START_MS
        while True:
            await self.register_broker_all()
            if self.context.config.is_slave and self.master_addr is None:
                await asyncio.sleep(retry / 1000)
                retry = min(retry * 2, period)
                continue
            await asyncio.sleep(period / 1000)

    async def unregister_all(self) -> None:
        """UNREGISTER_BROKER to every name server (best effort, short timeout)."""
        if not self.name_servers:
            return
        h = self._header()
        header = {k: h[k] for k in ("brokerAddr", "clusterName", "brokerName", "brokerId")}

        async def one(addr: str) -> None:
            try:
                await self.context.remoting_client.invoke(
                    addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header), UNREGISTER_TIMEOUT_MS)
            except (RemotingClientError, ValueError) as exc:
                log.info("unregister broker failed namesrv=%s error=%s", addr, exc)

        await asyncio.gather(*(one(a) for a in self.name_servers))


def register_broker_body(topic_config_wrapper: Bean) -> bytes:
    """RegisterBrokerBody (uncompressed) around a TopicConfigSerializeWrapper bean; no filter servers."""
    return encode(Bean(filterServerList=[], topicConfigSerializeWrapper=topic_config_wrapper))


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
