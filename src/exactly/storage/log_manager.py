"""Every partition log of the broker, over one or more log directories (Kafka's `LogManager`).

A log dir is one of `log.dirs` (`log.dir` when that is unset). Layout of each::

    <log dir>/
      meta.properties                      version=0 and broker.id=<id> (Kafka's, ZooKeeper mode); a dir
                                           whose broker.id is another broker's is refused at start-up
      .exactly_cleanshutdown               present only between a clean shutdown and the next start
      recovery-point-offset-checkpoint     see checkpoint.py; each dir's files hold its own partitions
      log-start-offset-checkpoint
      replication-offset-checkpoint        high watermarks, in a cluster only (Kafka's HW checkpoint:
                                           a replica restarts with the HW it had, not its log end)
      <topic>-<partition>/                 one PartitionLog each (see files.py)
      <topic>-<partition>.<uuid>-future/   a replica being moved here from another dir (AlterReplicaLogDirs)
      <topic>-<partition>.<uuid>-delete/   the old copy of a moved replica, removed right after the move

Placement (Kafka's `nextLogDirs`, log_placement.py): a new partition goes to the online dir holding the
fewest partitions (current and future logs), the first in `log.dirs` order on a tie. The same partition in
two dirs (not as a future) is a start-up error (`LogDirError`): Kafka refuses to start then too.

`startup()` finds every partition directory and removes the clean-shutdown markers, so a crash from then on
is noticed at the next start; it loads no current log. A partition is loaded (and recovered when the last
stop was not clean, from its checkpointed recovery point, see loader.py) when first asked for (`get_log`),
or by `load_pending`, which the broker calls in small slices after it listens until none is left: start-up
time does not grow with the partition count (Kafka loads every log before it listens). A log enters the map
only after the sync that ends its loading, so no recovery point is read before it is durable. `close()`
closes every loaded log cleanly, writes the checkpoints (an unloaded partition keeps its checkpointed
values) and puts the markers back, unless a partition that needed recovery was never loaded.

Moving a replica between dirs (AlterReplicaLogDirs): `moves`, a `ReplicaMoves` (replica_moves.py), holds
the future logs; a restart in the middle resumes or completes a move (`_resume_move`).

A log dir that cannot be used at start-up (it cannot be created, listed or its meta.properties read: an
I/O error) is offline, logged once: its partitions are unknown to this broker, so while a dir is offline a
partition found in no online dir answers KAFKA_STORAGE_ERROR (Kafka's "log directories are offline" for a
partition that is not new), the others are served. Every dir offline is a start-up error. A partition
whose files cannot be loaded goes offline alone, as before.

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from exactly.clock import Clock
from exactly.errors import ErrorCode, ExactlyError, KafkaError
from exactly.storage import files
from exactly.storage.checkpoint import read_checkpoint, write_checkpoint
from exactly.storage.config import LogConfig
from exactly.storage.loader import create_log, load_log
from exactly.storage.log import PartitionLog
from exactly.storage.log_placement import LogPlacement, TopicPartition
from exactly.storage.replica_moves import ReplicaMoves

log = logging.getLogger(__name__)


_JAVA_LONG_MAX = 2**63 - 1


class LogDirError(ExactlyError):
    """The log dirs cannot be served (the same partition in two dirs, another broker's dir, none usable)."""


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


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica in a log dir, as DescribeLogDirs reports it."""

    topic: str
    partition: int
    size: int  # bytes of its segment files
    offset_lag: int  # a future log: how far behind the current log's end it is; a current log: 0
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """One log dir: its absolute path, why it is offline (None: online) and the replicas it holds."""

    path: str
    error: str | None
    replicas: tuple[ReplicaInfo, ...]


class LogManager:
    def __init__(
        self,
        log_dirs: Path | Sequence[Path],
        default_config: LogConfig,
        clock: Clock,
        topic_configs: Mapping[str, LogConfig] | None = None,
        *,
        keep_high_watermarks: bool = False,
        broker_id: int | None = None,
    ) -> None:
        dirs = [Path(log_dirs)] if isinstance(log_dirs, (str, Path)) else [Path(d) for d in log_dirs]
        if not dirs:
            raise LogDirError("no log directory configured")
        absolute = [os.path.abspath(d) for d in dirs]
        if len(set(absolute)) != len(absolute):
            raise LogDirError(f"a log directory is listed twice in {', '.join(map(str, dirs))}")
        self.log_dirs: tuple[Path, ...] = tuple(dirs)
        self.broker_id = broker_id
        # a cluster's replica restarts with its checkpointed HW (one broker alone: everything is committed)
        self.keep_high_watermarks = keep_high_watermarks
        self._high_watermarks: dict[TopicPartition, int] = {}
        self.default_config = default_config
        self.clock = clock
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._unloaded: dict[TopicPartition, _Unloaded] = {}
        self._offline: dict[TopicPartition, tuple[_Unloaded, str]] = {}  # its loading failed: why
        self._dir_of = LogPlacement()  # the log dir of every current log above
        self.moves = ReplicaMoves(self)  # replicas being moved to another log dir: their future logs
        self._offline_dirs: dict[Path, str] = {}  # log dirs that failed: why
        self._future_recovery: dict[TopicPartition, _Unloaded] = {}  # future logs found at start-up
        self._started = False

    @property
    def data_dir(self) -> Path:
        """The first log dir (where a broker keeps what is not a partition: its metadata)."""
        return self.log_dirs[0]

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self._offline_dirs]

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """The log dirs that failed, with why."""
        return dict(self._offline_dirs)

    # -- lifecycle ----------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Find every partition directory of every log dir (loading none, see the module doc)."""
        found: dict[TopicPartition, Path] = {}
        futures: dict[TopicPartition, Path] = {}
        for log_dir in self.log_dirs:
            try:
                self._startup_dir(log_dir, found, futures)
            except OSError as e:
                self._dir_failed(log_dir, e)
        if not self.online_dirs:
            raise LogDirError(
                "no log directory is usable: "
                + "; ".join(f"{d}: {why}" for d, why in self._offline_dirs.items())
            )
        for tp, path in futures.items():
            self._resume_move(tp, path)
        self._started = True

    def _startup_dir(
        self, log_dir: Path, found: dict[TopicPartition, Path], futures: dict[TopicPartition, Path]
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self._check_meta_properties(log_dir)
        marker = log_dir / files.CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = read_checkpoint(log_dir / files.RECOVERY_POINT_CHECKPOINT)
        starts = read_checkpoint(log_dir / files.LOG_START_CHECKPOINT)
        if self.keep_high_watermarks:
            self._high_watermarks.update(read_checkpoint(log_dir / files.HIGH_WATERMARK_CHECKPOINT))
        for name in sorted(os.listdir(log_dir)):
            path = log_dir / name
            if name.endswith(".tmp-delete") or files.parse_moved_dir_name(name, files.DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            future = files.parse_moved_dir_name(name, files.FUTURE_DIR_SUFFIX)
            if future is not None and path.is_dir():
                if future in futures:
                    raise LogDirError(
                        f"two future logs of partition {future[0]}-{future[1]}: {futures[future]} and {path}"
                    )
                futures[future] = path
                continue
            tp = files.parse_partition_dir_name(name)
            if tp is None or not path.is_dir():
                continue
            if tp in found:
                raise LogDirError(
                    f"partition {tp[0]}-{tp[1]} is in two log directories: {found[tp]} and {path}; "
                    "remove the one that is not current"
                )
            found[tp] = path
            self._unloaded[tp] = _Unloaded(path, recovery.get(tp, 0), starts.get(tp, 0), clean)
            self._dir_of.place(tp, log_dir)
        # a future log is recovered as any log after a crash: from its dir's checkpointed recovery point
        for tp, path in futures.items():
            if path.parent == log_dir:
                self._future_recovery[tp] = _Unloaded(path, recovery.get(tp, 0), starts.get(tp, 0), clean)
        files.unlink(marker, missing_ok=True)
        files.fsync_dir(log_dir)

    def _check_meta_properties(self, log_dir: Path) -> None:
        """Write meta.properties in a dir that has none; refuse a dir that belongs to another broker."""
        path = log_dir / files.META_PROPERTIES
        try:
            text = path.read_text()
        except FileNotFoundError:
            lines = ["version=0"] + ([] if self.broker_id is None else [f"broker.id={self.broker_id}"])
            files.write_atomically(path, ("\n".join(lines) + "\n").encode())
            return
        except UnicodeDecodeError:
            raise LogDirError(f"{path} is damaged (not text); restore it or remove it") from None
        props = dict(
            line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
        )
        theirs = props.get("broker.id", props.get("node.id"))
        if self.broker_id is not None and theirs is not None and theirs.strip() != str(self.broker_id):
            raise LogDirError(
                f"log directory {log_dir} belongs to broker {theirs.strip()} (its meta.properties), "
                f"this is broker {self.broker_id}"
            )

    def _dir_failed(self, log_dir: Path, e: OSError) -> None:
        why = f"{type(e).__name__}: {e.strerror or e}"
        if log_dir not in self._offline_dirs:
            log.error(
                "log directory %s is offline (%s): its partitions answer KAFKA_STORAGE_ERROR, the broker "
                "serves the others",
                log_dir,
                why,
            )
        self._offline_dirs[log_dir] = why

    def _resume_move(self, tp: TopicPartition, path: Path) -> None:
        """A future log found at start-up: the move goes on (its current log is here) or is completed (the
        current one was already renamed away: the future caught up before the restart)."""
        found = self._future_recovery.pop(tp)
        if tp not in self._dir_of:  # the swap had begun: the future is the partition now
            final = path.with_name(files.partition_dir_name(*tp))
            files.replace(path, final)
            files.fsync_dir(path.parent)
            log.info("completed the move of %s-%d to %s (interrupted by a restart)", *tp, path.parent)
            self._unloaded[tp] = _Unloaded(final, found.recovery_point, found.log_start_offset, found.clean)
            self._dir_of.place(tp, path.parent)
            return
        try:
            with files.synced_together(path.parent):
                future = load_log(
                    path,
                    tp[0],
                    tp[1],
                    self.config_for(tp[0]),
                    self.clock,
                    recovery_point=found.recovery_point,
                    log_start_offset=found.log_start_offset,
                    had_clean_shutdown=found.clean,
                )
            self.moves.adopt(tp, future)
            log.info("resuming the move of %s-%d to %s", *tp, path.parent)
        except Exception as e:  # noqa: BLE001 (the copy is dropped; the current log is intact)
            log.warning("dropping the unfinished move of %s-%d to %s: %s", *tp, path.parent, e)
            shutil.rmtree(path, ignore_errors=True)

    @property
    def pending(self) -> int:
        """Partitions found at start-up and not loaded yet."""
        return len(self._unloaded)

    def load_pending(self, limit: int) -> int:
        """Load up to `limit` of the partitions not loaded yet, with one sync; returns how many are left."""
        batch = list(itertools.islice(self._unloaded, limit))
        loaded: list[tuple[TopicPartition, PartitionLog]] = []
        with files.synced_together(self.online_dirs):  # one syncfs for every recovery, not fsyncs each
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
        """Clean shutdown: flush and close every log, checkpoint, write the clean-shutdown markers."""
        online = self.online_dirs
        try:
            with files.synced_together(online):  # one syncfs for every log, not fsyncs each
                for plog in self._logs_and_futures():
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
                for log_dir in online:
                    files.write_atomically(log_dir / files.CLEAN_SHUTDOWN_FILE, b"")
        except (OSError, KafkaError) as e:  # a full disk: stop as after a crash (recovery at next start)
            log.warning("shutting down without the clean-shutdown marker: %s", e)
            for plog in self._logs_and_futures():
                plog.close_without_flush()
        self._logs.clear()
        self._unloaded.clear()
        self._offline.clear()
        self.moves.clear()
        self._dir_of.clear()
        self._started = False

    def _logs_and_futures(self) -> list[PartitionLog]:
        return [*self._logs.values(), *(future for _tp, future in self.moves.future_logs())]

    # -- partitions ---------------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        self.set_topic_configs({topic: config})

    def set_topic_configs(self, configs: Mapping[str, LogConfig]) -> None:
        """Each named topic's logs (loaded ones and futures; the others load with it) take its config,
        visiting only those topics' partitions (a topic's config changes per topic: a broker default that
        changes reaches every topic, a cluster member learns each topic's config when it starts)."""
        self._topic_configs.update(configs)
        for topic, config in configs.items():
            for partition in self._dir_of.partitions_of(topic):
                plog = self._logs.get((topic, partition))
                if plog is not None:
                    plog.update_config(config)
        self.moves.update_configs(configs)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log (loaded now if it was not); KAFKA_STORAGE_ERROR for a partition that is offline, and
        for one found nowhere while a log dir is offline (it may be in that dir)."""
        plog = self.find(topic, partition)
        if plog is None and self._offline_dirs:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"partition {topic}-{partition} is in no online log directory "
                f"(offline: {', '.join(map(str, self._offline_dirs))})",
            )
        return plog

    def find(self, topic: str, partition: int) -> PartitionLog | None:
        """The log (loaded now if it was not), or None when no online dir has it; KAFKA_STORAGE_ERROR when
        it is offline (`get_log` also raises it for a partition found nowhere while a dir is offline)."""
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is None and tp in self._unloaded:
            with files.synced_together(self._dir_of[tp]):
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

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding the partition's current log (None: no online dir has it)."""
        return self._dir_of.get((topic, partition))

    def next_log_dir(self) -> Path:
        """Where a new partition goes (Kafka's `nextLogDirs`): the online dir with the fewest partitions,
        current and future logs counted, the first in `log.dirs` order on a tie."""
        online = self.online_dirs
        if not online:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "every log directory is offline")
        return self._dir_of.next_dir(online, self.moves.target_dirs())

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        existing = self.find(topic, partition)
        if existing is not None:
            return existing
        if config is not None:
            self._topic_configs[topic] = config
        _check_topic_name(topic)
        log_dir = self.next_log_dir()
        path = log_dir / files.partition_dir_name(topic, partition)
        try:
            try:
                plog = create_log(path, topic, partition, self.config_for(topic), self.clock)
            except FileExistsError:  # left by an interrupted create or delete: load what is there
                plog = load_log(
                    path, topic, partition, self.config_for(topic), self.clock, had_clean_shutdown=True
                )
            files.fsync_dir(log_dir)
        except OSError as e:
            if not log_dir.is_dir():  # the dir itself is gone: offline, as a Kafka log dir that fails
                self._dir_failed(log_dir, e)
            raise
        self._logs[(topic, partition)] = plog
        self._dir_of.place((topic, partition), log_dir)
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
        for log_dir in self.online_dirs:
            path = log_dir / files.partition_dir_name(topic, partition)
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
                files.note_deleted(path, tree=True)

    def delete_log(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        self.moves.abandon(topic, partition)
        plog = self._logs.pop(tp, None)
        found = self._unloaded.pop(tp, None)
        if found is None and tp in self._offline:
            found = self._offline.pop(tp)[0]
        self._dir_of.remove(tp)
        if plog is not None:
            plog.close_without_flush()
            path = plog.directory
        elif found is not None:
            path = found.path
        else:
            return
        doomed = path.with_name(path.name + ".tmp-delete")
        os.replace(path, doomed)
        files.fsync_dir(path.parent)
        files.note_deleted(path, tree=True)
        shutil.rmtree(doomed, ignore_errors=True)

    # -- log dirs ---------------------------------------------------------------------------------------

    def resolve_log_dir(self, path: str | Path) -> Path | None:
        """The configured log dir that `path` names (absolute, or the same directory), or None."""
        wanted = os.path.abspath(path)
        for log_dir in self.log_dirs:
            if os.path.abspath(log_dir) == wanted or os.path.realpath(log_dir) == os.path.realpath(wanted):
                return log_dir
        return None

    def install(self, tp: TopicPartition, plog: PartitionLog, log_dir: Path) -> None:
        """`plog` is the partition's current log now, in `log_dir` (a moved replica, replica_moves.py)."""
        self._logs[tp] = plog
        self._dir_of.place(tp, log_dir)

    # -- describing --------------------------------------------------------------------------------------

    @property
    def absolute_path(self) -> str:
        """The first log dir as Kafka names a log dir: absolute, symlinks not resolved."""
        return os.path.abspath(self.data_dir)

    def disk_space(self, log_dir: Path | None = None) -> DiskSpace:
        """statvfs of a log dir, the first by default (OSError when the file system cannot be asked);
        usable space is what an unprivileged process may still write (f_bavail), as Java's getUsableSpace."""
        st = os.statvfs(self.data_dir if log_dir is None else log_dir)
        return DiskSpace(
            min(st.f_blocks * st.f_frsize, _JAVA_LONG_MAX), min(st.f_bavail * st.f_frsize, _JAVA_LONG_MAX)
        )

    def describe(self, wanted: set[TopicPartition] | None = None) -> list[LogDirInfo]:
        """Every log dir in `log.dirs` order with its replicas (only those of `wanted` when given), loading
        the partitions not loaded yet; an offline dir lists none."""
        self.load_all()
        per_dir: dict[Path, list[ReplicaInfo]] = {d: [] for d in self.log_dirs}
        for tp, plog in sorted(self._logs.items()):
            if wanted is None or tp in wanted:
                per_dir[self._dir_of[tp]].append(ReplicaInfo(*tp, plog.size_in_bytes, 0, False))
        for tp, future in sorted(self.moves.future_logs()):
            if wanted is None or tp in wanted:
                current = self._logs.get(tp)
                lag = 0 if current is None else max(0, current.log_end_offset - future.log_end_offset)
                per_dir[future.directory.parent].append(ReplicaInfo(*tp, future.size_in_bytes, lag, True))
        return [
            LogDirInfo(os.path.abspath(d), self._offline_dirs.get(d), tuple(per_dir[d]))
            for d in self.log_dirs
        ]

    # -- periodic work (the broker calls these from its timers) ---------------------------------------------

    def checkpoint(self) -> None:
        """Write each online log dir's recovery points (advanced only by flushes) and log start offsets (and
        high watermarks in a cluster) of the logs it holds, future logs included."""
        per_dir: dict[Path, list[tuple[TopicPartition, int, int, int | None]]] = {
            d: [] for d in self.online_dirs
        }
        unloaded = list(self._unloaded.items()) + [
            (tp, found) for tp, (found, _) in list(self._offline.items())
        ]
        # every current log is placed (loaded, unloaded or offline): no Path.parent per log, ~3 us each
        dir_of = self._dir_of
        for tp, found in unloaded:
            hw = self._high_watermarks.get(tp) if tp in self._unloaded else None
            per_dir.get(dir_of[tp], []).append((tp, found.recovery_point, found.log_start_offset, hw))
        for tp, plog in self.logs():
            entry = (tp, plog.recovery_point, plog.log_start_offset, plog.high_watermark)
            per_dir.get(dir_of[tp], []).append(entry)
        for tp, plog in self.moves.future_logs():
            entry = (tp, plog.recovery_point, plog.log_start_offset, plog.high_watermark)
            per_dir.get(plog.directory.parent, []).append(entry)
        for log_dir, entries in per_dir.items():
            write_checkpoint(log_dir / files.RECOVERY_POINT_CHECKPOINT, {tp: rp for tp, rp, _, _ in entries})
            write_checkpoint(log_dir / files.LOG_START_CHECKPOINT, {tp: ls for tp, _, ls, _ in entries})
            if self.keep_high_watermarks:
                hws = {tp: hw for tp, _, _, hw in entries if hw is not None}
                write_checkpoint(log_dir / files.HIGH_WATERMARK_CHECKPOINT, hws)

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
