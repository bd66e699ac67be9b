"""One log segment: a `.log` file of record batches plus its three indexes (Kafka's `LogSegment`).

On-disk format of `<base>.log`: record batches (RecordBatch v2, see `exactly.records.batch`) laid end to
end, each stored exactly as the producer sent it except baseOffset (bytes 0-7) and partitionLeaderEpoch
(bytes 12-15), which the broker patches outside the CRC span. No header, no padding, no trailer. The
first batch's base offset is >= the segment's base offset (the file name); offsets increase strictly.

Appends write the 16 patched header bytes and a memoryview of the rest of the client's batch with one
`os.pwritev` call; the bytes are not copied in Python. Reads `os.pread` whole batches, or find their
range from the batch headers alone (`read_range`) for a fetch that sends it from the file (zero copy).

Indexes are derived (see offset_index.py, time_index.py): `recover()` rebuilds them while checking every
batch (size, magic, CRC, header consistency, increasing offsets) and truncates the file at the first
invalid byte. `rebuild_indexes()` is the cheaper variant for a segment known to be intact.

A segment is not thread-safe, with one exception: `flush()` may run on another thread while the owning
thread appends (the log serialises structural changes against flushes, see log.py).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from exactly.errors import CorruptRecordError
from exactly.records.batch import BATCH_HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, MAGIC, RecordBatch
from exactly.storage import files
from exactly.storage.config import LogConfig
from exactly.storage.drop_behind import DROP_BEHIND
from exactly.storage.file_handles import HANDLES
from exactly.storage.offset_index import OffsetIndex
from exactly.storage.preallocation import PREALLOCATION
from exactly.storage.time_index import TimeIndex
from exactly.storage.txn_index import TransactionIndex

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1
_OFFSET_LENGTH = struct.Struct(">qi")
_unpack_header = HEADER_STRUCT.unpack_from
_unpack_offset_length = _OFFSET_LENGTH.unpack_from
_RECOVERY_CHUNK = 8 * 1024 * 1024
_SCAN_CHUNK = 16 * 1024

# Indices into a decoded header tuple (HEADER_STRUCT).
H_BASE_OFFSET = 0
H_LENGTH = 1
H_LEADER_EPOCH = 2
H_MAGIC = 3
H_CRC = 4
H_ATTRIBUTES = 5
H_LAST_DELTA = 6
H_MAX_TS = 8
H_PRODUCER_ID = 9
H_EPOCH = 10
H_BASE_SEQ = 11
H_COUNT = 12

Header = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]


class LogSegment:
    """A `.log` file and its indexes. `next_offset` is one past the last offset stored here."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        fd: int,
        size: int,
        created_ms: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.log_path = files.log_file(directory, base_offset)
        self._fd = fd  # -1 while evicted from the open-file budget (file_handles.py): reopened on use
        self.size = size
        self.allocated = size  # the file's length: past `size` while preallocated (preallocation.py)
        self.created_ms = created_ms
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.rolling_based_timestamp: int | None = None
        self.bytes_since_last_index_entry = 0
        self.flushed_size = 0
        self.dropped_size = 0  # bytes below this one were dropped from the page cache (drop_behind.py)
        self.io_lock = threading.Lock()
        self.closed = False
        self.indexes_durable = False
        if fd >= 0:
            HANDLES.adopt(self, fd)

    @property
    def fd(self) -> int:
        """The `.log`'s descriptor, reopened if the open-file budget closed it; use it at once (the event
        loop's thread) or under `io_lock` (other threads)."""
        fd = self._fd
        if fd >= 0:
            HANDLES.touch(self)
            return fd
        if self.closed:
            raise OSError(errno.EBADF, f"segment {self.log_path} is closed")
        fd = HANDLES.open(self, self.log_path, os.O_RDWR)
        self._fd = fd
        return fd

    def _evicted(self) -> None:
        self._fd = -1

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    # -- construction -------------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        *,
        in_new_directory: bool = False,
    ) -> LogSegment:
        """A new, empty segment (existing files with its name are truncated). `in_new_directory`: nothing
        can exist yet, so no index is looked at, and with the open-file budget used up the log is closed
        until first used (creating thousands of partitions does not churn the budget's LRU)."""
        path = files.log_file(directory, base_offset)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        files.note_length(path, 0)
        if in_new_directory and HANDLES.open_count >= HANDLES.budget:
            os.close(fd)
            fd = -1
        oi = OffsetIndex(files.index_file(directory, base_offset), base_offset, config.segment_index_bytes)
        ti = TimeIndex(files.time_index_file(directory, base_offset), base_offset, config.segment_index_bytes)
        xi = TransactionIndex(files.txn_index_file(directory, base_offset), base_offset)
        seg = cls(directory, base_offset, config, fd, 0, now_ms, oi, ti, xi)
        if not in_new_directory:
            oi.reset()
            ti.reset()
            xi.reset()
        return seg

    @classmethod
    def open_existing(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int, suffix: str = ""
    ) -> LogSegment:
        """Open a segment's `.log`; indexes are loaded separately (`load_indexes`)."""
        fd = os.open(str(files.log_file(directory, base_offset)) + suffix, os.O_RDWR)
        size = os.fstat(fd).st_size
        oi = OffsetIndex(files.index_file(directory, base_offset), base_offset, config.segment_index_bytes)
        ti = TimeIndex(files.time_index_file(directory, base_offset), base_offset, config.segment_index_bytes)
        xi = TransactionIndex(files.txn_index_file(directory, base_offset), base_offset)
        seg = cls(directory, base_offset, config, fd, size, now_ms, oi, ti, xi)
        seg.log_path = Path(str(files.log_file(directory, base_offset)) + suffix)
        seg.flushed_size = size
        seg.indexes_durable = True
        return seg

    def load_indexes(self, next_offset_hint: int | None) -> tuple[bool, bool]:
        """Load the three index files; returns (offset/time indexes usable, txn index usable).

        On success `next_offset`, `max_timestamp` and friends are set from the indexes and a short scan of
        the segment's tail.
        """
        xi = TransactionIndex.load(self.txn_index.path, self.base_offset)
        txn_ok = xi is not None
        if xi is not None:
            self.txn_index = xi
        if self.size <= self.config.index_interval_bytes and not (
            self.offset_index.path.exists() and self.time_index.path.exists()
        ):
            # Too small to have had an index entry: the files were never made (or the time index's entry
            # a stop adds was not: see PartitionLog.close); a scan of a few KiB is the whole rebuild.
            try:
                self.rebuild_indexes()
            except CorruptRecordError:  # e.g. preallocated zeros a crash kept: recovery trims them
                return False, txn_ok
            return True, txn_ok
        oi = OffsetIndex.load(
            self.offset_index.path, self.base_offset, self.config.segment_index_bytes, self.size
        )
        if oi is None:
            return False, txn_ok
        self.offset_index = oi
        try:
            last = self._last_batch_from(oi.lookup(oi.last_offset)[1] if len(oi) else 0)
        except CorruptRecordError:
            return False, txn_ok
        self.next_offset = self.base_offset if last is None else last[H_BASE_OFFSET] + last[H_LAST_DELTA] + 1
        if next_offset_hint is not None and self.next_offset > next_offset_hint:
            return False, txn_ok
        ti = TimeIndex.load(
            self.time_index.path, self.base_offset, self.config.segment_index_bytes, max(self.next_offset, 1)
        )
        if ti is None:
            return False, txn_ok
        self.time_index = ti
        last_entry = ti.last_entry
        if last_entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_entry
        if last is not None and last[H_MAX_TS] > self.max_timestamp:
            self.max_timestamp = last[H_MAX_TS]
            self.offset_of_max_timestamp = last[H_BASE_OFFSET] + last[H_LAST_DELTA]
        if self.size > 0:
            first = self.read_header(0)
            self.rolling_based_timestamp = first[H_MAX_TS] if first is not None else None
        return True, txn_ok

    def _last_batch_from(self, position: int) -> Header | None:
        last: Header | None = None
        for _pos, hdr in self.iter_headers(position):
            last = hdr
        return last

    # -- appends ------------------------------------------------------------------------------------------

    def append(self, buffers: Sequence[bytes | memoryview], batches: Sequence[tuple[int, int, int]]) -> None:
        """Write `buffers` at the end of the file; `batches` lists (size, last_offset, max_timestamp)."""
        position = self.size
        total = sum(size for size, _, _ in batches)
        if position + total > self.allocated and self.config.preallocate:
            self.allocated = PREALLOCATION.extend(
                self.fd, self.allocated, position, position + total, self.config.segment_bytes
            )
        try:
            written = os.pwritev(self.fd, buffers, position)
            if written != total:
                self._write_rest(buffers, written, position)
        except OSError:  # e.g. ENOSPC part-way: no partial batch stays in the file
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, position)
                self.allocated = position
            raise
        interval = self.config.index_interval_bytes
        for size, last_offset, max_ts in batches:
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = max_ts
            if max_ts > self.max_timestamp:
                self.max_timestamp = max_ts
                self.offset_of_max_timestamp = last_offset
            if self.bytes_since_last_index_entry > interval:
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += size
            position += size
            self.next_offset = last_offset + 1
        self.size = position
        if position > self.allocated:
            self.allocated = position

    def _write_rest(self, buffers: Sequence[bytes | memoryview], written: int, position: int) -> None:
        rest = b"".join(bytes(b) for b in buffers)[written:]
        view = memoryview(rest)
        pos = position + written
        while view:
            n = os.pwrite(self.fd, view, pos)
            view = view[n:]
            pos += n

    def should_roll(self, append_size: int, first_max_ts: int, last_offset: int, now_ms: int) -> bool:
        if self.size == 0:
            return False
        if self.size + append_size > self.config.segment_bytes:
            return True
        rolling = (
            self.rolling_based_timestamp if self.rolling_based_timestamp is not None else self.created_ms
        )
        if now_ms - rolling > self.config.segment_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > 0xFFFFFFFF

    def on_becoming_inactive(self) -> None:
        """Called when a newer segment takes over (or at a clean shutdown): record the final max timestamp
        in the time index, give back what was preallocated."""
        self.indexes_durable = False
        if self.max_timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.trim()

    def trim(self) -> None:
        """Cut the file to its batches (what preallocation added past them). Made durable by the segment's
        next fsync; a failure leaves the zeros, which recovery trims (it is logged, not raised)."""
        if self.allocated == self.size or self.closed:
            return
        try:
            os.ftruncate(self.fd, self.size)
        except OSError as e:
            log.warning("could not trim the preallocated end of %s: %s", self.log_path, e)
            return
        self.allocated = self.size

    # -- reads --------------------------------------------------------------------------------------------

    def read_header(self, position: int) -> Header | None:
        data = os.pread(self.fd, BATCH_HEADER_SIZE, position)
        if len(data) < BATCH_HEADER_SIZE:
            return None
        hdr: Header = _unpack_header(data)
        return hdr

    def iter_headers(self, position: int, end: int | None = None) -> Iterator[tuple[int, Header]]:
        """(position, header) of each batch from `position` (a batch start) to `end`.

        Raises CorruptRecordError on a header that is malformed or runs past the end of the file.
        """
        end = self.size if end is None else end
        buf = b""
        buf_start = position
        while position < end:
            rel = position - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, _SCAN_CHUNK, position)
                buf_start = position
                rel = 0
                if len(buf) < BATCH_HEADER_SIZE:
                    raise CorruptRecordError(f"truncated batch header at position {position}")
            hdr: Header = _unpack_header(buf, rel)
            length = hdr[H_LENGTH]
            if (
                hdr[H_MAGIC] != MAGIC
                or length < BATCH_HEADER_SIZE - LOG_OVERHEAD
                or position + length + 12 > end
            ):
                raise CorruptRecordError(
                    f"invalid batch at position {position} of segment {self.base_offset}"
                )
            yield position, hdr
            position += length + LOG_OVERHEAD

    def find_position(self, offset: int) -> tuple[int, Header] | None:
        """Position and header of the first batch whose last offset is >= `offset`."""
        idx_offset, position = self.offset_index.lookup(offset)
        if position != 0:
            first = self.read_header(position)
            if (
                first is None
                or first[H_MAGIC] != MAGIC
                or first[H_BASE_OFFSET] + first[H_LAST_DELTA] != idx_offset
            ):
                # The index does not match the log: never trust it; rebuild it and scan from the start.
                self.rebuild_indexes()
                position = self.offset_index.lookup(offset)[1]
        for pos, hdr in self.iter_headers(position):
            if hdr[H_BASE_OFFSET] + hdr[H_LAST_DELTA] >= offset:
                return pos, hdr
        return None

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool
    ) -> tuple[memoryview, int, int] | None:
        """Whole batches from the one holding `fetch_offset`, below `max_offset`, within `max_bytes`.

        Returns (bytes, first batch base offset, next offset after the last returned batch), an empty view
        when nothing fits, or None when this segment has no batch at or after `fetch_offset`.
        """
        found = self.find_position(fetch_offset)
        if found is None:
            return None
        start, first = found
        if first[H_BASE_OFFSET] >= max_offset:
            return memoryview(b""), first[H_BASE_OFFSET], first[H_BASE_OFFSET]
        first_size = first[H_LENGTH] + LOG_OVERHEAD
        want = min(max(max_bytes, 0), self.size - start)
        if first_size > want:
            if not min_one_message:
                return memoryview(b""), first[H_BASE_OFFSET], first[H_BASE_OFFSET]
            data = os.pread(self.fd, first_size, start)
            return memoryview(data), first[H_BASE_OFFSET], first[H_BASE_OFFSET] + first[H_LAST_DELTA] + 1
        data = os.pread(self.fd, want, start)
        pos = 0
        n = len(data)
        next_offset = first[H_BASE_OFFSET]
        while pos + LOG_OVERHEAD <= n:
            base, length = _unpack_offset_length(data, pos)
            end = pos + length + LOG_OVERHEAD
            if end > n or base >= max_offset:
                break
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            next_offset = base + delta + 1
            pos = end
        return memoryview(data)[:pos], first[H_BASE_OFFSET], next_offset

    def read_range(
        self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool
    ) -> tuple[int, int, int] | None:
        """As `read`, without reading the batches: (file position, size, next offset) of the same whole
        batches, found from their headers alone (for a zero-copy send); None as `read`."""
        found = self.find_position(fetch_offset)
        if found is None:
            return None
        start, first = found
        if first[H_BASE_OFFSET] >= max_offset:
            return start, 0, first[H_BASE_OFFSET]
        first_size = first[H_LENGTH] + LOG_OVERHEAD
        limit = start + min(max(max_bytes, 0), self.size - start)
        if start + first_size > limit:
            if not min_one_message:
                return start, 0, first[H_BASE_OFFSET]
            return start, first_size, first[H_BASE_OFFSET] + first[H_LAST_DELTA] + 1
        pos = start
        next_offset = first[H_BASE_OFFSET]
        header: Header | None = first
        while header is not None:
            end = pos + header[H_LENGTH] + LOG_OVERHEAD
            if end > limit or header[H_BASE_OFFSET] >= max_offset:
                break
            next_offset = header[H_BASE_OFFSET] + header[H_LAST_DELTA] + 1
            pos = end
            header = self.read_header(pos) if pos + LOG_OVERHEAD <= limit else None
        return start, pos - start, next_offset

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(record timestamp, offset) of the first record at/after `start_offset` with ts >= `timestamp`."""
        ts_offset = self.time_index.lookup_before(timestamp)
        found = self.find_position(max(ts_offset, start_offset))
        if found is None:
            return None
        for pos, hdr in self.iter_headers(found[0]):
            if hdr[H_MAX_TS] < timestamp:
                continue
            size = hdr[H_LENGTH] + LOG_OVERHEAD
            batch = RecordBatch(os.pread(self.fd, size, pos))
            for record in batch.records():
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.timestamp, record.offset
        return None

    # -- recovery -----------------------------------------------------------------------------------------

    def recover(self, on_batch: Callable[[RecordBatch], None] | None = None) -> int:
        """Check every batch, rebuild all indexes, truncate at the first invalid byte.

        The first batch must start at the segment's base offset and each next batch right after the
        previous one, except in compacted logs (where compaction leaves gaps).

        `on_batch` sees each valid batch in order (producer state, txn index). Returns the number of bytes
        truncated. The txn index is reset: `on_batch` is expected to refill it.
        """
        self.indexes_durable = False
        self.offset_index.reset(lazily=True)  # rewritten at the flush that ends recovery
        self.time_index.reset(lazily=True)
        self.txn_index.reset(lazily=True)
        self._reset_counters()
        contiguous_offsets_optional = self.config.cleanup_policy.compacts
        position = 0
        expected = self.base_offset
        chunk = b""
        chunk_start = 0
        while position < self.size:
            rel = position - chunk_start
            if rel + BATCH_HEADER_SIZE > len(chunk):
                chunk = os.pread(self.fd, _RECOVERY_CHUNK, position)
                chunk_start = position
                rel = 0
                if len(chunk) < BATCH_HEADER_SIZE:
                    break
            length = _unpack_offset_length(chunk, rel)[1]
            size = length + LOG_OVERHEAD
            if length < BATCH_HEADER_SIZE - LOG_OVERHEAD or position + size > self.size:
                break
            if rel + size > len(chunk):
                chunk = os.pread(self.fd, max(_RECOVERY_CHUNK, size), position)
                chunk_start = position
                rel = 0
                if len(chunk) < size:
                    break
            try:
                batch = RecordBatch(chunk, rel)
                batch.verify_crc()
                hdr: Header = _unpack_header(chunk, rel)
                # Compacted batches may hold fewer records than lastOffsetDelta + 1 (even none).
                # baseOffset is outside the CRC: outside compacted logs offsets must be contiguous.
                if (hdr[H_BASE_OFFSET] != expected and not contiguous_offsets_optional) or (
                    hdr[H_BASE_OFFSET] < expected or hdr[H_LAST_DELTA] < 0 or hdr[H_COUNT] < 0
                ):
                    raise CorruptRecordError(f"inconsistent batch header at {position}")
                if hdr[H_ATTRIBUTES] & 0x07 > 4:
                    raise CorruptRecordError(f"unknown compression at {position}")
                if on_batch is not None:
                    on_batch(batch)
            except CorruptRecordError:
                break
            self._index_batch(position, size, hdr)
            expected = hdr[H_BASE_OFFSET] + hdr[H_LAST_DELTA] + 1
            position += size
        if self.max_timestamp != NO_TIMESTAMP:
            self.time_index.keep_final_entry(self.max_timestamp, self.offset_of_max_timestamp)
        zeros = self._trailing_zeros(position)
        return self._truncate_bytes(position) - zeros

    def _trailing_zeros(self, position: int) -> int:
        """How many bytes at the end of the file, after `position`, are zeros: what preallocation left after
        the last batch, which is not invalid data."""
        end = self.size
        while end > position:
            start = max(position, end - _RECOVERY_CHUNK)
            chunk = os.pread(self.fd, end - start, start)
            kept = len(chunk.rstrip(b"\0"))
            if kept:
                return self.size - (start + kept)
            end = start
        return self.size - position

    def rebuild_indexes(self) -> None:
        """Rebuild the offset and time indexes from batch headers (the segment is trusted)."""
        self.indexes_durable = False
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_counters()
        for pos, hdr in self.iter_headers(0):
            self._index_batch(pos, hdr[H_LENGTH] + LOG_OVERHEAD, hdr)

    def _reset_counters(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0

    def _index_batch(self, position: int, size: int, hdr: Header) -> None:
        last_offset = hdr[H_BASE_OFFSET] + hdr[H_LAST_DELTA]
        max_ts = hdr[H_MAX_TS]
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size
        self.next_offset = last_offset + 1

    def _truncate_bytes(self, valid: int) -> int:
        truncated = self.size - valid
        if truncated > 0 or self.allocated > valid:
            os.ftruncate(self.fd, valid)
            files.note_length(files.log_file(self.directory, self.base_offset), valid)
            self.size = valid
            self.allocated = valid
            self.flushed_size = min(self.flushed_size, valid)
            self.dropped_size = min(self.dropped_size, valid)
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns bytes removed."""
        found = self.find_position(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self._truncate_bytes(position)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._reset_counters()
        for _pos, hdr in self.iter_headers(0):
            last = hdr[H_BASE_OFFSET] + hdr[H_LAST_DELTA]
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = hdr[H_MAX_TS]
            if hdr[H_MAX_TS] > self.max_timestamp:
                self.max_timestamp = hdr[H_MAX_TS]
                self.offset_of_max_timestamp = last
            self.next_offset = last + 1
        self.bytes_since_last_index_entry = 0
        return removed

    # -- durability and lifecycle -------------------------------------------------------------------------

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the log (and the txn index when it has new entries); with `indexes`, also write and fsync
        the offset and time indexes. Thread-safe against other flushes.

        The active segment is flushed with `indexes=False`: after a crash the last segment is always
        recovered (its indexes rebuilt), so only its `.log` and `.txnindex` must be durable. A segment's
        indexes are made durable once it is no longer active.
        """
        with self.io_lock:
            if self.closed:
                return
            size = self.size
            if files.deferring():  # no descriptor needed: the block's syncfs covers the file
                files.defer_fsync(self.log_path, size)
            else:
                fd = self.fd
                if self.allocated > size:  # preallocated: the ledger records the batches' length
                    files.note_data_length(self.log_path, size)
                files.fsync(fd, self.log_path)
                self.dropped_size = DROP_BEHIND.after_sync(fd, self.dropped_size, size)  # synced: `size`
            if self.txn_index.has_pending or indexes:
                self.txn_index.flush(fsync=True)
            if indexes:
                self.offset_index.flush(fsync=True)
                self.time_index.flush(fsync=True)
                self.indexes_durable = True
            self.flushed_size = max(self.flushed_size, size)

    def drop_behind(self) -> None:
        """After a sync that covered `flushed_size` (a group's syncfs, `files.synced_together`): what
        `flush` drops after its own fsync (drop_behind.py)."""
        with self.io_lock:
            if not self.closed and self.flushed_size - self.dropped_size > DROP_BEHIND.window >= 0:
                self.dropped_size = DROP_BEHIND.after_sync(self.fd, self.dropped_size, self.flushed_size)

    def write_indexes(self) -> None:
        """Write pending index entries without fsync (clean shutdown fsyncs via `flush`)."""
        with self.io_lock:
            self.offset_index.flush(fsync=False)
            self.time_index.flush(fsync=False)
            self.txn_index.flush(fsync=False)

    def close(self) -> None:
        with self.io_lock:
            if self.closed:
                return
            self.closed = True
            HANDLES.forget(self)
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()

    def delete(self) -> None:
        self.close()
        for path in self.paths():
            with contextlib.suppress(FileNotFoundError):
                files.unlink(path)

    def paths(self) -> list[Path]:
        return [
            files.log_file(self.directory, self.base_offset),
            self.offset_index.path,
            self.time_index.path,
            self.txn_index.path,
        ]
