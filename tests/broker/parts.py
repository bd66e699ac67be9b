"""The broker's real parts without a `Broker`: metadata, configs, logs, replica manager, topic manager and
scheduler over one data directory, as `exactly.broker.server` assembles them. Services under test are
built from these, the way the broker builds them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from exactly.broker.broker_configs import BrokerConfigs
from exactly.broker.config import BrokerConfig
from exactly.broker.flusher import Flusher
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.scheduler import Scheduler
from exactly.broker.topic_manager import TopicManager
from exactly.clock import ManualClock
from exactly.cluster.metadata import ClusterMetadata
from exactly.storage.log_manager import LogManager


@dataclass
class Parts:
    config: BrokerConfig
    clock: ManualClock
    metadata: ClusterMetadata
    logs: LogManager
    replicas: ReplicaManager
    topics: TopicManager
    scheduler: Scheduler

    async def close(self) -> None:
        await self.scheduler.stop()
        self.replicas.flusher.close()
        self.logs.close()
        self.metadata.close()


def build_parts(data_dir: Path, clock: ManualClock | None = None, **properties: str) -> Parts:
    """Call from a running event loop (the scheduler's tasks need one). `properties`: Kafka names with
    `_` for `.` (group_initial_rebalance_delay_ms="0"); `log_dirs="a,b"` gives more log dirs after
    `data_dir`."""
    clock = clock or ManualClock()
    more = properties.pop("log_dirs", "")
    props = {
        "log.dirs": ",".join([str(data_dir), *filter(None, more.split(","))]),
        **{k.replace("_", "."): v for k, v in properties.items()},
    }
    config = BrokerConfig.from_properties(props)
    metadata = ClusterMetadata(config.data_dir)
    configs = BrokerConfigs(config, metadata)
    logs = LogManager(config.all_log_dirs, configs.current.log, clock)
    configs.apply_to(logs)
    logs.startup()
    replicas = ReplicaManager(logs, Flusher(logs.log_dirs))
    topics = TopicManager(metadata, replicas, configs)
    topics.sync_logs_with_metadata()
    return Parts(configs.current, clock, metadata, logs, replicas, topics, Scheduler())


async def until(condition: Callable[[], bool], seconds: float = 30) -> None:
    """Wait for `condition` (polled on the event loop), failing after `seconds`."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 - a condition of plain state, nothing to await
            await asyncio.sleep(0.02)
