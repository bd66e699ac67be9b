"""`exactly log dump PATH...`: print what a partition's files hold, offline (like kafka-dump-log).

A `.log` segment prints one line per batch (offsets, producer id/epoch, sequences, transactional/control
flags, the COMMIT/ABORT marker of control batches, compression, size, CRC and whether it matches), and
with ``--print-records`` one ``|`` line per record. A partition directory dumps its `.log` files in
offset order. `.index`, `.timeindex`, `.txnindex` and `.snapshot` files print their entries, and so does a
partition's `leader-epoch-checkpoint` (one ``epoch: E startOffset: O`` line per leader epoch).

A batch whose CRC does not match is printed with ``crcValid: false``; a batch that cannot be read at all
(truncated tail, bad magic or length, undecodable records) ends the dump of that file with a
``corrupt batch at position N: ...`` line. Either makes the command exit with 1, after one ``error:``
line per damaged file on stderr.
"""

from __future__ import annotations

import mmap
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from exactly.cli.common import fail, one_line, print_error, reported_errors
from exactly.errors import CorruptRecordError

if TYPE_CHECKING:
    from exactly.records.batch import RecordBatch
    from exactly.records.record import Record

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Inspect partition files offline.")

Write = Callable[[str], None]
Decoder = Callable[["Record"], str]
Buffer = bytes | memoryview

_OFFSET_ENTRY = struct.Struct(">II")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qI")  # timestamp, relative offset
_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
_SNAPSHOT_VERSION = struct.Struct(">h")

SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"  # storage.files.LEADER_EPOCH_CHECKPOINT


@app.command()
def dump(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="segment .log files, .index/.timeindex/.txnindex/.snapshot files, leader-epoch-checkpoint "
            "files, or partition directories (their .log files are dumped)",
            show_default=False,
        ),
    ],
    print_records: Annotated[
        bool, typer.Option("--print-records", "-r", help="also print every record of every batch")
    ] = False,
    transaction_log_decoder: Annotated[
        bool,
        typer.Option(
            "--transaction-log-decoder",
            help="decode records as __transaction_state keys and values (implies --print-records)",
        ),
    ] = False,
) -> None:
    """Dump record batches (or index/snapshot entries) of partition files."""
    with reported_errors():
        files = list(_expand(paths))
        problems: list[str] = []
        write = _stdout_writer()
        decoder = transaction_log_text if transaction_log_decoder else None
        for path in files:
            problems += dump_file(
                path, write, print_records=print_records or decoder is not None, decoder=decoder
            )
        sys.stdout.flush()
        for problem in problems:
            print_error(problem)
        if problems:
            raise typer.Exit(1)


def _stdout_writer() -> Write:
    out = sys.stdout

    def write(line: str) -> None:
        out.write(line)
        out.write("\n")

    return write


def _expand(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            logs = sorted(path.glob("*.log"))
            if not logs:
                fail(f"{path}: no .log files in this directory")
            yield from logs
        elif not path.exists():
            fail(f"{path}: no such file or directory")
        elif path.suffix not in SUFFIXES and path.name != LEADER_EPOCH_CHECKPOINT:
            fail(
                f"{path}: don't know how to dump this file (expected {', '.join(SUFFIXES)}, "
                f"{LEADER_EPOCH_CHECKPOINT} or a directory)"
            )
        else:
            yield path


def dump_file(
    path: Path, write: Write, *, print_records: bool = False, decoder: Decoder | None = None
) -> list[str]:
    """Dump one file; returns the problems found (empty when the file is sound)."""
    write(f"Dumping {path}")
    data = _read(path)
    suffix = path.suffix
    if suffix == ".log":
        base = _base_offset(path)
        if base is not None:
            write(f"Log starting offset: {base}")
        return [f"{path}: {p}" for p in dump_log(data, write, print_records=print_records, decoder=decoder)]
    if suffix == ".index":
        problems = dump_offset_index(data, _base_offset(path) or 0, write)
    elif suffix == ".timeindex":
        problems = dump_time_index(data, _base_offset(path) or 0, write)
    elif suffix == ".txnindex":
        problems = dump_txn_index(data, write)
    elif path.name == LEADER_EPOCH_CHECKPOINT:
        problems = dump_leader_epochs(data, write)
    else:
        problems = dump_snapshot(data, write)
    for problem in problems:
        write(problem)
    return [f"{path}: {p}" for p in problems]


def _read(path: Path) -> Buffer:
    with path.open("rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            return b""
        # Segments can be large: map instead of reading. The map lives until the process exits.
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def _base_offset(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


# --- .log ---------------------------------------------------------------------------------------------


def dump_log(
    data: Buffer, write: Write, *, print_records: bool = False, decoder: Decoder | None = None
) -> list[str]:
    """One line per batch of a segment; returns the problems (bad CRCs, the corrupt batch that stopped
    the dump)."""
    from exactly.records.batch import RecordBatch

    problems: list[str] = []
    pos = 0
    end = len(data)
    while pos < end:
        try:
            batch = RecordBatch(data, pos)
        except CorruptRecordError as e:
            problems.append(_corrupt(write, pos, e))
            break
        crc_valid = batch.is_valid_crc()
        write(batch_line(batch, crc_valid))
        if not crc_valid:
            problems.append(
                f"batch at position {pos} (offsets {batch.base_offset}-{batch.last_offset}) has an "
                f"invalid CRC (stored {batch.crc}, computed {batch.compute_crc()})"
            )
        else:
            try:
                batch.validate()
            except CorruptRecordError as e:
                problems.append(_corrupt(write, pos, e))
                break
        if print_records:
            try:
                for record in batch.records():
                    line = record_line(batch, record)
                    if decoder is not None and not batch.is_control:
                        line = f"{line} {decoder(record)}"
                    write(line)
            except CorruptRecordError as e:
                problems.append(_corrupt(write, pos, e))
                break
        pos = batch.end
    return problems


def transaction_log_text(record: Record) -> str:
    """A `__transaction_state` record as Kafka's --transaction-log-decoder shows it (plus exactly's
    two-phase commit extension: the prepared tag, and batch decisions)."""
    from exactly.txn.decisions import DECISION_KEY_VERSION, decode_decision_key, decode_decision_value
    from exactly.txn.records import decode_key, decode_value, key_version

    try:
        if record.key is None:
            raise CorruptRecordError("record without a key")
        if key_version(record.key) == DECISION_KEY_VERSION:
            query_id, batch_id = decode_decision_key(record.key)
            decision = decode_decision_value(query_id, batch_id, record.value)
            return (
                f"batchDecision: queryId: {query_id} batchId: {batch_id} "
                f"winners: [{','.join(decision.winners)}] timestamp: {decision.timestamp_ms}"
            )
        txn_id = decode_key(record.key)
        value = decode_value(record.value)
    except CorruptRecordError as e:
        return f"transactionLog: invalid ({one_line(str(e))})"
    if value is None:
        return f"transactionalId: {txn_id} <DELETE>"
    partitions = ",".join(f"{t}-{p}" for t, p in sorted(value.partitions))
    tag = value.prepared
    prepared = (
        f" prepared: [queryId: {tag.query_id} batchId: {tag.batch_id} partition: {tag.partition}]"
        if tag is not None
        else ""
    )
    return (
        f"transactionalId: {txn_id} producerId: {value.producer_id} producerEpoch: {value.producer_epoch} "
        f"state: {value.state.kafka_name} partitions: [{partitions}] "
        f"txnLastUpdateTimestamp: {value.last_update_timestamp_ms} "
        f"txnTimeoutMs: {value.transaction_timeout_ms}{prepared}"
    )


def _corrupt(write: Write, pos: int, error: Exception) -> str:
    message = f"corrupt batch at position {pos}: {one_line(str(error))}"
    write(message)
    return message


def batch_line(batch: RecordBatch, crc_valid: bool) -> str:
    base_sequence = batch.base_sequence
    try:
        codec = batch.compression.name.lower()
    except CorruptRecordError:
        codec = f"unknown({batch.attributes & 0x07})"
    parts = [
        f"baseOffset: {batch.base_offset}",
        f"lastOffset: {batch.last_offset}",
        f"count: {batch.records_count}",
        f"position: {batch.position}",
        f"timestampType: {_timestamp_type(batch)}",
        f"baseTimestamp: {batch.base_timestamp}",
        f"maxTimestamp: {batch.max_timestamp}",
        f"producerId: {batch.producer_id}",
        f"producerEpoch: {batch.producer_epoch}",
        f"baseSequence: {base_sequence}",
        f"lastSequence: {batch.last_sequence}",
        f"partitionLeaderEpoch: {batch.partition_leader_epoch}",
        f"isTransactional: {_bool(batch.is_transactional)}",
        f"isControl: {_bool(batch.is_control)}",
    ]
    if batch.is_control:
        parts.append(_marker_text(batch) if crc_valid else "endTxnMarker: unknown (bad CRC)")
    if batch.has_delete_horizon:
        parts.append(f"deleteHorizonMs: {batch.base_timestamp}")
    parts += [
        f"compresscodec: {codec}",
        f"size: {batch.size_in_bytes}",
        f"magic: {batch.magic}",
        f"crc: {batch.crc}",
        f"crcValid: {_bool(crc_valid)}",
    ]
    return " ".join(parts)


def _marker_text(batch: RecordBatch) -> str:
    from exactly.records.control import parse_end_txn_marker

    try:
        marker = parse_end_txn_marker(batch)
    except CorruptRecordError as e:
        return f"endTxnMarker: invalid ({one_line(str(e))})"
    return f"endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"


def record_line(batch: RecordBatch, record: Record) -> str:
    from exactly.records.batch import NO_SEQUENCE, increment_sequence

    parts = [f"| offset: {record.offset}", f"{_timestamp_type(batch)}: {record.timestamp}"]
    if batch.is_control:
        from exactly.records.control import ControlRecordType, parse_control_record_type

        try:
            kind = parse_control_record_type(record.key)
        except CorruptRecordError as e:
            parts.append(f"controlRecord: invalid ({one_line(str(e))})")
        else:
            epoch = (
                struct.unpack_from(">i", record.value, 2)[0]
                if record.value is not None and len(record.value) >= 6
                else None
            )
            name = ControlRecordType(kind).name
            parts.append(f"endTxnMarker: {name} coordinatorEpoch: {epoch if epoch is not None else '?'}")
        return " ".join(parts)
    base_sequence = batch.base_sequence
    sequence = (
        NO_SEQUENCE
        if base_sequence == NO_SEQUENCE
        else increment_sequence(base_sequence, record.offset - batch.base_offset)
    )
    headers = ", ".join(f"{key}={_bytes_text(value)}" for key, value in record.headers)
    parts += [
        f"sequence: {sequence}",
        f"key: {_bytes_text(record.key)}",
        f"value: {_bytes_text(record.value)}",
        f"headers: [{headers}]",
    ]
    return " ".join(parts)


def _timestamp_type(batch: RecordBatch) -> str:
    from exactly.records.batch import TimestampType

    return "LogAppendTime" if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"


def _bytes_text(data: bytes | None) -> str:
    return "null" if data is None else repr(data)


def _bool(value: bool) -> str:
    return "true" if value else "false"


# --- indexes and snapshots ----------------------------------------------------------------------------


def _trailing(data: Buffer, entry_size: int) -> list[str]:
    extra = len(data) % entry_size
    if extra:
        return [f"corrupt index: {extra} trailing bytes after {len(data) // entry_size} entries"]
    return []


def dump_offset_index(data: Buffer, base_offset: int, write: Write) -> list[str]:
    problems = _trailing(data, _OFFSET_ENTRY.size)
    usable = memoryview(data)[: len(data) - len(data) % _OFFSET_ENTRY.size]
    previous: tuple[int, int] | None = None
    for number, (relative, position) in enumerate(_OFFSET_ENTRY.iter_unpack(usable)):
        write(f"offset: {base_offset + relative} position: {position}")
        if previous is not None and (relative <= previous[0] or position <= previous[1]) and not problems:
            problems.append(f"index entry {number} is not after the one before it")
        previous = (relative, position)
    return problems


def dump_time_index(data: Buffer, base_offset: int, write: Write) -> list[str]:
    problems = _trailing(data, _TIME_ENTRY.size)
    usable = memoryview(data)[: len(data) - len(data) % _TIME_ENTRY.size]
    previous: tuple[int, int] | None = None
    for number, (timestamp, relative) in enumerate(_TIME_ENTRY.iter_unpack(usable)):
        write(f"timestamp: {timestamp} offset: {base_offset + relative}")
        if previous is not None and (timestamp <= previous[0] or relative < previous[1]) and not problems:
            problems.append(f"time index entry {number} is not after the one before it")
        previous = (timestamp, relative)
    return problems


def dump_txn_index(data: Buffer, write: Write) -> list[str]:
    problems = _trailing(data, _TXN_ENTRY.size)
    usable = memoryview(data)[: len(data) - len(data) % _TXN_ENTRY.size]
    for version, producer_id, first, last, lso in _TXN_ENTRY.iter_unpack(usable):
        write(
            f"version: {version} producerId: {producer_id} firstOffset: {first} lastOffset: {last} "
            f"lastStableOffset: {lso}"
        )
    return problems


def dump_leader_epochs(data: Buffer, write: Write) -> list[str]:
    from exactly.storage.leader_epoch import CorruptLeaderEpochCheckpointError, decode_checkpoint

    try:
        entries = decode_checkpoint(bytes(data))
    except CorruptLeaderEpochCheckpointError as e:
        return [f"corrupt leader-epoch checkpoint: {one_line(str(e))}"]
    write(f"leader epochs: {len(entries)}")
    for entry in entries:
        write(f"epoch: {entry.epoch} startOffset: {entry.start_offset}")
    return []


def dump_snapshot(data: Buffer, write: Write) -> list[str]:
    from exactly.storage.snapshot import CorruptSnapshotError, decode_snapshot

    raw = bytes(data)
    try:
        entries = decode_snapshot(raw)
    except CorruptSnapshotError as e:
        return [f"corrupt snapshot: {one_line(str(e))}"]
    (version,) = _SNAPSHOT_VERSION.unpack_from(raw)
    write(f"version: {version} producers: {len(entries)}")
    for entry in entries:
        write(
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {entry.current_txn_first_offset} "
            f"lastTimestamp: {entry.last_timestamp} batches: {len(entry.batches)}"
        )
        for b in entry.batches:
            first_sequence = (b.last_sequence - b.offset_delta) % (1 << 31) if b.last_sequence >= 0 else -1
            write(
                f"| firstSequence: {first_sequence} lastSequence: {b.last_sequence} "
                f"firstOffset: {b.last_offset - b.offset_delta} lastOffset: {b.last_offset} "
                f"timestamp: {b.timestamp}"
            )
    return []
