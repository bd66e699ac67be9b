"""All partition logs under one data directory (Kafka's `LogManager`).

Layout::

    <data_dir>/
      .exactly_cleanshutdown               present only between a clean shutdown and the next start
      recovery-point-offset-checkpoint     see checkpoint.py
      log-start-offset-checkpoint
      replication-offset-checkpoint        high watermarks, in a cluster only (Kafka's HW checkpoint:
                                           a replica restarts with the HW it had, not its log end)
      <topic>-<partition>/                 one PartitionLog each (see files.py)

`startup()` finds every partition directory and removes the clean-shutdown marker, so a crash from then on
is noticed at the next start; it loads no log. A partition is loaded (and recovered when the last stop was
not clean, from its checkpointed recovery point, see loader.py) when first asked for (`get_log`), or by
`load_pending`, which the broker calls in small slices after it listens until none is left: start-up time
does not grow with the partition count (Kafka loads every log before it listens). A log enters the map only
after the sync that ends its loading, so no recovery point is read before it is durable. `close()` closes
every loaded log cleanly, writes the checkpoints (an unloaded partition keeps its checkpointed values) and
puts the marker back, unless a partition that needed recovery was never loaded.

The broker owns the timers; storage only exposes the periodic work: `flush_dirty_logs` (flush.ms),
`checkpoint` (recovery points, only ever advanced by flushes), `delete_old_segments` (retention),
`remove_expired_producers` (producer.id.expiration.ms), `take_snapshots`, `clean_logs` (compaction).

Per-topic configuration lives in the broker's metadata; the broker passes overrides in with
`set_topic_config` (and at startup through `topic_configs`).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from exactly.clock import Clock
from exactly.errors import ErrorCode, KafkaError
from exactly.storage import files
from exactly.storage.checkpoint import read_checkpoint, write_checkpoint
from exactly.storage.config import LogConfig
from exactly.storage.loader import create_log, load_log
from exactly.storage.log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

_JAVA_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class _Unloaded:
    """A partition directory found at start-up, with what its loading needs."""

    path: Path
    recovery_point: int
    log_start_offset: int
    clean: bool  # the last stop was clean: no recovery


@dataclass(frozen=True, slots=True)
class DiskSpace:
    """The file system holding a data directory, in bytes (Java's FileStore total / usable space)."""

    total_bytes: int
    usable_bytes: int


class LogManager:
    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig,
        clock: Clock,
        topic_configs: Mapping[str, LogConfig] | None = None,
        *,
        keep_high_watermarks: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir)
        # a cluster's replica restarts with its checkpointed HW (one broker alone: everything is committed)
        self.keep_high_watermarks = keep_high_watermarks
        self._high_watermarks: dict[TopicPartition, int] = {}
        self.default_config = default_config
        self.clock = clock
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._unloaded: dict[TopicPartition, _Unloaded] = {}
        self._offline: dict[TopicPartition, tuple[_Unloaded, str]] = {}  # its loading failed: why
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Find every partition directory (loading none, see the module doc)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / files.CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = read_checkpoint(self.data_dir / files.RECOVERY_POINT_CHECKPOINT)
        starts = read_checkpoint(self.data_dir / files.LOG_START_CHECKPOINT)
        if self.keep_high_watermarks:
            self._high_watermarks = read_checkpoint(self.data_dir / files.HIGH_WATERMARK_CHECKPOINT)
        for name in sorted(os.listdir(self.data_dir)):
            path = self.data_dir / name
            if name.endswith(".tmp-delete"):
                shutil.rmtree(path, ignore_errors=True)
                continue
            tp = files.parse_partition_dir_name(name)
            if tp is None or not path.is_dir():
                continue
            self._unloaded[tp] = _Unloaded(path, recovery.get(tp, 0), starts.get(tp, 0), clean)
        files.unlink(marker, missing_ok=True)
        files.fsync_dir(self.data_dir)
        self._started = True

    @property
    def pending(self) -> int:
        """Partitions found at start-up and not loaded yet."""
        return len(self._unloaded)

    def load_pending(self, limit: int) -> int:
        """Load up to `limit` of the partitions not loaded yet, with one sync; returns how many are left."""
        batch = list(itertools.islice(self._unloaded, limit))
        loaded: list[tuple[TopicPartition, PartitionLog]] = []
        with files.synced_together(self.data_dir):  # one syncfs for every recovery, not fsyncs each
            for tp in batch:
                plog = self._load_or_offline(tp)
                if plog is not None:
                    loaded.append((tp, plog))
        for tp, plog in loaded:
            self._logs[tp] = plog
            self._unloaded.pop(tp, None)
        return len(self._unloaded)

    def _load_or_offline(self, tp: TopicPartition) -> PartitionLog | None:
        """Load `tp`; a partition whose files cannot be loaded goes offline (as a Kafka log dir that fails:
        its requests get KAFKA_STORAGE_ERROR) with one log line, and the broker serves the others."""
        found = self._unloaded[tp]
        try:
            return self._load(tp, found)
        except Exception as e:  # noqa: BLE001 (any failure: that partition only)
            why = f"{type(e).__name__}: {e}"
            log.error("cannot load partition %s-%d (%s); it is offline until the broker restarts", *tp, why)
            del self._unloaded[tp]
            self._offline[tp] = (found, why)
            return None

    def load_all(self) -> None:
        while self._unloaded:
            self.load_pending(1000)

    def _load(self, tp: TopicPartition, found: _Unloaded) -> PartitionLog:
        plog = load_log(
            found.path,
            tp[0],
            tp[1],
            self.config_for(tp[0]),
            self.clock,
            recovery_point=found.recovery_point,
            log_start_offset=found.log_start_offset,
            had_clean_shutdown=found.clean,
        )
        if self.keep_high_watermarks:
            plog.update_follower_high_watermark(self._high_watermarks.get(tp, 0))
        return plog

    def close(self) -> None:
        """Clean shutdown: flush and close every log, checkpoint, write the clean-shutdown marker."""
        try:
            with files.synced_together(self.data_dir):  # one syncfs for every log, not fsyncs each
                for plog in self._logs.values():
                    plog.close()
            self.checkpoint()
            pending = [found for found in self._unloaded.values() if not found.clean]
            pending += [found for found, _ in self._offline.values() if not found.clean]
            if pending:
                log.warning(
                    "%d partitions that need recovery were not loaded: the next start recovers them",
                    len(pending),
                )
            else:
                files.write_atomically(self.data_dir / files.CLEAN_SHUTDOWN_FILE, b"")
        except (OSError, KafkaError) as e:  # a full disk: stop as after a crash (recovery at next start)
            log.warning("shutting down without the clean-shutdown marker: %s", e)
            for plog in self._logs.values():
                plog.close_without_flush()
        self._logs.clear()
        self._unloaded.clear()
        self._offline.clear()
        self._started = False

    # -- partitions ---------------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (t, _p), plog in list(self._logs.items()):
            if t == topic:
                plog.update_config(config)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log (loaded now if it was not); KAFKA_STORAGE_ERROR for a partition that is offline."""
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is None and tp in self._unloaded:
            with files.synced_together(self.data_dir):
                plog = self._load_or_offline(tp)
            if plog is not None:
                self._logs[tp] = plog
                del self._unloaded[tp]
        if plog is None and tp in self._offline:
            why = self._offline[tp][1]
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"partition {topic}-{partition} is offline: {why}"
            )
        return plog

    def logs(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        """The loaded logs (periodic work: a partition not loaded yet has nothing to flush or clean)."""
        yield from list(self._logs.items())

    def all_logs(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        """Every log, loading those not loaded yet."""
        self.load_all()
        return self.logs()

    def partitions(self) -> list[TopicPartition]:
        """Every partition with a directory, loaded or not (offline ones too)."""
        return [*self._logs, *self._unloaded, *self._offline]

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        existing = self.get_log(topic, partition)
        if existing is not None:
            return existing
        if config is not None:
            self._topic_configs[topic] = config
        _check_topic_name(topic)
        path = self.data_dir / files.partition_dir_name(topic, partition)
        try:
            plog = create_log(path, topic, partition, self.config_for(topic), self.clock)
        except FileExistsError:  # left by an interrupted create or delete: load what is there
            plog = load_log(
                path, topic, partition, self.config_for(topic), self.clock, had_clean_shutdown=True
            )
        files.fsync_dir(self.data_dir)
        self._logs[(topic, partition)] = plog
        return plog

    def remove_partition_dir(self, topic: str, partition: int) -> None:
        """Remove what a failed `get_or_create_log` left of a partition that has no log (a half-made
        directory); a partition with a log is left alone (that is `delete_log`'s job)."""
        if (
            (topic, partition) in self._logs
            or (topic, partition) in self._unloaded
            or (topic, partition) in self._offline
        ):
            return
        path = self.data_dir / files.partition_dir_name(topic, partition)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            files.note_deleted(path, tree=True)

    def delete_log(self, topic: str, partition: int) -> None:
        plog = self._logs.pop((topic, partition), None)
        found = self._unloaded.pop((topic, partition), None)
        if found is None and (topic, partition) in self._offline:
            found = self._offline.pop((topic, partition))[0]
        if plog is not None:
            plog.close_without_flush()
            path = plog.directory
        elif found is not None:
            path = found.path
        else:
            return
        doomed = path.with_name(path.name + ".tmp-delete")
        os.replace(path, doomed)
        files.fsync_dir(self.data_dir)
        files.note_deleted(path, tree=True)
        shutil.rmtree(doomed, ignore_errors=True)

    @property
    def absolute_path(self) -> str:
        """The data directory as Kafka names a log dir: absolute, symlinks not resolved."""
        return os.path.abspath(self.data_dir)

    def disk_space(self) -> DiskSpace:
        """statvfs of the data directory (OSError when the file system cannot be asked); usable space is
        what an unprivileged process may still write (f_bavail), as Java's getUsableSpace."""
        st = os.statvfs(self.data_dir)
        return DiskSpace(
            min(st.f_blocks * st.f_frsize, _JAVA_LONG_MAX), min(st.f_bavail * st.f_frsize, _JAVA_LONG_MAX)
        )

    # -- periodic work (the broker calls these from its timers) ---------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery points (advanced only by flushes) and log start offsets."""
        unloaded = list(self._unloaded.items()) + [
            (tp, found) for tp, (found, _) in list(self._offline.items())
        ]
        loaded = list(self.logs())
        rp = {tp: found.recovery_point for tp, found in unloaded}
        ls = {tp: found.log_start_offset for tp, found in unloaded}
        rp.update((tp, plog.recovery_point) for tp, plog in loaded)
        ls.update((tp, plog.log_start_offset) for tp, plog in loaded)
        write_checkpoint(self.data_dir / files.RECOVERY_POINT_CHECKPOINT, rp)
        write_checkpoint(self.data_dir / files.LOG_START_CHECKPOINT, ls)
        if self.keep_high_watermarks:
            hw = {tp: v for tp, v in self._high_watermarks.items() if tp in self._unloaded}
            hw.update((tp, plog.high_watermark) for tp, plog in loaded)
            write_checkpoint(self.data_dir / files.HIGH_WATERMARK_CHECKPOINT, hw)

    def flush_dirty_logs(self) -> int:
        """flush.ms: flush logs whose interval elapsed; returns how many were flushed."""
        return sum(1 for _tp, plog in self.logs() if plog.flush_if_needed())

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        total = sum(plog.delete_old_segments(now_ms) for _tp, plog in self.logs())
        if total:
            self.checkpoint()
        return total

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        return sum(len(plog.remove_expired_producers(now_ms)) for _tp, plog in self.logs())

    def take_snapshots(self) -> None:
        for _tp, plog in self.logs():
            plog.take_snapshot()

    def clean_logs(self, now_ms: int | None = None) -> int:
        """Compact every log whose cleanup.policy includes compact; returns bytes reclaimed."""
        from exactly.storage.cleaner import clean_log

        now = self.clock.milliseconds() if now_ms is None else now_ms
        return sum(clean_log(plog, now) for _tp, plog in self.logs() if plog.config.cleanup_policy.compacts)


def _check_topic_name(topic: str) -> None:
    if (
        not topic
        or len(topic) > 249
        or topic in (".", "..")
        or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in topic)
    ):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"invalid topic name {topic!r}")
