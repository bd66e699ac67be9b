"""All partition logs under one data directory (Kafka's `LogManager`).

Layout::

    <data_dir>/
      .exactly_cleanshutdown               present only between a clean shutdown and the next start
      recovery-point-offset-checkpoint     see checkpoint.py
      log-start-offset-checkpoint
      <topic>-<partition>/                 one PartitionLog each (see files.py)

`startup()` loads every partition (recovering those that need it, see loader.py) and removes the
clean-shutdown marker, so a crash from then on is noticed at the next start. `close()` closes every log
cleanly, writes the checkpoints and puts the marker back.

The broker owns the timers; storage only exposes the periodic work: `flush_dirty_logs` (flush.ms),
`checkpoint` (recovery points, only ever advanced by flushes), `delete_old_segments` (retention),
`remove_expired_producers` (producer.id.expiration.ms), `take_snapshots`, `clean_logs` (compaction).

Per-topic configuration lives in the broker's metadata; the broker passes overrides in with
`set_topic_config` (and at startup through `topic_configs`).
"""

from __future__ import annotations

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
from exactly.storage.loader import load_log
from exactly.storage.log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

_JAVA_LONG_MAX = 2**63 - 1


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
    ) -> None:
        self.data_dir = Path(data_dir)
        self.default_config = default_config
        self.clock = clock
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Load (and if needed recover) every partition directory."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / files.CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = read_checkpoint(self.data_dir / files.RECOVERY_POINT_CHECKPOINT)
        starts = read_checkpoint(self.data_dir / files.LOG_START_CHECKPOINT)
        with files.synced_together(self.data_dir):  # one syncfs for every recovery, not fsyncs each
            for name in sorted(os.listdir(self.data_dir)):
                path = self.data_dir / name
                if name.endswith(".tmp-delete"):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                parsed = files.parse_partition_dir_name(name)
                if parsed is None or not path.is_dir():
                    continue
                tp = parsed
                self._logs[tp] = load_log(
                    path,
                    tp[0],
                    tp[1],
                    self.config_for(tp[0]),
                    self.clock,
                    recovery_point=recovery.get(tp, 0),
                    log_start_offset=starts.get(tp, 0),
                    had_clean_shutdown=clean,
                )
        try:
            self.checkpoint()
        except OSError as e:  # a full disk: the old checkpoints stay (only more recovery next time)
            files.storage_error(e, "the checkpoints")
        files.unlink(marker, missing_ok=True)
        files.fsync_dir(self.data_dir)
        self._started = True

    def close(self) -> None:
        """Clean shutdown: flush and close every log, checkpoint, write the clean-shutdown marker."""
        try:
            with files.synced_together(self.data_dir):  # one syncfs for every log, not fsyncs each
                for plog in self._logs.values():
                    plog.close()
            self.checkpoint()
            files.write_atomically(self.data_dir / files.CLEAN_SHUTDOWN_FILE, b"")
        except (OSError, KafkaError) as e:  # a full disk: stop as after a crash (recovery at next start)
            log.warning("shutting down without the clean-shutdown marker: %s", e)
            for plog in self._logs.values():
                plog.close_without_flush()
        self._logs.clear()
        self._started = False

    # -- partitions ---------------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (t, _p), plog in self._logs.items():
            if t == topic:
                plog.update_config(config)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        yield from list(self._logs.items())

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if config is not None:
            self._topic_configs[topic] = config
        _check_topic_name(topic)
        path = self.data_dir / files.partition_dir_name(topic, partition)
        plog = load_log(path, topic, partition, self.config_for(topic), self.clock, had_clean_shutdown=True)
        files.fsync_dir(self.data_dir)
        self._logs[(topic, partition)] = plog
        return plog

    def remove_partition_dir(self, topic: str, partition: int) -> None:
        """Remove what a failed `get_or_create_log` left of a partition that has no log (a half-made
        directory); a partition with a log is left alone (that is `delete_log`'s job)."""
        if (topic, partition) in self._logs:
            return
        path = self.data_dir / files.partition_dir_name(topic, partition)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            files.note_deleted(path, tree=True)

    def delete_log(self, topic: str, partition: int) -> None:
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return
        plog.close_without_flush()
        path = plog.directory
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
        rp = {tp: plog.recovery_point for tp, plog in self._logs.items()}
        ls = {tp: plog.log_start_offset for tp, plog in self._logs.items()}
        write_checkpoint(self.data_dir / files.RECOVERY_POINT_CHECKPOINT, rp)
        write_checkpoint(self.data_dir / files.LOG_START_CHECKPOINT, ls)

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
