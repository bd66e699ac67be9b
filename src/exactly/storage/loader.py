"""Opening a partition directory and recovering it after a crash (Kafka's `LogLoader`).

Steps (`load_log`):

1. Remove leftovers: `*.tmp`, `*.cleaned`, `*.deleted`. Finish an interrupted compaction swap: a
   `<base>.log.swap` is complete (it was fsynced before being renamed to `.swap`), so the segments it
   replaces are deleted and it is renamed into place.
2. Open every `<base>.log` in offset order and load its indexes. An index that is missing, has a size
   that is not a whole number of entries, goes backwards or points past the log is rebuilt from the
   segment, never trusted. A missing `.txnindex` cannot be rebuilt alone, so it forces recovery from that
   segment (below).
3. Recovery start: without a clean-shutdown marker, the segment holding the recovery point; with it, the
   log end; in both cases no later than the first segment whose `.txnindex` is missing.
4. Producer state up to the recovery start: the newest valid snapshot at or below it (corrupt ones are
   deleted), then a replay of batch headers from the snapshot offset.
5. Every segment from the recovery start is recovered: each batch is checked (size, magic, CRC, header
   consistency, increasing offsets) and applied to producer state, indexes and the `.txnindex` are
   rebuilt. At the first invalid byte the segment is truncated and every later segment deleted.
6. Snapshots above the new log end are deleted; after a recovery the recovered data is fsynced and a
   snapshot is written at the log end, and the recovery point becomes the log end.
7. Leader epochs (as Kafka's `LogLoader`): the cache is read from `leader-epoch-checkpoint`. Missing or
   corrupt (one WARNING), it is rebuilt from the partitionLeaderEpoch of the batches (a header scan of the
   segments not recovered); with a file, the entries at or after the recovery start are dropped. Recovered
   batches then assign their epochs as they are checked (an epoch above the latest starts an entry), and
   the cache is truncated to the log end and from the log start. A cache that changed is written after a
   recovery (with the recovered data), otherwise by the log's next flush or close.
8. An open transaction whose records all lie below the log start is dropped (see
   `ProducerStateManager.drop_transactions_below`): only a crash that lost its marker leaves one.

Nothing flushed is lost: a flushed batch is below the recovery point (never truncated) or, if a
clean-shutdown marker vouches for it, in a fully written segment. Nothing partial is served: every byte
above the recovery point is re-validated before the log opens.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from exactly.clock import Clock
from exactly.errors import CorruptRecordError
from exactly.records.batch import LOG_OVERHEAD, RecordBatch
from exactly.storage import files
from exactly.storage.config import LogConfig
from exactly.storage.leader_epoch import (
    CorruptLeaderEpochCheckpointError,
    LeaderEpochCache,
    read_checkpoint,
    write_checkpoint,
)
from exactly.storage.log import PartitionLog, is_small, replay_batch
from exactly.storage.producer_state import ProducerStateManager
from exactly.storage.segment import H_BASE_OFFSET, H_LAST_DELTA, H_LEADER_EPOCH, H_LENGTH, LogSegment
from exactly.storage.txn_index import TransactionIndex

log = logging.getLogger(__name__)


def _cleanup_and_complete_swaps(directory: Path) -> None:
    names = os.listdir(directory)
    for name in names:
        if name.endswith((".tmp", files.CLEANED_SUFFIX, files.DELETED_SUFFIX)):
            files.unlink(directory / name, missing_ok=True)
    swaps = sorted(n for n in os.listdir(directory) if n.endswith(files.SWAP_SUFFIX))
    if not swaps:
        return
    swap_logs = [n for n in swaps if n.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX)]
    for name in swap_logs:
        base = files.offset_from_name(name)
        if base is None:
            continue
        seg_end = _scan_end_offset(directory / name)
        # Delete the segments the swap file replaces: those starting within [base, seg_end).
        for other in os.listdir(directory):
            off = files.offset_from_name(other)
            if off is None or other.endswith(files.SWAP_SUFFIX) or other.endswith(files.SNAPSHOT_SUFFIX):
                continue
            if base <= off < seg_end:
                files.unlink(directory / other, missing_ok=True)
    for name in swaps:
        files.replace(directory / name, directory / name[: -len(files.SWAP_SUFFIX)])
    files.fsync_dir(directory)


def _scan_end_offset(path: Path) -> int:
    data = path.read_bytes()
    end = -1
    pos = 0
    while pos + 61 <= len(data):
        batch = RecordBatch(data, pos)
        end = batch.next_offset
        pos = batch.end
    return end


def create_log(directory: Path, topic: str, partition: int, config: LogConfig, clock: Clock) -> PartitionLog:
    """A new partition in a new `directory` (FileExistsError if it exists: then `load_log` it): one
    mkdir and one file, nothing listed or read."""
    directory.mkdir()
    segment = LogSegment.create(directory, 0, config, clock.milliseconds(), in_new_directory=True)
    psm = ProducerStateManager(directory, config.producer_id_expiration_ms, f"{topic}-{partition}")
    psm.clear(0)
    return PartitionLog(directory, topic, partition, config, clock, [segment], psm, 0, 0)


def load_log(
    directory: Path,
    topic: str,
    partition: int,
    config: LogConfig,
    clock: Clock,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    had_clean_shutdown: bool = False,
) -> PartitionLog:
    """Open (creating if needed) the partition in `directory`, recovering it when necessary."""
    directory.mkdir(parents=True, exist_ok=True)
    now = clock.milliseconds()
    _cleanup_and_complete_swaps(directory)
    bases = sorted(
        off
        for name in os.listdir(directory)
        if name.endswith(files.LOG_SUFFIX) and (off := files.offset_from_name(name)) is not None
    )
    segments: list[LogSegment] = []
    recovery_start: int | None = None if had_clean_shutdown else recovery_point
    for i, base in enumerate(bases):
        seg = LogSegment.open_existing(directory, base, config, now)
        segments.append(seg)
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        needs_recovery = recovery_start is not None and (nxt is None or nxt > recovery_start)
        if needs_recovery:
            continue  # recovered below; its indexes are rebuilt anyway
        indexes_ok, txn_ok = seg.load_indexes(nxt)
        if not txn_ok:
            recovery_start = base if recovery_start is None else min(recovery_start, base)
            continue
        if not indexes_ok:
            log.warning("rebuilding indexes of segment %d in %s", base, directory)
            try:
                seg.rebuild_indexes()
            except CorruptRecordError:
                recovery_start = base if recovery_start is None else min(recovery_start, base)
    if not segments:
        segments.append(LogSegment.create(directory, max(log_start_offset, 0), config, now))
        recovery_start = None
    # Log start: the checkpoint, but never before the first segment.
    log_start = max(log_start_offset, segments[0].base_offset)

    psm = ProducerStateManager(directory, config.producer_id_expiration_ms, f"{topic}-{partition}")
    first_base = segments[0].base_offset
    epochs, epoch_file = _read_leader_epochs(directory, f"{topic}-{partition}")
    saved_version = 0 if epochs is not None else -1  # the cache's version the file holds (-1: none)
    if recovery_start is not None:
        first_recovered = len(segments) - 1
        for i in range(len(segments)):
            nxt_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if nxt_base is None or nxt_base > recovery_start:
                first_recovered = i
                break
        start_base = segments[first_recovered].base_offset
        snap = psm.truncate_and_reload(log_start, start_base, now, keep_later=True)
        if snap is None:
            psm.clear(first_base)
        _replay(segments[:first_recovered], psm, psm.map_end_offset, start_base)
        if epochs is None:
            epochs = LeaderEpochCache(name=f"{topic}-{partition}")
            _scan_leader_epochs(segments[:first_recovered], epochs)
        else:
            epochs.truncate_from_end(start_base)
        cache = epochs
        truncated = False
        recovered = segments[first_recovered:]
        for i, seg in enumerate(recovered):
            if truncated:
                seg.delete()
                continue

            def on_batch(batch: RecordBatch, txn_index: TransactionIndex = seg.txn_index) -> None:
                replay_batch(psm, batch, txn_index)
                _assign_leader_epoch(cache, batch.partition_leader_epoch, batch.base_offset)

            removed = seg.recover(on_batch)
            nxt = recovered[i + 1].base_offset if i + 1 < len(recovered) else None
            if nxt is not None and seg.next_offset < nxt and not config.cleanup_policy.compacts:
                # The crash shortened this segment's file (its tail was never flushed): later segments
                # would leave a hole in the offsets, so they go too.
                removed = max(removed, 1)
            if removed:
                log.warning(
                    "found invalid data in segment %d of %s: truncated %d bytes",
                    seg.base_offset,
                    directory,
                    removed,
                )
                truncated = True
        segments = [s for s in segments if not s.closed]
        if segments[-1].next_offset < log_start:
            # The crash lost unflushed data that DeleteRecords had already moved the log start past.
            for seg in segments:
                seg.delete()
            segments = [LogSegment.create(directory, log_start, config, now)]
            psm.truncate_fully_and_start_at(log_start)
        leo = segments[-1].next_offset
        psm.delete_snapshots_after(leo)
        psm.update_map_end_offset(leo)
        epochs.truncate_from_end(leo)
        epochs.truncate_from_start(log_start)
        recovery_point = leo
        try:
            for seg in segments:
                seg.flush()
            if psm.latest_snapshot_offset() != leo:
                psm.take_snapshot()
            if epochs.version != saved_version and (epoch_file or not is_small(segments, config)):
                write_checkpoint(directory / files.LEADER_EPOCH_CHECKPOINT, epochs.entries)
                epoch_file = True
                saved_version = epochs.version
        except OSError as e:  # a full disk: serve what was recovered, recover it again next time
            files.storage_error(e, f"the recovered {topic}-{partition}")
            recovery_point = start_base
            for seg in segments:
                if seg.base_offset >= start_base:  # the next flush writes them all again
                    seg.indexes_durable = False
                    seg.flushed_size = 0
    else:
        leo = segments[-1].next_offset
        snap = psm.truncate_and_reload(log_start, leo, now)
        if snap is None:
            psm.clear(first_base)
        if psm.map_end_offset < leo:
            _replay(segments, psm, psm.map_end_offset, leo)
        psm.update_map_end_offset(leo)
        recovery_point = leo
        if epochs is None:
            epochs = LeaderEpochCache(name=f"{topic}-{partition}")
            _scan_leader_epochs(segments, epochs)
        epochs.truncate_from_end(leo)
        epochs.truncate_from_start(log_start)
    psm.drop_transactions_below(log_start)
    return PartitionLog(
        directory,
        topic,
        partition,
        config,
        clock,
        segments,
        psm,
        log_start,
        recovery_point,
        epochs,
        leader_epochs_saved=epochs.version == saved_version,
        leader_epoch_file=epoch_file,
    )


def _read_leader_epochs(directory: Path, name: str) -> tuple[LeaderEpochCache | None, bool]:
    """(the cache in the leader-epoch checkpoint, whether there is a file); None: rebuild it."""
    path = directory / files.LEADER_EPOCH_CHECKPOINT
    try:
        entries = read_checkpoint(path)
    except (CorruptLeaderEpochCheckpointError, OSError) as e:
        log.warning("rebuilding the leader epochs of %s from its batches: cannot use %s (%s)", name, path, e)
        return None, True
    if entries is None:
        return None, False
    return LeaderEpochCache(entries, name), True


def _assign_leader_epoch(cache: LeaderEpochCache, epoch: int, base_offset: int) -> None:
    """Kafka's recovery rule: a batch whose epoch is above the latest one starts that epoch."""
    latest = cache.latest_epoch
    if epoch >= 0 and (latest is None or epoch > latest):
        cache.assign(epoch, base_offset)


def _scan_leader_epochs(segments: list[LogSegment], cache: LeaderEpochCache) -> None:
    """Rebuild leader epochs from the batch headers of trusted segments."""
    for seg in segments:
        try:
            for _pos, hdr in seg.iter_headers(0):
                _assign_leader_epoch(cache, hdr[H_LEADER_EPOCH], hdr[H_BASE_OFFSET])
        except CorruptRecordError as e:  # not expected below the recovery point; the epochs before stand
            log.warning("leader epochs of segment %d: %s", seg.base_offset, e)


def _replay(
    segments: list[LogSegment],
    psm: ProducerStateManager,
    start: int,
    end: int,
    high_watermark: int | None = None,
) -> None:
    """Replay producer state from trusted segments over [start, end) (transactions completed at or above
    `high_watermark` stay unstable; None: the log end, where a loaded log's high watermark starts)."""
    hw = end if high_watermark is None else high_watermark
    for seg in segments:
        if seg.next_offset <= start or seg.base_offset >= end:
            continue
        found = seg.find_position(start) if start > seg.base_offset else (0, None)
        if found is None:
            continue
        for pos, hdr in seg.iter_headers(found[0]):
            if hdr[H_BASE_OFFSET] >= end:
                break
            if hdr[H_BASE_OFFSET] + hdr[H_LAST_DELTA] < start:
                continue
            data = os.pread(seg.fd, hdr[H_LENGTH] + LOG_OVERHEAD, pos)
            replay_batch(psm, RecordBatch(data), None, high_watermark=hw)


def rebuild_producer_state(plog: PartitionLog, now_ms: int) -> None:
    """Reload producer state for `plog` from its newest usable snapshot plus a replay to the log end."""
    psm = plog.producer_state
    leo = plog.log_end_offset
    snap = psm.truncate_and_reload(plog.log_start_offset, leo, now_ms)
    if snap is None:
        psm.clear(plog.segments[0].base_offset)
    _replay(plog.segments, psm, psm.map_end_offset, leo, plog.high_watermark)
    psm.update_map_end_offset(leo)
