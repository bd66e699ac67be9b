"""The partition log as the broker sees it (Kafka's `UnifiedLog` + `LocalLog`).

A `PartitionLog` is an ordered list of `LogSegment`s (the last one is *active* and takes appends), the
partition's `ProducerStateManager`, and four offsets:

    log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset
                        (read_committed bound)  (read_uncommitted bound)

* `log_end_offset` (LEO) is the next offset to assign.
* `high_watermark` (HW): set from above (`update_high_watermark`) by the partition's leader
  (`exactly.replication.partition`), never by an append: a single-replica leader moves it to the LEO after
  each append, a replicated one to what the ISR has. Loading sets it to the recovered LEO. Storage knows
  nothing of acks: whether an answer waits for `flush` is the replica manager's business.
* `last_stable_offset` (LSO) = min(first offset of any open transaction, HW), never below the log start.
* `recovery_point`: every offset below it has been fsynced (log and indexes). It only moves in `flush`;
  the LogManager checkpoints it. After a crash, recovery re-validates from it.

Appending (`append_as_leader`): validate the batches (validator.py), check each producer's batches
against its state (duplicates answer with the original offsets and append nothing), roll the segment if
needed, write every batch with its new baseOffset and partitionLeaderEpoch and nothing else changed, then
apply the producer state and record aborted transactions in the active segment's `.txnindex`.

Follower appends (`append_as_follower`, Kafka's `appendAsFollower`): batches fetched from the leader are
checked (CRC, structure, offsets following the log end) and written as they are, nothing patched; segments
roll by the same rule, judged batch by batch, so a follower's segment files are its leader's; each batch
enters its leader epoch in the cache and is replayed into producer state as recovery replays it (origin
REPLICATION). The follower's high watermark comes from the leader's (`update_follower_high_watermark`).
A follower that diverged truncates (`truncate_to`); one whose log end is below the leader's log start
starts over (`truncate_fully_and_start_at`).

Durability and group commit: appends never fsync by themselves (unless Kafka's flush.messages says so).
The broker acks an acks=all append after `flush(upto=info.last_offset + 1)` returns, typically from an
executor thread. Concurrent callers share fsyncs: a flush covers everything appended before it started,
and a caller whose offset is already covered returns at once. Structural changes (deleting, truncating,
replacing or closing segments) take the same lock as flushes; appends and rolls do not.

Leader epochs (leader_epoch.py): the log owns its `LeaderEpochCache`. An append at a leader epoch the
cache does not end with assigns (epoch, first offset) before the log end moves; `truncate_to` drops the
entries at or above the new log end; a log start that moves (DeleteRecords, retention) truncates the cache
from the start. Nothing is written on the append path: the next flush writes `leader-epoch-checkpoint`
(atomically, before the recovery point moves past the data it describes), and so does `close`. Except that
a log small enough to make no file at close (`_SMALL_AT_CLOSE`) and that has no checkpoint file yet gets
none: the loader rebuilds a missing checkpoint from the batches' partitionLeaderEpoch fields, a scan of a
few KiB for such a log. `leader_epoch` is the epoch of the latest leader append (0 for a new partition);
`end_offset_for_epoch` answers OffsetForLeaderEpoch as Kafka's leader, whose cache holds (its epoch, the
log end when it was elected) before anything is appended in that epoch.

Reads (`read`) come from one segment, start at the batch holding the fetch offset (found through the
offset index, then a header scan), never return a partial batch, stop below the HW, the LSO
(read_committed) or the LEO (`Isolation.LOG_END`: follower fetches), and for read_committed also return
the aborted transactions overlapping the range (see txn_index.py).
"""

from __future__ import annotations

import logging
import struct
import threading
from bisect import bisect_right
from builtins import memoryview  # the compiled build resolves FetchDataInfo's annotations in this module
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import crc32c

from exactly.clock import Clock
from exactly.errors import CorruptRecordError, ErrorCode, KafkaError
from exactly.records.batch import HEADER_STRUCT, LOG_OVERHEAD, RecordBatch, TimestampType, iter_batches
from exactly.records.control import EndTxnMarker, build_end_txn_marker_batch, parse_end_txn_marker
from exactly.storage import files
from exactly.storage.append_analysis import VerificationGuard, analyze_append
from exactly.storage.config import LogConfig
from exactly.storage.drop_behind import DROP_BEHIND
from exactly.storage.file_slice import FileSlice
from exactly.storage.leader_epoch import LeaderEpochCache, write_checkpoint
from exactly.storage.producer_state import (
    AppendOrigin,
    ProducerInfo,
    ProducerStateManager,
    TxnMetadata,
)
from exactly.storage.recompression import needs_recompression, recompress, target_codec
from exactly.storage.segment import (
    H_BASE_OFFSET,
    H_COUNT,
    H_LAST_DELTA,
    H_LEADER_EPOCH,
    H_LENGTH,
    H_MAX_TS,
    H_PRODUCER_ID,
    Header,
    LogSegment,
)
from exactly.storage.txn_index import AbortedTxn, FetchAbortedTxn, TransactionIndex
from exactly.storage.validator import (
    BatchInfo,
    parse_internal_batches,
    uses_log_append_time,
    validate_client_batches,
)

log = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview
_PATCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_LAT_PATCH = struct.Struct(">hiqq")  # attributes, lastOffsetDelta, baseTimestamp, maxTimestamp at 21
_TXN_ATTR = 0x10
_CONTROL_ATTR = 0x20
_NO_LIMIT = 1 << 62
_SMALL_AT_CLOSE = (
    4096  # a log of one segment up to this size (and index.interval.bytes) makes no file at close
)


class Isolation(Enum):
    """How far a read may go (Kafka's `FetchIsolation`): the high watermark (consumers reading
    uncommitted), the last stable offset (read_committed consumers, who also get the aborted transactions),
    or the log end offset (follower replicas: Fetch with a replica id >= 0)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1
    LOG_END = 2


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is not where the log ends (Kafka's
    `UnexpectedAppendOffsetException`); OFFSET_OUT_OF_RANGE, a code never sent to a client.

    `first_offset` and `last_offset` are the append's: when the log is empty (log start == log end) and
    `first_offset < log_end_offset <= last_offset`, the leader's log start lies inside the first batch
    (DeleteRecords), and Kafka's follower restarts its log at the batch (`truncate_fully_and_start_at
    (first_offset)`) and appends again (`Partition.appendRecordsToFollowerOrFutureReplica`)."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)
        self.first_offset = first_offset
        self.last_offset = last_offset


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool
    records_count: int
    valid_bytes: int


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    records: memoryview  # whole batches only (empty when they are in `file_slice`)
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[FetchAbortedTxn] | None  # None for read_uncommitted
    next_offset: int  # offset after the last returned batch (fetch offset when empty)
    file_slice: FileSlice | None = None  # read with zero_copy: the batches' range of their segment file


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int


EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class PartitionLog:
    """One partition's log. Build it with `loader.load_log` (or `LogManager`), not directly."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        producer_state: ProducerStateManager,
        log_start_offset: int,
        recovery_point: int,
        leader_epochs: LeaderEpochCache | None = None,
        *,
        leader_epochs_saved: bool = True,
        leader_epoch_file: bool = False,
    ) -> None:
        """`leader_epochs_saved`: the checkpoint file holds `leader_epochs` as they are (or there is no file
        and the cache is what a rebuild from the batches gives); `leader_epoch_file`: a file exists."""
        if not segments:
            raise ValueError("a log has at least one segment")
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.producer_state = producer_state
        self._log_end_offset = segments[-1].next_offset
        self._log_start_offset = max(log_start_offset, segments[0].base_offset)
        self._high_watermark = self._log_end_offset
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        self._flush_lock = threading.Lock()
        self._epochs = (
            leader_epochs if leader_epochs is not None else LeaderEpochCache(name=f"{topic}-{partition}")
        )
        self._epochs_saved = self._epochs.version if leader_epochs_saved else -1
        self._epoch_file = leader_epoch_file
        latest_epoch = self._epochs.latest_epoch
        self._leader_epoch = 0 if latest_epoch is None else latest_epoch
        self.closed = False
        self._log_prefix = f"[PartitionLog {topic}-{partition}] "

    # -- offsets ------------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below this one is on disk (fsynced)."""
        return self._recovery_point

    @property
    def durable_offset(self) -> int:
        return self._recovery_point

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None:
            return self._high_watermark
        # As Kafka (maybeIncrementFirstUnstableOffset): never below the log start offset.
        return max(self._log_start_offset, min(first_unstable, self._high_watermark))

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def update_high_watermark(self, offset: int) -> None:
        self._high_watermark = max(self._log_start_offset, min(offset, self._log_end_offset))
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def update_follower_high_watermark(self, high_watermark: int) -> int:
        """A follower takes the leader's high watermark from a Fetch response: clamped to [log start, log
        end], and unlike a leader's it may move down (Kafka's follower logs a warning then). Returns the new
        high watermark. A transaction whose marker the high watermark has passed stays stable when it moves
        back down, as in Kafka."""
        hw = max(self._log_start_offset, min(high_watermark, self._log_end_offset))
        if hw < self._high_watermark:
            log.info(
                "%sthe leader's high watermark %d moves the follower's down from %d",
                self._log_prefix,
                hw,
                self._high_watermark,
            )
        self._high_watermark = hw
        self.producer_state.on_high_watermark_updated(hw)
        return hw

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for s in self._segments:
            s.config = config

    # -- leader epochs ------------------------------------------------------------------------------------

    @property
    def leader_epoch(self) -> int:
        """The partition's leader epoch: that of the latest leader append (0 for a new partition)."""
        return self._leader_epoch

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        return self._epochs

    def start_leader_epoch(self, epoch: int) -> None:
        """This replica became the leader in `epoch`: the epoch starts at the log end (Kafka's makeLeader,
        KAFKA-7415), so OffsetForLeaderEpoch answers followers right before anything is appended in it."""
        self._check_open()
        if epoch > self._leader_epoch or self._epochs.latest_epoch is None:
            self._epochs.assign(epoch, self._log_end_offset)
        self._leader_epoch = max(self._leader_epoch, epoch)

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), Kafka's leader answer (see `LeaderEpochCache.
        end_offset_for`; (-1, -1) is UNDEFINED). Until something is appended in the current leader epoch,
        the answer is as if the cache already had (that epoch, the log end offset), as Kafka's has."""
        self._check_open()
        leo = self._log_end_offset
        cache = self._epochs
        latest = cache.latest_epoch
        if latest is None or latest < self._leader_epoch:
            cache = cache.copy()
            cache.assign(self._leader_epoch, leo)
        return cache.end_offset_for(requested_epoch, leo)

    def _is_small(self) -> bool:
        return is_small(self._segments, self.config)

    def _save_leader_epochs(self) -> None:
        """Write the leader-epoch checkpoint if the cache changed since it was written (holds `_flush_lock`).
        A small log without a checkpoint file gets none (the loader rebuilds it by a scan). Raises OSError."""
        version = self._epochs.version
        if version == self._epochs_saved or (not self._epoch_file and self._is_small()):
            return
        write_checkpoint(self.directory / files.LEADER_EPOCH_CHECKPOINT, self._epochs.entries)
        self._epoch_file = True
        self._epochs_saved = version

    # -- producer state views -----------------------------------------------------------------------------

    def producer_infos(self) -> list[ProducerInfo]:
        return self.producer_state.producer_infos()

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return self.producer_state.ongoing_transactions()

    # -- appends ------------------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: Buffer,
        *,
        leader_epoch: int = 0,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
        validated: list[BatchInfo] | None = None,
    ) -> LogAppendInfo:
        """Validate and append one Produce partition's records (or broker-built batches).

        Raises KafkaError (the code the client must see). A duplicate of one of a producer's last five
        batches returns the original offsets with `duplicate=True` and appends nothing. A caller that
        already ran `validate_client_batches(records, log.config, now)` passes its result as `validated`
        so the CRC is not computed twice.
        """
        self._check_open()
        now = self.clock.milliseconds()
        if validated is not None:
            infos = validated
        elif origin is AppendOrigin.CLIENT:
            infos = validate_client_batches(records, self.config, now, f"{self.topic}-{self.partition}")
        else:
            infos = parse_internal_batches(records, self.config)
        view = records if isinstance(records, memoryview) else memoryview(records)
        codec = target_codec(self.config) if origin is AppendOrigin.CLIENT else None
        if codec is not None:  # compression.type names a codec: rewrite batches that have another
            positions = [info.position for info in infos]
            if needs_recompression(view, positions, codec):
                view = memoryview(recompress(view, positions, self.config))
                infos = validate_client_batches(view, self.config, now)

        # 1. Assign offsets and check producer state (prepare; nothing changes yet).
        plan = analyze_append(
            self.producer_state,
            infos,
            view,
            self._log_end_offset,
            lambda info: now if uses_log_append_time(self.config, info) else info.max_timestamp,
            origin,
            verification_guard,
        )
        if plan.duplicate is not None:
            dup = plan.duplicate
            return LogAppendInfo(dup.first_offset, dup.last_offset, -1, self._log_start_offset, True, 0, 0)
        placed, next_offset, total_size, count = plan.placed, plan.next_offset, plan.total_size, plan.records

        # 2. Roll if needed, then write (a failed write leaves the log as it was: KAFKA_STORAGE_ERROR).
        first_info = infos[0]
        try:
            segment = self._maybe_roll(total_size, first_info.max_timestamp, next_offset - 1, now)
        except OSError as e:
            raise files.storage_error(e, f"{self.topic}-{self.partition}") from e
        log_append_time = -1
        buffers: list[bytes | memoryview] = []
        batch_meta: list[tuple[int, int, int]] = []
        for info, base in placed:
            pos = info.position
            end = pos + info.size
            last = base + info.last_offset_delta
            if uses_log_append_time(self.config, info):
                log_append_time = now
                buffers.append(self._log_append_time_header(view, info, base, leader_epoch, now))
                buffers.append(view[pos + 61 : end])
                batch_meta.append((info.size, last, now))
            else:
                buffers.append(_PATCH.pack(base, info.size - 12, leader_epoch))
                buffers.append(view[pos + 16 : end])
                batch_meta.append((info.size, last, info.max_timestamp))
        try:
            segment.append(buffers, batch_meta)
        except OSError as e:
            raise files.storage_error(e, f"{self.topic}-{self.partition}") from e
        files.storage_ok()

        # 3. Leader epoch, producer state and transactions.
        latest = self._epochs.latest_entry
        if leader_epoch >= 0 and (latest is None or latest.epoch != leader_epoch):
            self._epochs.assign(leader_epoch, placed[0][1])
        self._leader_epoch = leader_epoch
        self._log_end_offset = next_offset
        for upd in plan.updates.values():
            self.producer_state.update(upd)
        for done in plan.completed:
            if done.is_aborted:
                lso = self.producer_state.last_stable_offset(done)
                segment.txn_index.append(
                    AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso)
                )
            self.producer_state.complete_txn(done, self._high_watermark)
        self.producer_state.update_map_end_offset(next_offset)

        first_offset = placed[0][1]
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        return LogAppendInfo(
            first_offset,
            next_offset - 1,
            log_append_time,
            self._log_start_offset,
            False,
            count,
            total_size,
        )

    @staticmethod
    def _log_append_time_header(
        view: memoryview, info: BatchInfo, base: int, leader_epoch: int, now: int
    ) -> bytes:
        header = bytearray(view[info.position : info.position + 61])
        _PATCH.pack_into(header, 0, base, info.size - 12, leader_epoch)
        attrs = info.attributes | 0x08
        struct.pack_into(">h", header, 21, attrs)
        struct.pack_into(">q", header, 35, now)
        crc = crc32c.crc32c(memoryview(header)[21:61])
        crc = crc32c.crc32c(view[info.position + 61 : info.position + info.size], crc)
        struct.pack_into(">I", header, 17, crc)
        return bytes(header)

    def append_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: EndTxnMarker,
        *,
        leader_epoch: int = 0,
        now_ms: int | None = None,
    ) -> LogAppendInfo:
        """Write a COMMIT/ABORT control batch for `producer_id` (WriteTxnMarkers, coordinator origin)."""
        ts = self.clock.milliseconds() if now_ms is None else now_ms
        batch = build_end_txn_marker_batch(producer_id, producer_epoch, marker, timestamp_ms=ts)
        return self.append_as_leader(batch, leader_epoch=leader_epoch, origin=AppendOrigin.COORDINATOR)

    def append_as_follower(self, records: Buffer) -> LogAppendInfo:
        """Store batches fetched from the leader exactly as they are (Kafka's `UnifiedLog.appendAsFollower`).

        `records` is a Fetch response's record set: whole v2 batches whose offsets, leader epochs and
        timestamps the leader assigned; a trailing partial batch (cut by the fetch's max bytes) is ignored.
        Nothing is re-encoded or patched: the bytes written are the bytes received.

        All batches are checked before anything is written; on any error nothing is appended:

        * not a well-formed v2 batch (size, magic, CRC-32C, header consistency, codec), or offsets that do
          not increase from batch to batch (Kafka's OffsetsOutOfOrderException): KafkaError
          CORRUPT_MESSAGE;
        * a first offset below the log end offset: `UnexpectedAppendOffsetError` (OFFSET_OUT_OF_RANGE), as
          Kafka. Kafka accepts a first offset above the log end (a hole); so does this log when the
          topic is compacted (compaction leaves holes), otherwise the hole is refused the same way (the
          batches must follow each other without gaps there, and recovery would cut the log at one).

        Segments roll as leader appends roll them (same `should_roll` rule), decided for every batch, not
        once for the whole fetched chunk as Kafka's follower does: when each leader append was one batch
        (what producers and marker writes send) the follower's segment files are the leader's, byte for
        byte. Each batch assigns its leader epoch to the cache when it differs from the latest (Kafka's
        `maybeAssignEpochStartOffset`; a leader's log never lowers its epoch, so that is "above the
        latest"), and is replayed into producer state with origin REPLICATION (no sequence checks, lower
        producer epochs tolerated, transactions and markers tracked, aborted transactions indexed in the
        segment that holds the marker). The log end moves; the high watermark does not (see
        `update_follower_high_watermark`). flush.messages applies as for leader appends.

        Returns the append's offsets and sizes; for an empty record set (or only a partial batch) nothing
        is appended and the info says so as Kafka's does: first_offset = last_offset = -1, records_count =
        valid_bytes = 0. Raises KafkaError KAFKA_STORAGE_ERROR when a write fails; the batches before the
        failing segment write then stay appended.
        """
        self._check_open()
        view = records if isinstance(records, memoryview) else memoryview(records)
        parsed = self._parse_follower_batches(view)
        if not parsed:
            return LogAppendInfo(-1, -1, -1, self._log_start_offset, False, 0, 0)
        first_offset = parsed[0][2][H_BASE_OFFSET]
        last_offset = parsed[-1][2][H_BASE_OFFSET] + parsed[-1][2][H_LAST_DELTA]
        now = self.clock.milliseconds()
        count = 0
        i = 0
        n = len(parsed)
        try:
            while i < n:
                # One run: the batches that go into one segment, written with one call.
                start, size, hdr = parsed[i]
                segment = self._maybe_roll(size, hdr[H_MAX_TS], hdr[H_BASE_OFFSET] + hdr[H_LAST_DELTA], now)
                rolling = segment.rolling_based_timestamp
                if rolling is None:
                    rolling = hdr[H_MAX_TS]
                end = start + size
                j = i + 1
                while j < n and self._stays_in_segment(segment, end - start, j - i, rolling, parsed[j], now):
                    end += parsed[j][1]
                    j += 1
                segment.append(
                    [view[start:end]],
                    [(sz, h[H_BASE_OFFSET] + h[H_LAST_DELTA], h[H_MAX_TS]) for _pos, sz, h in parsed[i:j]],
                )
                count += self._apply_follower_batches(view, parsed[i:j], segment)
                i = j
        except OSError as e:
            raise files.storage_error(e, f"{self.topic}-{self.partition}") from e
        files.storage_ok()
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        total = parsed[-1][0] + parsed[-1][1] - parsed[0][0]
        return LogAppendInfo(first_offset, last_offset, -1, self._log_start_offset, False, count, total)

    def _parse_follower_batches(self, view: memoryview) -> list[tuple[int, int, Header]]:
        """(position, size, header) of every whole batch, all checked (see `append_as_follower`); as
        Kafka, every batch is checked before where the first one starts is."""
        parsed: list[tuple[int, int, Header]] = []
        gaps_allowed = self.config.cleanup_policy.compacts
        expected = -1
        try:
            for batch in iter_batches(view, allow_partial=True):
                batch.validate()
                pos = batch.position
                hdr: Header = HEADER_STRUCT.unpack_from(view, pos)
                base, delta = hdr[H_BASE_OFFSET], hdr[H_LAST_DELTA]
                if delta < 0:
                    raise CorruptRecordError(f"batch at offset {base} has a negative last offset delta")
                if parsed and base != expected and (base < expected or not gaps_allowed):
                    raise CorruptRecordError(
                        f"out of order offsets: batch at {base} after one ending at {expected - 1}"
                    )
                expected = base + delta + 1
                parsed.append((pos, hdr[H_LENGTH] + LOG_OVERHEAD, hdr))
        except CorruptRecordError as e:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE, f"follower append to {self.topic}-{self.partition}: {e}"
            ) from e
        if parsed:
            first = parsed[0][2]
            base, leo = first[H_BASE_OFFSET], self._log_end_offset
            if base != leo and (base < leo or not gaps_allowed):
                last = base + first[H_LAST_DELTA]
                raise UnexpectedAppendOffsetError(
                    f"unexpected offset in follower append to {self.topic}-{self.partition}: first offset "
                    f"{base} (last of its batch {last}), log end offset {leo}, log start offset "
                    f"{self._log_start_offset}",
                    base,
                    last,
                )
        return parsed

    @staticmethod
    def _stays_in_segment(
        segment: LogSegment,
        run_bytes: int,
        run_batches: int,
        rolling: int,
        batch: tuple[int, int, Header],
        now_ms: int,
    ) -> bool:
        """Whether `batch` certainly goes into `segment` once the run before it is written there: the
        roll check made after that write (`should_roll`) would be false. The index rule is judged
        conservatively (each batch may add an index entry); a false answer only ends the run, and the
        batch then gets the exact check."""
        _pos, size, hdr = batch
        config = segment.config
        return (
            segment.size + run_bytes + size <= config.segment_bytes
            and now_ms - rolling <= config.segment_ms
            and len(segment.offset_index) + run_batches < segment.offset_index.max_entries
            and len(segment.time_index) + run_batches < segment.time_index.max_entries
            and hdr[H_BASE_OFFSET] + hdr[H_LAST_DELTA] - segment.base_offset <= 0xFFFFFFFF
        )

    def _apply_follower_batches(
        self, view: memoryview, run: list[tuple[int, int, Header]], segment: LogSegment
    ) -> int:
        """After a run of follower batches is written: leader epochs, producer state, transactions, then the
        log end (in that order: a concurrent flush reads the log end first, then the epochs). Returns the
        number of records."""
        epochs = self._epochs
        producer_state = self.producer_state
        txn_index = segment.txn_index
        count = 0
        for pos, _size, hdr in run:
            epoch = hdr[H_LEADER_EPOCH]
            latest = epochs.latest_entry
            if epoch >= 0 and (latest is None or latest.epoch != epoch):
                epochs.assign(epoch, hdr[H_BASE_OFFSET])
            if hdr[H_PRODUCER_ID] >= 0:
                replay_batch(
                    producer_state, RecordBatch(view, pos), txn_index, high_watermark=self._high_watermark
                )
            count += hdr[H_COUNT]
        latest_epoch = epochs.latest_epoch
        if latest_epoch is not None:
            self._leader_epoch = latest_epoch
        last = run[-1][2]
        self._log_end_offset = last[H_BASE_OFFSET] + last[H_LAST_DELTA] + 1
        producer_state.update_map_end_offset(self._log_end_offset)
        return count

    def _maybe_roll(self, size: int, first_max_ts: int, last_offset: int, now_ms: int) -> LogSegment:
        active = self._segments[-1]
        if active.should_roll(size, first_max_ts, last_offset, now_ms):
            return self.roll(now_ms)
        return active

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (no-op when the active one is empty)."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.on_becoming_inactive()
        active.write_indexes()
        new = LogSegment.create(self.directory, self._log_end_offset, self.config, now)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self.producer_state.update_map_end_offset(self._log_end_offset)
        self.producer_state.take_snapshot()
        self._cleanup_snapshots()
        return new

    # -- reads --------------------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        min_one_message: bool = True,
        zero_copy: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one holding `fetch_offset`, up to `max_bytes` and below what `isolation`
        may see. `zero_copy`: the batches as a `FileSlice` of their segment (sent from the file), not read
        into memory (an empty result is still an empty memoryview)."""
        self._check_open()
        hw = self._high_watermark
        lso = self.last_stable_offset
        start = self._log_start_offset
        if fetch_offset < start or fetch_offset > self._log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} is outside [{start}, {self._log_end_offset}] "
                f"of {self.topic}-{self.partition}",
            )
        committed = isolation is Isolation.READ_COMMITTED
        if committed:
            max_offset = lso
        elif isolation is Isolation.READ_UNCOMMITTED:
            max_offset = hw
        else:  # LOG_END: what a follower fetches
            max_offset = self._log_end_offset
        empty = FetchDataInfo(memoryview(b""), hw, lso, start, [] if committed else None, fetch_offset)
        if fetch_offset >= max_offset:
            return empty
        i = max(0, bisect_right(self._bases, fetch_offset) - 1)
        while i < len(self._segments):
            seg = self._segments[i]
            file_slice = None
            if zero_copy:
                found = seg.read_range(fetch_offset, max_bytes, max_offset, min_one_message)
                if found is None:
                    i += 1
                    continue
                position, size, next_off = found
                if not size:
                    return empty
                data = empty.records
                file_slice = FileSlice.open(seg.fd, position, size)
            if file_slice is None:  # a copy: not asked for zero copy, or no descriptor for a slice
                result = seg.read(fetch_offset, max_bytes, max_offset, min_one_message)
                if result is None:
                    i += 1
                    continue
                data, _first, next_off = result
                if not data:
                    return empty
            aborted: list[FetchAbortedTxn] | None = None
            if committed:
                aborted = self._collect_aborted(fetch_offset, next_off, i)
            return FetchDataInfo(data, hw, lso, start, aborted, next_off, file_slice)
        return empty

    def _collect_aborted(
        self, fetch_offset: int, upper_bound: int, first_segment: int
    ) -> list[FetchAbortedTxn]:
        found: list[AbortedTxn] = []
        # As Kafka: scan forward (an aborted transaction's entry lives in its marker's segment, which
        # may be far after the fetched range) until an entry proves no later one can overlap.
        for seg in self._segments[first_segment:]:
            if seg.txn_index.collect(fetch_offset, upper_bound, found):
                break
        return [FetchAbortedTxn(t.producer_id, t.first_offset) for t in found]

    def collect_aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Every aborted transaction overlapping [start_offset, upper_bound) (full entries)."""
        found: list[AbortedTxn] = []
        i = max(0, bisect_right(self._bases, start_offset) - 1)
        for seg in self._segments[i:]:
            if seg.txn_index.collect(start_offset, upper_bound, found):
                break
        return found

    def _first_offset_with_timestamp(self, timestamp: int, offset_in_batch: int) -> int:
        """The first record carrying `timestamp` in the batch that holds `offset_in_batch` (KAFKA-16310:
        MAX_TIMESTAMP answers with that record, not with the batch's last offset)."""
        if offset_in_batch < self._log_start_offset:
            return offset_in_batch
        data = self.read(offset_in_batch, 1).records
        for batch in iter_batches(data):
            if batch.last_offset < offset_in_batch:
                continue
            if batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
                return max(batch.base_offset, self._log_start_offset)
            for record in batch.records():
                if record.timestamp == timestamp and record.offset >= self._log_start_offset:
                    return record.offset
        return offset_in_batch

    def offset_for_timestamp(
        self, timestamp: int, isolation: Isolation = Isolation.READ_UNCOMMITTED
    ) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -1 latest (LSO for read_committed), -3 max timestamp, else the first
        offset whose record timestamp is >= `timestamp` (None when there is none)."""
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(-1, self._log_start_offset, self._leader_epoch)
        # Kafka's Partition.fetchOffsetForTimestamp: a result at or past what this isolation level may
        # read (the LSO for read_committed) is no result.
        if isolation is Isolation.READ_COMMITTED:
            limit = self.last_stable_offset
        elif isolation is Isolation.READ_UNCOMMITTED:
            limit = self._high_watermark
        else:  # LOG_END (Kafka: a replica's ListOffsets sees up to the log end)
            limit = self._log_end_offset
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, limit, self._leader_epoch)
        if timestamp == MAX_TIMESTAMP:
            best: tuple[int, int] | None = None
            for seg in self._segments:
                if seg.size and (best is None or seg.max_timestamp > best[0]):
                    best = (seg.max_timestamp, seg.offset_of_max_timestamp)
            if best is None:
                return None
            offset = self._first_offset_with_timestamp(*best)
            return TimestampAndOffset(best[0], offset, self._leader_epoch) if offset < limit else None
        if timestamp < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported timestamp {timestamp}")
        for seg in self._segments:
            if seg.size == 0 or seg.max_timestamp < timestamp or seg.next_offset <= self._log_start_offset:
                continue
            found = seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
            if found is None:
                continue
            return TimestampAndOffset(found[0], found[1], self._leader_epoch) if found[1] < limit else None
        return None

    # -- durability ---------------------------------------------------------------------------------------

    def flush(self, upto: int | None = None) -> int:
        """fsync everything appended so far (group commit); return the new recovery point.

        Thread-safe; meant to be called from an executor thread while the owner keeps appending. When
        `upto` is already covered it returns at once without an fsync.
        """
        target = self._log_end_offset if upto is None else min(upto, self._log_end_offset)
        if self._recovery_point >= target:
            if upto is None and self._epochs.version != self._epochs_saved:
                with self._flush_lock:  # only the leader-epoch checkpoint changed (truncation)
                    if not self.closed:
                        try:
                            self._save_leader_epochs()
                        except OSError as e:
                            raise files.storage_error(e, f"{self.topic}-{self.partition}") from e
            return self._recovery_point
        with self._flush_lock:
            if self.closed or self._recovery_point >= target:
                return self._recovery_point
            return self.flushed_to(self._write_out())

    def flush_deferred(self) -> int | None:
        """Inside `files.synced_together()`: what `flush` writes, its fsyncs left to the block's one sync.
        Returns the offset to pass to `flushed_to` once that sync succeeded (None: nothing to flush);
        `drop_behind` then does what `flush` would have done to the page cache."""
        with self._flush_lock:
            if self.closed or self._recovery_point >= self._log_end_offset:
                return None
            return self._write_out()

    def _write_out(self) -> int:
        """fsync every segment not yet durable (the active one without its indexes); returns the log end
        offset they cover. Holds `_flush_lock`."""
        leo = self._log_end_offset
        segments = list(self._segments)
        active = segments[-1]
        try:
            self._save_leader_epochs()  # read after `leo`: it has an entry for every batch below it
            for seg in segments[:-1]:
                if seg.flushed_size < seg.size or not seg.indexes_durable:
                    seg.flush()
            active.flush(indexes=False)
        except OSError as e:
            raise files.storage_error(e, f"{self.topic}-{self.partition}") from e
        return leo

    def drop_behind(self) -> None:
        """The page cache drop-behind of every segment, after a deferred flush's sync (drop_behind.py)."""
        if DROP_BEHIND.window < 0:
            return  # off: not even the lock
        with self._flush_lock:
            for seg in list(self._segments):
                seg.drop_behind()

    def flushed_to(self, offset: int) -> int:
        """Everything before `offset` is durable: move the recovery point (never back)."""
        if offset > self._recovery_point:
            self._recovery_point = offset
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.monotonic_ms()
        return self._recovery_point

    def needs_flush(self, offset: int) -> bool:
        return self._recovery_point < offset

    def flush_if_needed(self) -> bool:
        """Kafka's flush.ms: flush when that much time passed since the last flush. True if it flushed."""
        if self.config.flush_ms >= (1 << 62):
            return False
        if self._recovery_point >= self._log_end_offset:
            return False
        if self.clock.monotonic_ms() - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # -- retention, delete-records, expiry ----------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to `offset` (<= HW); returns the new log start."""
        self._check_open()
        if offset < 0 or offset > self._high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records before {offset}: high watermark is {self._high_watermark}",
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._epochs.truncate_from_start(offset)
            self._delete_segments(lambda seg, nxt: nxt <= self._log_start_offset)
        return self._log_start_offset

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention by time and size and by the log start offset; returns segments deleted.

        Never deletes data at or above the HW or the LSO.
        """
        self._check_open()
        now = self.clock.milliseconds() if now_ms is None else now_ms
        deleted = self._delete_segments(lambda seg, nxt: nxt <= self._log_start_offset)
        if not self.config.cleanup_policy.deletes:
            return deleted
        if self.config.retention_ms >= 0:
            deleted += self._delete_segments(
                lambda seg, nxt: seg.max_timestamp >= 0 and now - seg.max_timestamp > self.config.retention_ms
            )
        if self.config.retention_bytes >= 0:
            excess = [self.size_in_bytes - self.config.retention_bytes]

            def over_size(seg: LogSegment, nxt: int) -> bool:
                if excess[0] - seg.size >= 0:
                    excess[0] -= seg.size
                    return True
                return False

            deleted += self._delete_segments(over_size)
        return deleted

    def _delete_segments(self, predicate: Callable[[LogSegment, int], bool]) -> int:
        bound = min(self._high_watermark, self.last_stable_offset)
        doomed: list[LogSegment] = []
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else self._log_end_offset
            if (seg.size == 0 and i == len(self._segments) - 1) or nxt > bound or not predicate(seg, nxt):
                break
            doomed.append(seg)
        if not doomed:
            return 0
        if doomed[-1] is self._segments[-1]:
            self.roll()
        with self._flush_lock:
            for seg in doomed:
                self._segments.remove(seg)
                self._bases.remove(seg.base_offset)
                seg.delete()
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._epochs.truncate_from_start(self._log_start_offset)
        self._cleanup_snapshots()
        return len(doomed)

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        now = self.clock.milliseconds() if now_ms is None else now_ms
        return self.producer_state.remove_expired_producers(now)

    def take_snapshot(self) -> None:
        self.producer_state.update_map_end_offset(self._log_end_offset)
        self.producer_state.take_snapshot()
        self._cleanup_snapshots()

    def _cleanup_snapshots(self) -> None:
        """Keep the newest snapshot at or below the recovery point and every later one."""
        keep_from = None
        for off in self.producer_state.snapshot_offsets():
            if off <= self._recovery_point:
                keep_from = off
        if keep_from is not None:
            self.producer_state.delete_snapshots_before(keep_from)

    # -- truncation and replacement (cleaner, future replication) -----------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or after `offset` (a batch boundary); False when there was none (Kafka's
        `UnifiedLog.truncateTo`).

        Afterwards: the log end is `offset` (the start of the batch holding it, were it not a boundary);
        the high watermark, recovery point and log start are at most the log end; the segments and their
        indexes (the aborted-transaction index too) hold nothing at or after it; the leader-epoch cache has
        no entry starting at or after it (even when nothing is truncated, as Kafka: an entry past the log
        end goes), while `leader_epoch` (the partition's, see `end_offset_for_epoch`) stays; producer
        state is rebuilt from the newest snapshot at or below the log end (an open transaction or a marker
        cut away is forgotten; a transaction completed at or above the high watermark is unstable again).
        An `offset` before the first segment empties the log (`truncate_fully_and_start_at`).
        """
        from exactly.storage.loader import rebuild_producer_state

        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate {self.topic}-{self.partition} to {offset}")
        if offset >= self._log_end_offset:
            self._epochs.truncate_from_end(self._log_end_offset)  # written by the next flush or close
            return False
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        with self._flush_lock:
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                seg = self._segments.pop()
                self._bases.pop()
                seg.delete()
            self._segments[-1].truncate_to(offset)
            leo = self._segments[-1].next_offset
            self._log_end_offset = leo
            self._log_start_offset = min(self._log_start_offset, leo)
            self._recovery_point = min(self._recovery_point, leo)
            self._high_watermark = min(self._high_watermark, leo)
            self._epochs.truncate_from_end(leo)  # written by the next flush or close
        self.producer_state.delete_snapshots_after(leo)
        rebuild_producer_state(self, self.clock.milliseconds())
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at `offset`: log start = log end = high watermark =
        recovery point = `offset`, no leader-epoch entries (`leader_epoch` stays, as in `truncate_to`), no
        producer state, no snapshots (Kafka's
        `UnifiedLog.truncateFullyAndStartAt`: a follower whose log end is below the leader's log start).
        The emptied leader-epoch checkpoint and the directory are synced before this returns; the caller
        checkpoints the new log start (LogManager) before relying on it across a crash."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot start {self.topic}-{self.partition} at {offset}")
        now = self.clock.milliseconds()
        with self._flush_lock:
            for seg in self._segments:
                seg.delete()
            try:
                new = LogSegment.create(self.directory, offset, self.config, now)
            except OSError as e:
                raise files.storage_error(e, f"{self.topic}-{self.partition}") from e
            self._segments = [new]
            self._bases = [offset]
            self._log_start_offset = offset
            self._log_end_offset = offset
            self._high_watermark = offset
            self._recovery_point = offset
            self._unflushed_messages = 0
            self._epochs.clear()
            self.producer_state.truncate_fully_and_start_at(offset)
            try:
                self._save_leader_epochs()
                files.fsync_dir(self.directory)
            except OSError as e:
                raise files.storage_error(e, f"{self.topic}-{self.partition}") from e

    def replace_segments(self, new_segment: LogSegment, old: list[LogSegment]) -> None:
        """Swap `old` (consecutive segments) for `new_segment` (already renamed into place)."""
        with self._flush_lock:
            i = self._segments.index(old[0])
            self._segments[i : i + len(old)] = [new_segment]
            self._bases = [s.base_offset for s in self._segments]
            for seg in old:
                if seg.base_offset != new_segment.base_offset:
                    seg.delete()
                else:
                    seg.close()

    # -- lifecycle ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: flush everything, record the final time index entry, snapshot, close files.

        A log small enough (`_SMALL_AT_CLOSE`) makes no file at all: its active segment's final time index
        entry and its producer snapshot are rebuilt by a scan of a few KiB at the next load (the first stop
        after creating 100,000 partitions made 300,000 files: 34 s)."""
        if self.closed:
            return
        active = self.active_segment
        small = self._is_small()
        if not small:
            active.on_becoming_inactive()
        else:
            active.trim()
        self.flush()
        for seg in self._segments:
            if not seg.indexes_durable or seg.flushed_size < seg.size or seg.txn_index.has_pending:
                seg.flush(indexes=True)
        if not small:
            self.take_snapshot()
        with self._flush_lock:
            try:
                self._save_leader_epochs()
            except OSError as e:
                raise files.storage_error(e, f"{self.topic}-{self.partition}") from e
            self.closed = True
            for seg in self._segments:
                seg.close()

    def close_without_flush(self) -> None:
        """Drop file handles without flushing (used to simulate a crash in tests)."""
        with self._flush_lock:
            self.closed = True
            for seg in self._segments:
                seg.close()

    def delete(self) -> None:
        """Remove every file of this partition (DeleteTopics)."""
        self.close_without_flush()
        for seg in self._segments:
            seg.delete()
        self.producer_state.truncate_fully_and_start_at(0)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic}-{self.partition} is closed")


def is_small(segments: list[LogSegment], config: LogConfig) -> bool:
    """A log that makes no index, snapshot or leader-epoch file at close: one segment of a few KiB."""
    return len(segments) == 1 and segments[0].size <= min(_SMALL_AT_CLOSE, config.index_interval_bytes)


def scan_batches(log: PartitionLog, chunk: int = 8 << 20, *, to_end: bool = False) -> Iterator[RecordBatch]:
    """Every batch from the log start to the high watermark (`to_end`: to the log end, as a new leader's
    coordinator loads its partition, Kafka's loaders), in order (coordinators loading their internal
    topics)."""
    offset = log.log_start_offset
    end = log.log_end_offset if to_end else log.high_watermark
    isolation = Isolation.LOG_END if to_end else Isolation.READ_UNCOMMITTED
    while offset < end:
        data = log.read(offset, chunk, isolation, min_one_message=True)
        if not data.records:
            return
        for batch in iter_batches(data.records):
            if batch.next_offset > offset:
                yield batch
        offset = max(offset + 1, data.next_offset)


def replay_batch(
    producer_state: ProducerStateManager,
    batch: RecordBatch,
    txn_index: TransactionIndex | None,
    *,
    high_watermark: int = _NO_LIMIT,
) -> None:
    """Apply one stored batch to producer state (recovery, reload, truncation, follower appends: origin
    REPLICATION).

    With `txn_index`, aborted transactions completed by this batch are appended to it (recovery rebuilds
    the index of the segment being recovered; a follower fills its active segment's). A transaction
    completed at or above `high_watermark` stays unstable until the high watermark passes its marker.
    """
    hdr = batch.header()
    pid = hdr.producer_id
    last_offset = hdr.base_offset + hdr.last_offset_delta
    if pid >= 0:
        upd = producer_state.prepare_update(pid, AppendOrigin.REPLICATION)
        try:
            if hdr.attributes & _CONTROL_ATTR:
                marker = parse_end_txn_marker(batch)
                done = upd.append_end_txn_marker(
                    marker, hdr.producer_epoch, hdr.base_offset, hdr.max_timestamp
                )
                producer_state.update(upd)
                if done is not None:
                    if done.is_aborted and txn_index is not None:
                        lso = producer_state.last_stable_offset(done)
                        txn_index.append(AbortedTxn(pid, done.first_offset, done.last_offset, lso))
                    producer_state.complete_txn(done, high_watermark)
            else:
                last_seq = batch.last_sequence
                upd.append_data_batch(
                    hdr.producer_epoch,
                    hdr.base_sequence,
                    last_seq,
                    hdr.max_timestamp,
                    hdr.base_offset,
                    last_offset,
                    bool(hdr.attributes & _TXN_ATTR),
                )
                producer_state.update(upd)
        except KafkaError as e:
            log.warning("skipping producer state of batch at offset %d during replay: %s", hdr.base_offset, e)
    producer_state.update_map_end_offset(last_offset + 1)


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendOrigin",
    "FetchDataInfo",
    "Isolation",
    "LogAppendInfo",
    "PartitionLog",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
    "VerificationGuard",
    "replay_batch",
]
