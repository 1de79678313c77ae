"""Slave metadata sync (RocketMQ 4.9.8 ``SlaveSynchronize``): on a SLAVE, every 10 s, the topic table (from the
master's VIP port), consumer offsets, delay offsets and subscription groups are fetched and stored under
``config/``; a failed step is logged and the next one still runs.

The steps and what the slave does with each answer: docs/protocol.md §3.2; the stub's additions (a master
derived from a pinned ``haMasterAddress``, the main-port fallback): docs/broker_stub.md "Better than 4.9.8, same
wire".
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from broker_stub.javautil import fastjson_loads
from broker_stub.metadata import ConsumerOffsetManager
from broker_stub.remoting.client import RemotingClientError
from connector.errors import AddressError
from connector.protocol.address import remoting_address_of_ha, vip_channel_address
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.metadata import DelayOffsetStore, SubscriptionGroupManager
    from broker_stub.outer_api import BrokerOuterAPI
    from broker_stub.remoting.client import RemotingClient
    from broker_stub.topic_config import TopicConfigManager


class SlaveSynchronizeContext(Protocol):
    """What slave_synchronize uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    topic_config_manager: TopicConfigManager
    consumer_offset_manager: ConsumerOffsetManager
    subscription_group_manager: SubscriptionGroupManager
    delay_offset_store: DelayOffsetStore
    remoting_client: RemotingClient
    outer_api: BrokerOuterAPI


log = logging.getLogger(__name__)

SYNC_INITIAL_DELAY_MS = 3000
SYNC_PERIOD_MS = 10_000
SYNC_TIMEOUT_MS = 3000


class SlaveSynchronize:
    """Pulls the master's metadata tables (see module doc). ``await run()`` until cancelled."""

    def __init__(self, context: SlaveSynchronizeContext) -> None:
        self.context = context
        self.rounds = 0
        self.last_error: str | None = None

    @property
    def master_addr(self) -> str | None:
        """The master's remoting address: learned from the name server, else derived from haMasterAddress."""
        c = self.context
        if c.outer_api.master_addr:
            return c.outer_api.master_addr
        pinned = c.config.fixed_ha_master_address
        if pinned and not c.outer_api.name_servers:
            try:
                return remoting_address_of_ha(pinned)
            except AddressError:
                return None
        return None

    async def run(self) -> None:
        await asyncio.sleep(SYNC_INITIAL_DELAY_MS / 1000)
        while True:
            await self.sync_all()
            await asyncio.sleep(SYNC_PERIOD_MS / 1000)

    async def sync_all(self) -> None:
        """The four steps, in order (skipped without a master address or when it is this broker)."""
        addr = self.master_addr
        if not addr or addr == self.context.config.store_host:
            return
        for step in (self.sync_topic_config, self.sync_consumer_offset, self.sync_delay_offset,
                     self.sync_subscription_group_config):
            try:
                await step(addr)
            except (RemotingClientError, ValueError, OSError) as exc:
                self.last_error = f"{step.__name__}: {exc}"
                log.warning("slave sync step failed step=%s master=%s error=%s", step.__name__, addr, exc)
        self.rounds += 1

    async def _fetch(self, addr: str, code: int) -> bytes:
        resp = await self.context.remoting_client.invoke(addr, RemotingCommand.request(code), SYNC_TIMEOUT_MS)
        if resp.code != ResponseCode.SUCCESS:
            raise ValueError(f"request code {code} to {addr} answered {resp.code}: {resp.remark}")
        return resp.body

    async def sync_topic_config(self, addr: str) -> None:
        try:
            body = await self._fetch(vip_channel_address(addr), RequestCode.GET_ALL_TOPIC_CONFIG)
        except RemotingClientError as exc:
            log.info("VIP channel of the master unavailable, using its main port error=%s", exc)
            body = await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        if self.context.topic_config_manager.replace_from_master(fastjson_loads(body)):
            log.info("update slave topic config from master masterAddr=%s", addr)

    async def sync_consumer_offset(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        manager = self.context.consumer_offset_manager
        manager.put_all(ConsumerOffsetManager.decode(body))
        manager.persist()

    async def sync_delay_offset(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        text = body.decode("utf-8")
        fastjson_loads(text)  # refuse to persist something that is not JSON
        self.context.delay_offset_store.write_verbatim(text)

    async def sync_subscription_group_config(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if self.context.subscription_group_manager.replace_from_master(fastjson_loads(body)):
            log.info("update slave subscription group from master masterAddr=%s", addr)
