"""Moving a replica between the log dirs of one broker (AlterReplicaLogDirs, Kafka's
`ReplicaAlterLogDirsThread`): the future logs of one `LogManager`.

`alter_log_dir` creates `<topic>-<p>.<uuid>-future` in the target dir; the broker then calls
`copy_to_future` step by step (each appends what the current log has past the future's log end, as a
follower append: same batches, same offsets) while the current log keeps serving produce and fetch; once a
step finds the future caught up with the log end, `replace_current_with_future` swaps them with nothing
appended in between (the broker's event loop runs it in one go, Kafka takes the partition's lock): the
future log is closed (all of it durable), the current directory renamed to `...-delete`, the future one
renamed to `<topic>-<p>`, the old one removed. A restart in the middle resumes the move (the future dir is
found next to its current log: `LogManager.startup` hands it to `adopt`) or completes it (a future dir
without a current log was already caught up: it becomes the log); there are never two current copies.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from exactly.errors import ErrorCode, KafkaError
from exactly.storage import files
from exactly.storage.config import LogConfig
from exactly.storage.loader import create_log, load_log
from exactly.storage.log import Isolation, PartitionLog
from exactly.storage.log_placement import TopicPartition

if TYPE_CHECKING:
    from exactly.storage.log_manager import LogManager

log = logging.getLogger(__name__)

MOVE_STEP_BYTES = 1 << 20  # what one `copy_to_future` step copies at most (a replica fetch's size)


class ReplicaMoves:
    """The replicas of one `LogManager` being moved to another of its log dirs: their future logs."""

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager
        self._futures: dict[TopicPartition, PartitionLog] = {}  # each in its target dir

    def alter_log_dir(self, topic: str, partition: int, target: str | Path) -> bool:
        """Start moving the partition's replica to the log dir `target` (Kafka's `alterReplicaLogDirs` on
        one broker); True when a move is now under way, False when the replica already is there (a no-op;
        a move under way elsewhere is abandoned then, as Kafka's). Raises KafkaError LOG_DIR_NOT_FOUND (no
        such log dir), KAFKA_STORAGE_ERROR (the target or the replica is offline), REPLICA_NOT_AVAILABLE
        (no replica of the partition here)."""
        manager = self._manager
        tp = (topic, partition)
        log_dir = manager.resolve_log_dir(target)
        if log_dir is None:
            raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"{target} is not one of this broker's log dirs")
        if log_dir in manager.offline_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log dir {log_dir} is offline")
        current = manager.find(topic, partition)
        if current is None:
            raise KafkaError(
                ErrorCode.REPLICA_NOT_AVAILABLE, f"this broker has no replica of {topic}-{partition}"
            )
        future = self._futures.get(tp)
        if future is not None and future.directory.parent == log_dir:
            return True  # already moving there
        self.abandon(topic, partition)
        source = manager.dir_of(topic, partition)
        if source == log_dir:
            return False
        path = log_dir / files.moved_dir_name(topic, partition, uuid.uuid4().hex, files.FUTURE_DIR_SUFFIX)
        future = create_log(path, topic, partition, manager.config_for(topic), manager.clock)
        if current.log_start_offset > 0:
            future.truncate_fully_and_start_at(current.log_start_offset)
        files.fsync_dir(log_dir)
        self._futures[tp] = future
        log.info("moving %s-%d from %s to %s", topic, partition, source, log_dir)
        return True

    def abandon(self, topic: str, partition: int) -> None:
        """Stop moving the partition (if it is moving): its future log is removed, the current one stays."""
        tp = (topic, partition)
        future = self._futures.pop(tp, None)
        if future is None:
            return
        future.close_without_flush()
        doomed = future.directory.with_name(
            files.moved_dir_name(*tp, uuid.uuid4().hex, files.DELETE_DIR_SUFFIX)
        )
        os.replace(future.directory, doomed)
        files.fsync_dir(doomed.parent)
        shutil.rmtree(doomed, ignore_errors=True)
        log.info("abandoned the move of %s-%d to %s", *tp, doomed.parent)

    def future_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        """The replicas being moved: their future logs."""
        return list(self._futures.items())

    def future_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._futures.get((topic, partition))

    def copy_to_future(self, topic: str, partition: int, max_bytes: int = MOVE_STEP_BYTES) -> bool:
        """One step of a move (Kafka's `ReplicaAlterLogDirsThread`): bring the future log in line with the
        current one (a truncated current log truncates it, as the future's OffsetForLeaderEpoch against the
        current replica would; a moved log start moves its start) and append at most `max_bytes` of what
        the current log has past its end. True when the future log has caught up with the log end."""
        future = self._futures[(topic, partition)]
        current = self._manager.find(topic, partition)
        if current is None:
            self.abandon(topic, partition)
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"{topic}-{partition} has no current log")
        epoch = future.leader_epochs.latest_epoch
        if epoch is not None and future.log_end_offset > future.log_start_offset:
            current_epoch, end = current.end_offset_for_epoch(epoch)
            if current_epoch != epoch or end < future.log_end_offset:
                future.truncate_to(max(min(end, future.log_end_offset), 0))
        if future.log_end_offset > current.log_end_offset:
            future.truncate_to(current.log_end_offset)
        if future.log_end_offset < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        elif future.log_start_offset < current.log_start_offset:
            future.update_follower_high_watermark(current.high_watermark)
            future.delete_records_before(current.log_start_offset)
        if future.log_end_offset < current.log_end_offset:
            data = current.read(future.log_end_offset, max_bytes, Isolation.LOG_END)
            future.append_as_follower(data.records)
        future.update_follower_high_watermark(current.high_watermark)
        return future.log_end_offset == current.log_end_offset

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Finish a move whose future log has caught up (`copy_to_future` said so, and nothing was appended
        since): the future log becomes the partition's log, the old directory is removed. Returns the new
        log; the caller hands it to whoever held the old one (closed now)."""
        manager = self._manager
        tp = (topic, partition)
        future = self._futures[tp]
        current = manager.find(topic, partition)
        source = manager.dir_of(topic, partition)
        if current is None or source is None:
            raise ValueError(f"{topic}-{partition} has no current log")
        if future.log_end_offset != current.log_end_offset:
            raise ValueError(
                f"{topic}-{partition}: the future log ends at {future.log_end_offset}, "
                f"the current one at {current.log_end_offset}"
            )
        target = future.directory.parent
        high_watermark = current.high_watermark
        future.start_leader_epoch(current.leader_epoch)  # an epoch begun with nothing appended in it yet
        with files.synced_together([target, source]):
            future.close()  # all of it durable before the current copy goes
        current.close_without_flush()
        del self._futures[tp]
        old = current.directory
        doomed = old.with_name(
            files.moved_dir_name(topic, partition, uuid.uuid4().hex, files.DELETE_DIR_SUFFIX)
        )
        files.replace(old, doomed)
        files.fsync_dir(old.parent)  # from here a restart completes the move (see `LogManager._resume_move`)
        final = target / files.partition_dir_name(topic, partition)
        files.replace(future.directory, final)
        files.fsync_dir(target)
        plog = load_log(
            final,
            topic,
            partition,
            manager.config_for(topic),
            manager.clock,
            recovery_point=future.log_end_offset,
            log_start_offset=future.log_start_offset,
            had_clean_shutdown=True,
        )
        if manager.keep_high_watermarks:
            plog.update_follower_high_watermark(high_watermark)
        else:
            plog.update_high_watermark(high_watermark)
        manager.install(tp, plog, target)
        files.note_deleted(doomed, tree=True)
        shutil.rmtree(doomed, ignore_errors=True)
        manager.checkpoint()
        log.info("moved %s-%d to %s", topic, partition, target)
        return plog

    # -- for the LogManager -------------------------------------------------------------------------------

    def adopt(self, tp: TopicPartition, future: PartitionLog) -> None:
        """A future log loaded at start-up: its move goes on."""
        self._futures[tp] = future

    def target_dirs(self) -> Iterator[Path]:
        """The target dir of each move (placement counts them)."""
        return (future.directory.parent for future in self._futures.values())

    def update_configs(self, configs: Mapping[str, LogConfig]) -> None:
        for (topic, _p), plog in self._futures.items():
            if topic in configs:
                plog.update_config(configs[topic])

    def clear(self) -> None:
        """Forget every future log (the LogManager closed them)."""
        self._futures.clear()
