"""The broker's configs: the static ones from `server.properties` and the run-time ones (Kafka's dynamic
broker configs, stored in the cluster metadata) layered over them.

`current` is what every service reads (a property of the broker's assembly hands it on); `alter` replaces
the run-time configs of a resource ("" = the cluster default, or this broker's id), persists them and
applies them at once to every topic without its own override. In a cluster the run-time configs are
ZooKeeper's (exactly.broker.config_store writes them and puts them into the metadata's `broker_configs`);
`reload` then applies what the metadata holds.
"""

from __future__ import annotations

import logging

from exactly.broker.config import BrokerConfig
from exactly.cluster.metadata import ClusterMetadata
from exactly.configs.topic import TOPIC_CONFIGS
from exactly.errors import KafkaError
from exactly.storage.config import LogConfig
from exactly.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class BrokerConfigs:
    def __init__(self, static: BrokerConfig, metadata: ClusterMetadata) -> None:
        self.static = static
        self._metadata = metadata
        self._logs: LogManager | None = None
        try:
            self.current = static.with_dynamic(self.dynamic())
        except KafkaError as e:  # a stored run-time config this version no longer accepts
            log.warning("ignoring the run-time broker configs: %s", e.message)
            self.current = static

    def apply_to(self, logs: LogManager) -> None:
        """Run-time changes of log defaults reach `logs` from now on."""
        self._logs = logs

    def dynamic(self, resource: str | None = None) -> dict[str, str]:
        """The run-time configs of `resource` ("" = cluster default, or this broker's id), or both merged
        (the broker's own over the default) when `resource` is None."""
        stored = self._metadata.broker_configs
        if resource is not None:
            return dict(stored.get(resource, {}))
        return {**stored.get("", {}), **stored.get(str(self.static.node_id), {})}

    def alter(self, resource: str, configs: dict[str, str], *, validate_only: bool) -> None:
        """Replace the run-time configs of `resource`; they apply at once to every topic without its own
        override, and are persisted (KafkaError INVALID_CONFIG when a value is not valid)."""
        layers = dict(self._metadata.broker_configs)
        layers[resource] = configs
        merged = {**layers.get("", {}), **layers.get(str(self.static.node_id), {})}
        config = self.static.with_dynamic(merged)
        topic_configs = {
            name: LogConfig.from_properties(
                {k: v for k, v in info.configs.items() if k in TOPIC_CONFIGS}, base=config.log
            )
            for name, info in self._metadata.topics.items()
        }
        if validate_only:
            return
        self._metadata.set_broker_configs(resource, configs)
        self._install(config, topic_configs)

    def reload(self) -> None:
        """Apply the run-time configs the metadata holds now (changed in memory: a cluster's, from
        ZooKeeper); a set this version does not accept is logged and the previous configs kept."""
        try:
            config = self.static.with_dynamic(self.dynamic())
            topic_configs = {
                name: LogConfig.from_properties(
                    {k: v for k, v in info.configs.items() if k in TOPIC_CONFIGS}, base=config.log
                )
                for name, info in self._metadata.topics.items()
            }
        except KafkaError as e:
            log.warning("ignoring the run-time broker configs %s: %s", self.dynamic(), e.message)
            return
        self._install(config, topic_configs)

    def _install(self, config: BrokerConfig, topic_configs: dict[str, LogConfig]) -> None:
        self.current = config
        if self._logs is not None:
            self._logs.default_config = config.log
            self._logs.set_topic_configs(topic_configs)
