"""Shared helpers for storage tests: batch builders and log (re)opening."""

from __future__ import annotations

import ctypes
import mmap
from pathlib import Path
from typing import Any

from exactly.clock import ManualClock
from exactly.records import (
    ControlRecordType,
    EndTxnMarker,
    RecordBatch,
    build_batch,
    iter_batches,
    parse_end_txn_marker,
)
from exactly.storage.config import LogConfig
from exactly.storage.loader import load_log
from exactly.storage.log import Buffer, Isolation, LogAppendInfo, PartitionLog
from exactly.storage.txn_index import FetchAbortedTxn

T0 = 1_700_000_000_000


def data_batch(
    n: int = 1,
    *,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    ts: int = T0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
) -> bytes:
    return build_batch(
        [(key, value)] * n,
        timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )


def commit() -> EndTxnMarker:
    return EndTxnMarker(ControlRecordType.COMMIT, 0)


def abort() -> EndTxnMarker:
    return EndTxnMarker(ControlRecordType.ABORT, 0)


def open_log(
    directory: Path, config: LogConfig | None = None, clock: ManualClock | None = None
) -> PartitionLog:
    return load_log(directory, "t", 0, config or LogConfig(), clock or ManualClock(T0))


def reopen(plog: PartitionLog, *, clean: bool) -> PartitionLog:
    if clean:
        plog.close()
    else:
        plog.close_without_flush()
    return load_log(
        plog.directory,
        plog.topic,
        plog.partition,
        plog.config,
        plog.clock,
        recovery_point=plog.recovery_point,
        log_start_offset=plog.log_start_offset,
        had_clean_shutdown=clean,
    )


def batches(data: bytes | memoryview) -> list[RecordBatch]:
    return list(iter_batches(bytes(data)))


def read_all(plog: PartitionLog) -> list[RecordBatch]:
    """Every batch from the log start to the HW, read in small steps."""
    out: list[RecordBatch] = []
    offset = plog.log_start_offset
    while offset < plog.high_watermark:
        info = plog.read(offset, 1 << 20)
        got = batches(info.records)
        if not got:
            break
        out.extend(got)
        offset = got[-1].next_offset
    return out


def consume_committed(plog: PartitionLog, start: int = 0, max_bytes: int = 150) -> list[int]:
    """Offsets a read_committed Kafka consumer delivers (`CompletedFetch.nextFetchedRecord`).

    Every returned batch is checked to be whole and CRC-valid, and below the LSO.
    """
    delivered: list[int] = []
    offset = start
    aborted_pids: set[int] = set()
    while offset < plog.last_stable_offset:
        info = plog.read(offset, max_bytes, Isolation.READ_COMMITTED)
        assert info.aborted_transactions is not None
        pending: list[FetchAbortedTxn] = sorted(info.aborted_transactions, key=lambda t: t.first_offset)
        data = bytes(info.records)
        if not data:
            break
        pos = 0
        while pos < len(data):
            batch = RecordBatch(data, pos)
            batch.verify_crc()
            assert batch.last_offset < info.last_stable_offset
            pos = batch.end
            while pending and pending[0].first_offset <= batch.last_offset:
                aborted_pids.add(pending.pop(0).producer_id)
            if batch.is_control:
                if parse_end_txn_marker(batch).type is ControlRecordType.ABORT:
                    aborted_pids.discard(batch.producer_id)
            elif not (batch.is_transactional and batch.producer_id in aborted_pids):
                delivered.extend(r.offset for r in batch.records() if r.offset >= offset)
            offset = batch.next_offset
    return delivered


def leader_append(log: PartitionLog, records: Buffer, **kwargs: Any) -> LogAppendInfo:
    """Append as a single-replica leader does (exactly.replication.partition): the high watermark follows
    the log end. Storage itself never moves it."""
    info = log.append_as_leader(records, **kwargs)
    log.update_high_watermark(log.log_end_offset)
    return info


def leader_append_marker(
    log: PartitionLog, producer_id: int, producer_epoch: int, marker: EndTxnMarker, **kwargs: Any
) -> LogAppendInfo:
    """A COMMIT/ABORT marker appended as a single-replica leader does (the high watermark follows)."""
    info = log.append_end_txn_marker(producer_id, producer_epoch, marker, **kwargs)
    log.update_high_watermark(log.log_end_offset)
    return info


def resident(path: Path, start: int, end: int) -> float:
    """The fraction of the file's pages in [start, end) held by the page cache (mincore(2) on a private
    mapping: writable for ctypes, and no page of it is ever copied since nothing writes to it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = path.stat().st_size
    vec = ctypes.create_string_buffer((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
    with path.open("rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mm:
        view = (ctypes.c_char * size).from_buffer(mm)
        try:
            if libc.mincore(ctypes.addressof(view), size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del view  # the mapping cannot close while exported
    flags = vec.raw[start // mmap.PAGESIZE : (end + mmap.PAGESIZE - 1) // mmap.PAGESIZE]
    return sum(b & 1 for b in flags) / max(1, len(flags))
