"""Topic lifecycle (the part of Kafka's controller and `LogManager` glue one broker needs): create, add
partitions, delete, alter configs, and make the logs match the metadata after a crash.

In a cluster (`cluster` set: exactly.broker.cluster_member) topics live in ZooKeeper: create, add
partitions, delete and config changes go there, and every broker's replicas follow what its watches see.

Create is all or nothing: the logs first, then the metadata record that makes the topic exist. A failure
in between removes the logs made; a crash in between leaves logs without a topic, which start-up removes
(`sync_logs_with_metadata`). Never a topic in metadata without its logs. Deleting a topic stops its
replicas (the replica manager forgets them and deletes their logs).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from exactly.broker.broker_configs import BrokerConfigs
from exactly.broker.replica_manager import ReplicaManager
from exactly.cluster.metadata import ClusterMetadata, CorruptMetadataError, TopicInfo
from exactly.configs.topic import TOPIC_CONFIGS, validate_topic_overrides
from exactly.errors import ErrorCode, KafkaError
from exactly.storage import files
from exactly.storage.config import LogConfig

if TYPE_CHECKING:
    from exactly.broker.cluster_member import ClusterMember

log = logging.getLogger(__name__)

CREATE_TIMEOUT_S = 30.0  # how long a create waits for the new partitions' leaders (Kafka: the request's)


class TopicManager:
    def __init__(self, metadata: ClusterMetadata, replicas: ReplicaManager, configs: BrokerConfigs) -> None:
        self._metadata = metadata
        self._logs = replicas.logs
        self._replicas = replicas
        self._configs = configs
        self.cluster: ClusterMember | None = None

    def topic_image(self) -> Mapping[str, TopicInfo]:
        """Every topic now, by name (what KIP-848 consumer groups subscribe to and assign)."""
        return self._metadata.topics

    def partitions(self, name: str) -> int:
        """The topic's partition count (0: no such topic)."""
        info = self._metadata.topics.get(name)
        return 0 if info is None else info.partitions

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        return topic_log_config(overrides, self._configs.current.log)

    def validate_topic_configs(self, configs: dict[str, str]) -> LogConfig:
        """The LogConfig these overrides give (KafkaError INVALID_CONFIG when they are not valid)."""
        return self.log_config(validate_topic_overrides(configs))

    async def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str],
        *,
        replication_factor: int = -1,
        assignment: dict[int, tuple[int, ...]] | None = None,
        timeout_s: float = CREATE_TIMEOUT_S,
    ) -> TopicInfo:
        """All or nothing: the logs first, then the metadata record that makes the topic exist. A failure
        in between removes the logs made; a crash in between leaves logs without a topic, which start-up
        removes (`sync_logs_with_metadata`). Never a topic in metadata without its logs."""
        log_config = self.validate_topic_configs(configs)
        overrides = validate_topic_overrides(configs)
        self._metadata.check_new_topic(name, partitions)
        if self.cluster is not None:
            rf = (
                self._configs.current.default_replication_factor
                if replication_factor == -1
                else replication_factor
            )
            return await self.cluster.create_topic(name, partitions, rf, overrides, assignment, timeout_s)
        return self._logs_then_record(
            name,
            range(partitions),
            log_config,
            lambda: self._metadata.create_topic(name, partitions, overrides),
            f"cannot record topic {name!r}",
        )

    async def ensure_internal_topic(
        self, name: str, partitions: int, segment_bytes: int, replication_factor: int = 1, min_isr: int = 1
    ) -> None:
        """Create a coordinator's compacted internal topic on first use (in a cluster: with its replication
        factor, at most the live brokers, as Kafka creates it). Its segments are preallocated: each of the
        coordinator's writes is small and fsynced before its answer (storage/preallocation.py)."""
        if name in self._metadata.topics:
            return
        configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "preallocate": "true"}
        rf = 1
        if self.cluster is not None:
            rf = max(1, min(replication_factor, len(self.cluster.broker_metadata())))
            configs["min.insync.replicas"] = str(min(min_isr, rf))
        try:
            await self.create_topic(name, partitions, configs, replication_factor=rf)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return
        log.info("created %s with %d partitions", name, partitions)

    def has_partition(self, topic: str, partition: int) -> bool:
        info = self._metadata.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    async def delete_topic(self, name: str, timeout_s: float = CREATE_TIMEOUT_S) -> TopicInfo:
        if self.cluster is not None:
            return await self.cluster.delete_topic(name, timeout_s)
        info = self._metadata.delete_topic(name)
        for partition in range(info.partitions):
            self._replicas.stop_replica(name, partition)
        return info

    async def add_partitions(self, name: str, total: int, timeout_s: float = CREATE_TIMEOUT_S) -> TopicInfo:
        """All or nothing, in the order `create_topic` uses: the new partitions' logs, then the record."""
        if self.cluster is not None:
            return await self.cluster.add_partitions(name, total, timeout_s)
        current = self._metadata.check_add_partitions(name, total)
        return self._logs_then_record(
            name,
            range(current.partitions, total),
            self.log_config(current.configs),
            lambda: self._metadata.add_partitions(name, total),
            f"cannot record the new partitions of {name!r}",
        )

    def _logs_then_record(
        self, name: str, partitions: range, config: LogConfig, record: Callable[[], TopicInfo], what: str
    ) -> TopicInfo:
        """Create the logs of `partitions`, then append the metadata record that makes them exist; if the
        record fails the logs are removed again (a refused append is cut off: KAFKA_STORAGE_ERROR)."""
        self._create_logs(name, partitions, config)
        try:
            return record()
        except BaseException as e:
            self._remove_logs(name, partitions)
            if isinstance(e, OSError):
                raise _metadata_storage_error(e, what) from None
            raise

    def _create_logs(self, name: str, partitions: range, config: LogConfig) -> None:
        """Create the logs of `partitions` (none of which exists), or none of them: KAFKA_STORAGE_ERROR
        when the disk or the file-descriptor budget refuses one."""
        made: list[int] = []
        try:
            with files.synced_together(
                self._logs.log_dirs
            ):  # one syncfs, not an fsync per file and directory
                for partition in partitions:
                    if self._configs.current.debug_create_crash_after_partitions == len(made) and made:
                        log.error("exactly.debug.create.crash.after.partitions: exiting in a create")
                        os._exit(17)
                    self._logs.get_or_create_log(name, partition, config)
                    made.append(partition)
        except OSError as e:
            failed = partitions[min(len(made), len(partitions) - 1)]
            self._remove_logs(name, made)
            self._logs.remove_partition_dir(name, failed)
            log.warning(
                "could not create partition %s-%d (%s); removed the %d partitions made, nothing was created",
                name,
                failed,
                e,
                len(made),
            )
            why = e.strerror or str(e)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create partition {failed} of {name!r}: {why}"
            ) from None
        except BaseException:  # a bug (UNKNOWN_SERVER_ERROR for the request): leaves no logs either
            self._remove_logs(name, made)
            if len(made) < len(partitions):
                self._logs.remove_partition_dir(name, partitions[len(made)])
            raise

    def _remove_logs(self, name: str, partitions: range | list[int]) -> None:
        for partition in partitions:
            self._replicas.stop_replica(name, partition)

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        config = self.validate_topic_configs(configs)
        if self.cluster is not None:
            await self.cluster.set_topic_configs(name, validate_topic_overrides(configs), CREATE_TIMEOUT_S)
            return self._metadata.topics[name]
        info = self._metadata.set_configs(name, validate_topic_overrides(configs))
        self._logs.set_topic_config(name, config)
        return info

    def _holds_data(self, topic: str, partition: int) -> bool:
        directory = self._logs.dir_of(topic, partition)
        if directory is None:
            return False  # offline: not removed either
        try:
            return _has_batches(directory / files.partition_dir_name(topic, partition))
        except OSError:
            return True

    def sync_logs_with_metadata(self) -> None:
        """Make the logs match the metadata after a crash: logs made for a create (or new partitions) whose
        record never landed are removed, and a partition the metadata has but whose log is gone (deleted by
        hand, or an older version's create order) is made again; one line per topic says what was done.

        Raises CorruptMetadataError (the broker does not start) for logs that hold data of a topic no
        record names: a create that never landed wrote none, so the metadata log lost the topic (cut,
        replaced), and removing them would lose the data."""
        stray: dict[str, list[int]] = {}
        present = set(self._logs.partitions())
        for topic, partition in present:
            existing = self._metadata.topics.get(topic)
            if existing is None or partition >= existing.partitions:
                stray.setdefault(topic, []).append(partition)
        lost = {
            topic: partitions
            for topic, partitions in sorted(stray.items())
            if topic not in self._metadata.ever_created
            and any(self._holds_data(topic, p) for p in partitions)
        }
        if lost:
            names = ", ".join(f"{t}-{p}" for t, partitions in lost.items() for p in sorted(partitions))
            raise CorruptMetadataError(
                f"{self._metadata.path}: no record creates {', '.join(lost)}, whose logs hold data ({names}):"
                " the file lost records (cut or replaced); restore it, or remove those directories to drop"
                " their data"
            )
        for topic, partitions in sorted(stray.items()):
            partitions.sort()
            for partition in partitions:
                self._replicas.stop_replica(topic, partition)
            existing = self._metadata.topics.get(topic)
            log.warning(
                "removed %d %s of %s (%s): %s",
                len(partitions),
                "log" if len(partitions) == 1 else "logs",
                topic,
                _partition_list(partitions),
                "the topic does not exist (a create interrupted by a crash, or a delete)"
                if existing is None
                else f"the topic has {existing.partitions} partitions (an interrupted CreatePartitions)",
            )
        offline = self._logs.offline_dirs
        for name, info in self._metadata.topics.items():
            missing = [p for p in range(info.partitions) if (name, p) not in present]
            if missing and offline:  # they may be in the offline dir: KAFKA_STORAGE_ERROR, not made anew
                log.warning(
                    "%d %s of %s (%s) in no online log dir: not made again while %s %s offline",
                    len(missing),
                    "log" if len(missing) == 1 else "logs",
                    name,
                    _partition_list(missing),
                    ", ".join(map(str, offline)),
                    "is" if len(offline) == 1 else "are",
                )
                continue
            for partition in missing:
                self._logs.get_or_create_log(name, partition, self.log_config(info.configs))
            if missing:
                log.warning(
                    "created the %d missing %s of %s (%s): the topic exists",
                    len(missing),
                    "log" if len(missing) == 1 else "logs",
                    name,
                    _partition_list(missing),
                )


def _has_batches(directory: Path) -> bool:
    return any(f.suffix == ".log" and f.stat().st_size > 0 for f in directory.iterdir())


def topic_log_config(overrides: dict[str, str], base: LogConfig) -> LogConfig:
    """A topic's LogConfig: its stored overrides over the broker's defaults (unknown names ignored)."""
    known = {name: value for name, value in overrides.items() if name in TOPIC_CONFIGS}
    if len(known) != len(overrides):  # stored by an older version (e.g. Kafka 3's removed configs)
        log.warning("ignoring unknown topic configs %s", sorted(set(overrides) - set(known)))
    return LogConfig.from_properties(known, base=base) if known else base


def _metadata_storage_error(e: OSError, what: str) -> KafkaError:
    """A metadata append that the disk refused (cut off again, so nothing changed) is the topic's
    KAFKA_STORAGE_ERROR, as Kafka answers when its log directory fails."""
    log.warning("%s (%s); removed its new logs, nothing was created", what, e)
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {e.strerror or e}")


def _partition_list(partitions: list[int]) -> str:
    """[0, 1, 2, 5] -> 'partitions 0-2, 5' (sorted input)."""
    runs: list[str] = []
    start = prev = partitions[0]
    for p in [*partitions[1:], None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ("partition " if len(partitions) == 1 else "partitions ") + ", ".join(runs)
