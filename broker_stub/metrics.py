"""Prometheus text endpoint of a broker (prometheus-client), enabled by ``metricsPromExporterPort`` > 0: a scrape
takes one snapshot on the broker's event loop from prometheus-client's HTTP server thread. The metrics, their
types and units: docs/broker_stub.md "Metrics and logs".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.ha.client import HAClient
    from broker_stub.ha.service import HAService
    from broker_stub.store.message_store import DefaultMessageStore


class MetricsContext(Protocol):
    """What metrics uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    ha_service: HAService
    ha_client: HAClient | None


log = logging.getLogger(__name__)

SNAPSHOT_TIMEOUT_S = 2.0


def snapshot(context: MetricsContext) -> dict:
    """The figures a scrape reports, read on the event loop (plain data, safe to hand to another thread)."""
    store = context.message_store
    cfg = context.config
    return {
        "brokerName": cfg.broker.brokerName, "brokerRole": cfg.store.brokerRole, "brokerId": cfg.broker.brokerId,
        "cluster": cfg.broker.brokerClusterName,
        "minOffset": store.commit_log.min_offset, "maxOffset": store.commit_log.max_offset,
        "dispatchBehindBytes": store.reput.dispatch_behind_bytes,
        "putMessages": store.stats.put_message_times_total, "putFailed": store.stats.put_message_failed_times,
        "ha": context.ha_service.status(),
        "client": context.ha_client.status() if context.ha_client is not None else None,
    }


class BrokerCollector:
    """A prometheus-client collector that snapshots one broker per scrape."""

    def __init__(self, context: MetricsContext, loop: asyncio.AbstractEventLoop) -> None:
        self.context = context
        self.loop = loop

    def _snapshot(self) -> dict | None:
        async def take() -> dict:
            return snapshot(self.context)

        try:
            return asyncio.run_coroutine_threadsafe(take(), self.loop).result(timeout=SNAPSHOT_TIMEOUT_S)
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:
            log.warning("metrics snapshot failed error=%r", exc)
            return None

    def collect(self):
        s = self._snapshot()
        if s is None:
            return
        info = GaugeMetricFamily("rocketmq_broker_info", "Broker identity", labels=["brokerName", "brokerRole",
                                                                                    "brokerId", "cluster"])
        info.add_metric([s["brokerName"], s["brokerRole"], str(s["brokerId"]), s["cluster"]], 1)
        yield info
        yield GaugeMetricFamily("rocketmq_commitlog_min_offset_bytes", "commitLogMinOffset", value=s["minOffset"])
        yield GaugeMetricFamily("rocketmq_commitlog_max_offset_bytes", "commitLogMaxOffset", value=s["maxOffset"])
        yield GaugeMetricFamily("rocketmq_dispatch_behind_bytes", "CommitLog bytes not yet dispatched",
                                value=s["dispatchBehindBytes"])
        yield CounterMetricFamily("rocketmq_put_messages", "Messages stored since start", value=s["putMessages"])
        yield CounterMetricFamily("rocketmq_put_failed", "Sends refused since start", value=s["putFailed"])
        ha = s["ha"]
        yield GaugeMetricFamily("rocketmq_ha_push2slave_max_offset_bytes", "Highest ack of any HA connection",
                                value=ha["push2SlaveMaxOffset"])
        yield GaugeMetricFamily("rocketmq_ha_connections", "HA connections", value=ha["connectionCount"])
        per_conn = {
            "slave_ack_offset_bytes": GaugeMetricFamily("rocketmq_ha_connection_slave_ack_offset_bytes",
                                                        "Last ack of the connection", labels=["peer"]),
            "lag_bytes": GaugeMetricFamily("rocketmq_ha_connection_lag_bytes", "commitLogMaxOffset minus the ack",
                                           labels=["peer"]),
            "ms_since_last_read": GaugeMetricFamily("rocketmq_ha_connection_ms_since_last_read",
                                                    "ms since the master read from the peer", labels=["peer"]),
            "sent": CounterMetricFamily("rocketmq_ha_connection_sent_bytes", "CommitLog bytes pushed",
                                        labels=["peer"]),
            "missing": GaugeMetricFamily("rocketmq_ha_connection_requested_offset_missing",
                                         "1 when the requested offset is below commitLogMinOffset", labels=["peer"]),
        }
        for c in ha["connections"]:
            peer = [c["peer"]]
            per_conn["slave_ack_offset_bytes"].add_metric(peer, c["slaveAckOffset"])
            per_conn["lag_bytes"].add_metric(peer, c["lagBytes"])
            per_conn["ms_since_last_read"].add_metric(peer, c["msSinceLastRead"])
            per_conn["sent"].add_metric(peer, c["bytesSent"])
            per_conn["missing"].add_metric(peer, 1 if c["requestedOffsetMissing"] else 0)
        yield from per_conn.values()
        client = s["client"]
        if client is not None:
            yield GaugeMetricFamily("rocketmq_ha_client_connected", "1 while the slave is connected to its master",
                                    value=1 if client["slaveConnected"] else 0)
            yield GaugeMetricFamily("rocketmq_ha_client_master_phy_offset_bytes", "End of the last frame received",
                                    value=client["masterPhyOffset"])


class MetricsExporter:
    """Starts and stops the HTTP endpoint for one broker."""

    def __init__(self, context: MetricsContext) -> None:
        self.context = context
        self._server = None
        self._thread = None

    def start(self, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port`` in a daemon thread. Raises OSError when the port is taken."""
        registry = CollectorRegistry()
        registry.register(BrokerCollector(self.context, asyncio.get_running_loop()))
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        log.info("prometheus exporter listening host=%s metricsPromExporterPort=%d", host, port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
