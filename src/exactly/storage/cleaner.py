"""Log compaction for cleanup.policy=compact topics (Kafka's `LogCleaner`, single pass, in process).

What one `clean_log` pass does, over the *cleanable* segments: every inactive segment that lies wholly
below the first uncleanable offset = min(active segment base, last stable offset, high watermark,
recovery point, first segment whose newest record is younger than min.compaction.lag.ms):

1. Build a map key -> offset of the key's latest record in the cleanable range (records of aborted
   transactions and control records do not count).
2. Rewrite each cleanable segment, batch by batch, keeping each batch's base offset, lastOffsetDelta,
   producer id/epoch/base sequence, attributes and base timestamp:
   * data of an aborted transaction (from the `.txnindex`) is dropped;
   * a record survives only if it is its key's latest record (records without a key are kept);
   * a tombstone (null value) is dropped once its batch is older than delete.retention.ms;
   * a control batch (COMMIT/ABORT marker) is kept while its transaction still has data in the log
     or while it is younger than delete.retention.ms, so a consumer part-way through can still see it;
   * a batch left with no records is dropped, except the last batch of each producer in the log, kept
     empty so that producer state (epoch, sequence) survives reload.
   Batches whose records all survive are copied byte for byte.
3. Group consecutive cleaned segments into one while their cleaned sizes sum to at most segment.bytes
   and their offsets span less than 2^31 (Kafka's `groupSegmentsBySize`): without it a compacted topic
   that keeps rolling (`__transaction_state` under a long streaming query) keeps every segment it ever
   rolled, and its file count grows without bound even though its bytes do not. A group of one whose
   bytes all survive is left alone.
4. Swap each rewritten group in crash-safely: write `<base>.log.cleaned` and `<base>.txnindex.cleaned`
   (base = the group's first base offset), fsync, rename both to `.swap`, then delete the group's old
   files and rename the swap files into place. The loader finishes a swap interrupted by a crash (it
   deletes every segment starting within the swap file's offsets; see loader.py). Offset and time
   indexes are rebuilt.

Compaction never moves the log start offset (a group keeps its first segment's base), so it can never
pass the LSO.
Batch headers of rewritten batches get a new CRC; recordsCount may then be lower than
lastOffsetDelta + 1, as in Kafka.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import crc32c

from exactly.records.batch import HEADER_STRUCT, LOG_OVERHEAD, BatchHeader, RecordBatch, iter_batches
from exactly.records.compression import Compression, compress
from exactly.records.record import Record, encode_record
from exactly.storage import files
from exactly.storage.log import PartitionLog
from exactly.storage.segment import LogSegment
from exactly.storage.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

_TXN = 0x10
_CONTROL = 0x20
_LAT = 0x08


def first_uncleanable_offset(plog: PartitionLog, now_ms: int) -> int:
    bound = min(
        plog.active_segment.base_offset,
        plog.last_stable_offset,
        plog.high_watermark,
        plog.recovery_point,
    )
    lag = plog.config.min_compaction_lag_ms
    if lag > 0:
        for seg in plog.segments:
            if seg.base_offset >= bound:
                break
            if seg.max_timestamp >= 0 and now_ms - seg.max_timestamp < lag:
                return min(bound, seg.base_offset)
    return bound


def _cleanable(plog: PartitionLog, now_ms: int) -> list[LogSegment]:
    bound = first_uncleanable_offset(plog, now_ms)
    segs = plog.segments
    out = []
    for i, seg in enumerate(segs[:-1]):
        if segs[i + 1].base_offset > bound:
            break
        out.append(seg)
    return out


def _read_all(seg: LogSegment) -> bytes:
    return os.pread(seg.fd, seg.size, 0)


def _is_aborted(pid: int, offset: int, aborted: list[AbortedTxn]) -> bool:
    return any(t.producer_id == pid and t.first_offset <= offset <= t.last_offset for t in aborted)


def clean_log(plog: PartitionLog, now_ms: int) -> int:
    """One compaction pass; returns the number of bytes reclaimed."""
    segments = _cleanable(plog, now_ms)
    if not segments:
        return 0
    end = segments[-1].next_offset
    aborted = plog.collect_aborted_transactions(plog.segments[0].base_offset, 1 << 62)
    delete_horizon = now_ms - plog.config.delete_retention_ms

    # Pass 1: latest offset per key, last batch per producer, transactions with surviving data.
    latest: dict[bytes, int] = {}
    last_batch_of_pid: dict[int, int] = {}
    datas = [_read_all(seg) for seg in segments]
    for data in datas:
        for batch in iter_batches(data):
            pid = batch.producer_id
            if pid >= 0:
                last_batch_of_pid[pid] = batch.base_offset
            if batch.is_control or (batch.is_transactional and _is_aborted(pid, batch.base_offset, aborted)):
                continue
            for record in batch.records():
                if record.key is not None:
                    latest[record.key] = record.offset
    open_txn_data: dict[int, bool] = {}  # pid -> data of its current transaction retained
    cleaned: list[bytes] = []
    for data in datas:
        out = bytearray()
        for batch in iter_batches(data):
            kept = _clean_batch(batch, latest, aborted, delete_horizon, last_batch_of_pid, open_txn_data)
            if kept is not None:
                out += kept
        cleaned.append(bytes(out))
    reclaimed = sum(len(data) for data in datas) - sum(len(out) for out in cleaned)
    merged = 0
    for first, stop in group_segments(
        [len(out) for out in cleaned],
        [seg.base_offset for seg in segments],
        end,
        plog.config.segment_bytes,
    ):
        if stop - first == 1 and len(cleaned[first]) == len(datas[first]):
            continue
        _swap_in(plog, segments[first:stop], b"".join(cleaned[first:stop]))
        merged += stop - first - 1
    if reclaimed or merged:
        log.info(
            "compacted %s-%d below offset %d: %d bytes reclaimed, %d segments merged into others",
            plog.topic,
            plog.partition,
            end,
            reclaimed,
            merged,
        )
    return reclaimed


_MAX_OFFSET_SPAN = (1 << 31) - 1  # offsets relative to a segment's base are 32-bit in its indexes


def group_segments(sizes: list[int], bases: list[int], end: int, max_bytes: int) -> list[tuple[int, int]]:
    """Consecutive runs [first, stop) of segments (by their cleaned `sizes` and `bases`; `end` is one past
    the last segment's offsets) to write as one: a run grows while its size stays within `max_bytes` and
    its offsets span less than 2^31. Every segment is in exactly one run, in order."""
    runs: list[tuple[int, int]] = []
    first = 0
    while first < len(sizes):
        stop, total = first + 1, sizes[first]
        while stop < len(sizes):
            next_end = bases[stop + 1] if stop + 1 < len(bases) else end
            if total + sizes[stop] > max_bytes or next_end - bases[first] > _MAX_OFFSET_SPAN:
                break
            total += sizes[stop]
            stop += 1
        runs.append((first, stop))
        first = stop
    return runs


def _clean_batch(
    batch: RecordBatch,
    latest: dict[bytes, int],
    aborted: list[AbortedTxn],
    delete_horizon: int,
    last_batch_of_pid: dict[int, int],
    open_txn_data: dict[int, bool],
) -> bytes | None:
    pid = batch.producer_id
    keep_empty = pid >= 0 and last_batch_of_pid.get(pid) == batch.base_offset
    if batch.is_control:
        had_data = open_txn_data.pop(pid, False)
        if had_data or batch.max_timestamp > delete_horizon or keep_empty:
            return bytes(batch.buffer)
        return None
    if batch.is_transactional and _is_aborted(pid, batch.base_offset, aborted):
        return _empty_batch(batch) if keep_empty else None
    records = list(batch.records())
    survivors = [
        r
        for r in records
        if (r.key is None or latest.get(r.key) == r.offset)
        and not (r.value is None and batch.max_timestamp <= delete_horizon)
    ]
    if survivors and batch.is_transactional:
        open_txn_data[pid] = True
    if len(survivors) == len(records):
        return bytes(batch.buffer)
    if not survivors:
        return _empty_batch(batch) if keep_empty else None
    return _rebuild(batch, survivors)


def _rebuild(batch: RecordBatch, survivors: list[Record]) -> bytes:
    hdr = batch.header()
    base_ts = hdr.base_timestamp
    lat = bool(hdr.attributes & _LAT)
    body = bytearray()
    for r in survivors:
        offset = r.offset
        ts = r.timestamp
        body += encode_record(
            offset - hdr.base_offset,
            0 if lat else ts - base_ts,
            r.key,
            r.value,
            r.headers,
        )
    codec = Compression(hdr.attributes & 0x07)
    payload = compress(codec, body) if codec != Compression.NONE else bytes(body)
    return _assemble(hdr.base_offset, hdr, len(survivors), payload)


def _empty_batch(batch: RecordBatch) -> bytes:
    hdr = batch.header()
    return _assemble(hdr.base_offset, hdr, 0, b"")


def _assemble(base_offset: int, h: BatchHeader, count: int, payload: bytes) -> bytes:
    out = bytearray(61)
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        61 - LOG_OVERHEAD + len(payload),
        h.partition_leader_epoch,
        2,
        0,
        h.attributes,
        h.last_offset_delta,
        h.base_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        count,
    )
    out += payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)


def _swap_in(plog: PartitionLog, olds: list[LogSegment], data: bytes) -> None:
    """Replace the consecutive segments `olds` by one holding `data`, under the first one's base."""
    directory = plog.directory
    base = olds[0].base_offset
    log_path = files.log_file(directory, base)
    txn_path = files.txn_index_file(directory, base)
    cleaned_log = Path(str(log_path) + files.CLEANED_SUFFIX)
    cleaned_txn = Path(str(txn_path) + files.CLEANED_SUFFIX)
    _write_fsync(cleaned_log, data)
    _write_fsync(cleaned_txn, b"".join(t.encode() for old in olds for t in old.txn_index.entries))
    swap_log = Path(str(log_path) + files.SWAP_SUFFIX)
    swap_txn = Path(str(txn_path) + files.SWAP_SUFFIX)
    files.replace(cleaned_txn, swap_txn)
    files.replace(cleaned_log, swap_log)
    files.fsync_dir(directory)
    # Point of no return: the loader completes the swap from here on.
    for old in olds:
        old.delete()
    files.replace(swap_txn, txn_path)
    files.replace(swap_log, log_path)
    files.fsync_dir(directory)
    new = LogSegment.open_existing(directory, base, plog.config, plog.clock.milliseconds())
    loaded = TransactionIndex.load(txn_path, base)
    if loaded is not None:
        new.txn_index = loaded
    new.rebuild_indexes()
    new.flush()
    plog.replace_segments(new, olds)


def _write_fsync(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        files.fsync(fd, path)
    finally:
        os.close(fd)
