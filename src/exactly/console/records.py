"""The record browser's rows: the batches of one partition read from its log, as a consumer would see
them (read_committed) or as they are stored (read_uncommitted), each record marked.

Input is what `PartitionLog.read` returns — RecordBatch v2 laid end to end — and the partition's aborted
transactions overlapping the range (`PartitionLog.collect_aborted_transactions`: producer id, first and
last offset of each). A data record of a transactional batch is

* aborted: an aborted transaction of its producer covers its offset (its ABORT marker is written);
* open: at or above the last stable offset (its transaction is not decided yet);
* committed otherwise.

read_committed shows what a read_committed consumer gets: records below the LSO, without aborted records
and without the COMMIT/ABORT control records (it counts the aborted ones it left out). read_uncommitted
shows every record and every marker. Keys, values and headers are shown as UTF-8 text when they are,
else as hex, cut at `PREVIEW` characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from exactly.console.model import Isolation, RecordRow
from exactly.errors import CorruptRecordError
from exactly.records.batch import iter_batches
from exactly.records.control import parse_control_record_type

__all__ = ["PREVIEW", "AbortedRange", "BrowsedRecords", "browse", "preview"]

PREVIEW = 200


@dataclass(frozen=True, slots=True)
class AbortedRange:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


@dataclass(frozen=True, slots=True)
class BrowsedRecords:
    rows: tuple[RecordRow, ...]
    next_offset: int  # the offset after the last record looked at
    skipped_aborted: int


def preview(data: bytes | None) -> str | None:
    """Text for a key, value or header: UTF-8 if it decodes (non-printables escaped), else hex."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        shown = data[: PREVIEW // 2].hex(" ")
        return f"0x {shown}…" if len(data) > PREVIEW // 2 else f"0x {shown}"
    text = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "…"


def browse(
    data: bytes | memoryview,
    aborted: Sequence[AbortedRange],
    isolation: Isolation,
    start_offset: int,
    lso: int,
    limit: int,
) -> BrowsedRecords:
    """The rows of at most `limit` records from `start_offset` in `data` (complete batches; a trailing
    partial batch is ignored)."""
    by_producer: dict[int, list[AbortedRange]] = {}
    for txn in aborted:
        by_producer.setdefault(txn.producer_id, []).append(txn)
    committed_only = isolation is Isolation.READ_COMMITTED
    rows: list[RecordRow] = []
    skipped = 0
    next_offset = start_offset
    for batch in iter_batches(data, allow_partial=True):
        if batch.last_offset < start_offset:
            continue
        if len(rows) >= limit:
            break
        producer_id = batch.producer_id
        transactional = batch.is_transactional
        control = batch.is_control
        ranges = by_producer.get(producer_id, ()) if transactional else ()
        for record in batch.records():
            offset = record.offset
            if offset < start_offset:
                continue
            if len(rows) >= limit:
                break
            next_offset = offset + 1
            marker: str | None = None
            if control:
                try:
                    marker = parse_control_record_type(record.key).name
                except CorruptRecordError:
                    marker = "CONTROL"
            is_aborted = not control and any(r.first_offset <= offset <= r.last_offset for r in ranges)
            is_open = transactional and not control and not is_aborted and offset >= lso
            if committed_only and (control or is_open):
                continue
            if committed_only and is_aborted:
                skipped += 1
                continue
            rows.append(
                RecordRow(
                    offset=offset,
                    timestamp=record.timestamp,
                    key=None if control else preview(record.key),
                    value=None if control else preview(record.value),
                    headers=tuple((name, preview(value) or "") for name, value in record.headers),
                    producer_id=producer_id,
                    transactional=transactional,
                    control=marker,
                    aborted=is_aborted,
                    open=is_open,
                )
            )
        else:
            next_offset = max(next_offset, batch.last_offset + 1)
    return BrowsedRecords(tuple(rows), next_offset, skipped)
