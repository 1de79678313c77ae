"""Put statistics behind GET_BROKER_RUNTIME_INFO (RocketMQ 4.9.8 ``StoreStatsService`` and ``BrokerStats``).

Counters are since process start, as upstream keeps them in memory. Value formats follow the Java code:
TPS strings are three ``Double.toString`` values over 10 s, 60 s and 600 s windows joined by spaces (a
window without enough samples contributes an empty string, hence ``"0.0  "``), and
``putMessageTimesTotal`` reads 1 while nothing was stored — an upstream quirk kept for fidelity.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import deque

FREQUENCY_OF_SAMPLING_MS = 1000
MAX_RECORDS_OF_SAMPLING = 60 * 10
PUT_MESSAGE_ENTIRE_TIME_MAX_DESC = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]",
                                    "[200~500ms]", "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]",
                                    "[5~10s]", "[10s~]")
_BUCKET_LIMITS_MS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)


def _bucket(elapsed_ms: int) -> int:
    for i, limit in enumerate(_BUCKET_LIMITS_MS):
        if elapsed_ms <= limit:
            return i
    return len(_BUCKET_LIMITS_MS)


def java_double(value: float) -> str:
    """A float as Java's ``String.valueOf(double)`` prints typical values (``0.0``, ``5982.587073608617``)."""
    text = repr(float(value))
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"


class StoreStatsService:
    """Per-topic put counts and sizes, failures, put latency distribution, put TPS samples."""

    def __init__(self) -> None:
        self.boot_timestamp_ms = time.time_ns() // 1_000_000
        self.put_times_by_topic: dict[str, int] = {}
        self.put_size_by_topic: dict[str, int] = {}
        self.put_message_failed_times = 0
        self.get_found = 0  # pulls that found messages (getMessageTimesTotalFound)
        self.get_miss = 0
        self.put_message_entire_time_max_ms = 0
        self.put_distribution = [0] * len(PUT_MESSAGE_ENTIRE_TIME_MAX_DESC)
        self._put_samples: deque[tuple[float, int]] = deque(maxlen=MAX_RECORDS_OF_SAMPLING + 1)

    def on_put(self, topic: str, msgs: int, size: int, elapsed_ms: int) -> None:
        """Record a stored put (CommitLog listener): ``msgs`` records, ``size`` bytes."""
        self.put_times_by_topic[topic] = self.put_times_by_topic.get(topic, 0) + msgs
        self.put_size_by_topic[topic] = self.put_size_by_topic.get(topic, 0) + size
        self.put_distribution[_bucket(elapsed_ms)] += 1
        if elapsed_ms > self.put_message_entire_time_max_ms:
            self.put_message_entire_time_max_ms = elapsed_ms

    def on_put_failed(self) -> None:
        self.put_message_failed_times += 1

    @property
    def put_message_times_total(self) -> int:
        return sum(self.put_times_by_topic.values())

    @property
    def put_message_size_total(self) -> int:
        return sum(self.put_size_by_topic.values())

    def sample(self) -> None:
        """Take one TPS sample (every second, StoreStatsService.sampling)."""
        self._put_samples.append((time.monotonic(), self.put_message_times_total))

    async def run_sampling(self) -> None:
        """Sample forever (until cancelled)."""
        while True:
            self.sample()
            await asyncio.sleep(FREQUENCY_OF_SAMPLING_MS / 1000)

    def _tps(self, window: int) -> str:
        samples = self._put_samples
        if len(samples) <= window:
            return ""
        (t0, v0), (t1, v1) = samples[-(window + 1)], samples[-1]
        if t1 <= t0:
            return "0.0"
        return java_double((v1 - v0) / (t1 - t0))

    def put_tps(self) -> str:
        if not self._put_samples:
            return "  "
        return f"{self._tps(10)} {self._tps(60)} {self._tps(600)}"

    def runtime(self) -> str:
        """``[ D days, H hours, M minutes, S seconds ]`` since boot (getFormatRuntime)."""
        ms = time.time_ns() // 1_000_000 - self.boot_timestamp_ms
        days, rest = divmod(ms, 86_400_000)
        hours, rest = divmod(rest, 3_600_000)
        minutes, rest = divmod(rest, 60_000)
        return f"[ {days} days, {hours} hours, {minutes} minutes, {rest // 1000} seconds ]"

    def _latency_px(self, fraction: float) -> float:
        total = sum(self.put_distribution)
        if total == 0:
            return 0.0
        target = fraction * total
        seen = 0
        for i, count in enumerate(self.put_distribution):
            seen += count
            if seen >= target:
                return float(_BUCKET_LIMITS_MS[i]) if i < len(_BUCKET_LIMITS_MS) else float(_BUCKET_LIMITS_MS[-1])
        return 0.0

    def runtime_info(self) -> dict[str, str]:
        """The StoreStatsService part of GET_BROKER_RUNTIME_INFO (keys as 4.9.8)."""
        times = self.put_message_times_total
        total_times = times if times else 1
        size = self.put_message_size_total
        distribution = " ".join(f"{d}:{c}" for d, c in zip(PUT_MESSAGE_ENTIRE_TIME_MAX_DESC, self.put_distribution,
                                                                    strict=True))
        return {
            "bootTimestamp": str(self.boot_timestamp_ms),
            "runtime": self.runtime(),
            "putMessageEntireTimeMax": str(self.put_message_entire_time_max_ms),
            "putMessageTimesTotal": str(total_times),
            "putMessageFailedTimes": str(self.put_message_failed_times),
            "putMessageSizeTotal": str(size),
            "putMessageDistributeTime": distribution + " ",
            "putMessageAverageSize": java_double(size / total_times),
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": "0",
            "putTps": self.put_tps(),
            "getFoundTps": "0.0  ",
            "getMissTps": "0.0  ",
            "getTotalTps": "0.0  ",
            "getTransferedTps": "0.0  ",
            "putLatency99": f"{self._latency_px(0.99):.2f}",
            "putLatency999": f"{self._latency_px(0.999):.2f}",
        }


class BrokerStats:
    """``msgPutTotal*`` / ``msgGetTotal*`` counters (BrokerStats): puts since start, snapshotted at midnight."""

    def __init__(self) -> None:
        self.msg_put_total = 0
        self.msg_get_total = 0
        self._day = dt.date.today()
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0

    def on_put(self, msgs: int) -> None:
        self.msg_put_total += msgs

    def on_get(self, msgs: int) -> None:
        """Messages handed out by pulls (incBrokerGetNums)."""
        self.msg_get_total += msgs

    def _roll(self) -> None:
        today = dt.date.today()
        if today != self._day:
            self.put_yesterday_morning = self.put_today_morning if (today - self._day).days == 1 else self.msg_put_total
            self.get_yesterday_morning = self.get_today_morning if (today - self._day).days == 1 else self.msg_get_total
            self.put_today_morning = self.msg_put_total
            self.get_today_morning = self.msg_get_total
            self._day = today

    def runtime_info(self) -> dict[str, str]:
        self._roll()
        return {
            "msgPutTotalYesterdayMorning": str(self.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self.put_today_morning),
            "msgPutTotalTodayNow": str(self.msg_put_total),
            "msgGetTotalYesterdayMorning": str(self.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.get_today_morning),
            "msgGetTotalTodayNow": str(self.msg_get_total),
        }
