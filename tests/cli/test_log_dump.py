"""`exactly log dump`: on a partition written by the real broker (subprocesses), and on hand-built
segments, indexes and snapshots that hold what the broker cannot write yet (transactions, markers)."""

from __future__ import annotations

import itertools
import re
import shutil
import struct
from pathlib import Path

import pytest

from exactly.records.batch import Compression
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker_batch
from exactly.testing.processes import BrokerProcess
from tests.cli.helpers import Result, assert_one_line_error, run_cli, run_in_process

BATCH_LINE = re.compile(r"^baseOffset: ")


def fields(line: str) -> dict[str, str]:
    """'a: 1 b: x' -> {'a': '1', 'b': 'x'} (batch lines have no spaces inside values)."""
    tokens = line.split(" ")
    return {tokens[i].rstrip(":"): tokens[i + 1] for i in range(0, len(tokens) - 1, 2)}


def batch_lines(result: Result) -> list[dict[str, str]]:
    return [fields(line) for line in result.out_lines if BATCH_LINE.match(line)]


# --- a partition written by the broker -----------------------------------------------------------------


@pytest.mark.interop
def test_dump_partition_written_by_the_broker(
    broker: BrokerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The topic is created automatically by the first produce."""
    bootstrap = broker.bootstrap
    lines = [b"alpha", b"beta", b"gamma"]
    assert run_cli("produce", "dumped", bootstrap=bootstrap, stdin=b"\n".join(lines) + b"\n").returncode == 0
    # 20 x 400 bytes: past 4 KiB, so that a clean shutdown writes the indexes and a producer snapshot
    # (a smaller log makes neither: they are rebuilt by a scan at load)
    assert run_cli("produce", "dumped", "-g", "20", "-s", "400", bootstrap=bootstrap).returncode == 0
    assert broker.stop() == 0

    partition = broker.data_dir / "dumped-0"
    dumped = run_cli("log", "dump", str(partition), "--print-records")
    assert dumped.returncode == 0, dumped
    assert dumped.stderr == ""
    segment = partition / "00000000000000000000.log"
    assert dumped.out_lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    batches = batch_lines(dumped)
    assert batches, dumped.out
    # contiguous offsets 0..22, counts that add up, sound CRCs, idempotent producers' sequences
    assert batches[0]["baseOffset"] == "0"
    assert batches[-1]["lastOffset"] == "22"
    for previous, batch in itertools.pairwise(batches):
        assert int(batch["baseOffset"]) == int(previous["lastOffset"]) + 1
    assert sum(int(b["count"]) for b in batches) == 23
    for b in batches:
        assert int(b["lastOffset"]) - int(b["baseOffset"]) + 1 == int(b["count"])
        assert b["crcValid"] == "true"
        assert b["isTransactional"] == "false"
        assert b["isControl"] == "false"
        assert int(b["producerId"]) >= 0
        assert b["producerEpoch"] == "0"
        assert int(b["lastSequence"]) - int(b["baseSequence"]) + 1 == int(b["count"])
    assert batches[0]["baseSequence"] == "0"
    assert batches[0]["position"] == "0"
    assert {b["producerId"] for b in batches[:1]} != {b["producerId"] for b in batches[-1:]}  # two producers
    records = [line for line in dumped.out_lines if line.startswith("| offset: ")]
    assert len(records) == 23
    assert [line.split(" value: ")[1].split(" headers:")[0] for line in records[:3]] == [
        repr(v) for v in lines
    ]
    assert records[0].startswith("| offset: 0 CreateTime: ")
    assert " key: null " in records[0]

    # the other partition files
    others = sorted(p for p in partition.iterdir() if p.suffix in (".index", ".timeindex", ".snapshot"))
    assert any(p.suffix == ".snapshot" for p in others), list(partition.iterdir())
    extra = run_cli("log", "dump", *map(str, others))
    assert extra.returncode == 0, extra
    assert any(
        re.fullmatch(r"producerId: \d+ producerEpoch: 0 .* batches: \d", line) for line in extra.out_lines
    )

    # one flipped byte inside the first batch's records: crcValid false, exit 1, one error line
    flipped = tmp_path / "00000000000000000000.log"
    shutil.copy(segment, flipped)
    data = bytearray(flipped.read_bytes())
    data[61 + 3] ^= 0xFF
    flipped.write_bytes(data)
    bad = run_cli("log", "dump", str(flipped))
    assert_one_line_error(bad, "invalid CRC", "position 0")
    bad_batches = batch_lines(bad)
    assert bad_batches[0]["crcValid"] == "false"
    assert all(b["crcValid"] == "true" for b in bad_batches[1:])
    assert len(bad_batches) == len(batches)

    # a torn tail: the dump stops at the incomplete batch
    torn = tmp_path / "torn.log"
    torn.write_bytes(segment.read_bytes()[:-5])
    cut = run_in_process(capsys, "log", "dump", str(torn))
    last = batches[-1]["position"]
    assert_one_line_error(cut, f"corrupt batch at position {last}", "truncated")
    assert cut.out_lines[-1].startswith(f"corrupt batch at position {last}: ")
    assert len(batch_lines(cut)) == len(batches) - 1


# --- hand-built files -----------------------------------------------------------------------------------


def _segment() -> tuple[bytes, list[int]]:
    """A transaction (3 records, headers) + COMMIT, a plain gzip batch, an aborted transaction + ABORT."""
    txn = BatchBuilder(
        base_offset=0, producer_id=7, producer_epoch=2, base_sequence=10, is_transactional=True
    )
    txn.append(1_000, b"k0", b"v0", [("trace", b"abc"), ("empty", None)])
    txn.append(1_001, None, b"v1")
    txn.append(1_002, b"k2", None)
    commit = build_end_txn_marker_batch(
        7, 2, EndTxnMarker(ControlRecordType.COMMIT, 5), base_offset=3, timestamp_ms=1_003
    )
    plain = BatchBuilder(base_offset=4, compression=Compression.GZIP)
    plain.append(2_000, None, b"x" * 50)
    plain.append(2_005, None, b"y")
    aborted = BatchBuilder(
        base_offset=6, producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    aborted.append(3_000, None, b"lost")
    abort = build_end_txn_marker_batch(
        8, 0, EndTxnMarker(ControlRecordType.ABORT, 9), base_offset=7, timestamp_ms=3_001
    )
    parts = [txn.build(), commit, plain.build(), aborted.build(), abort]
    positions = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    return b"".join(parts), positions


def test_dump_transactions_markers_and_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, positions = _segment()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    result = run_in_process(capsys, "log", "dump", str(path), "--print-records")
    assert result.returncode == 0, result
    batches = batch_lines(result)
    assert [(b["baseOffset"], b["lastOffset"], b["count"]) for b in batches] == [
        ("0", "2", "3"),
        ("3", "3", "1"),
        ("4", "5", "2"),
        ("6", "6", "1"),
        ("7", "7", "1"),
    ]
    assert [int(b["position"]) for b in batches] == positions
    txn, commit, plain, aborted, abort = batches
    assert (txn["producerId"], txn["producerEpoch"], txn["baseSequence"], txn["lastSequence"]) == (
        "7",
        "2",
        "10",
        "12",
    )
    assert (txn["isTransactional"], txn["isControl"]) == ("true", "false")
    assert (commit["isTransactional"], commit["isControl"]) == ("true", "true")
    assert (commit["endTxnMarker"], commit["coordinatorEpoch"]) == ("COMMIT", "5")
    assert (abort["endTxnMarker"], abort["coordinatorEpoch"], abort["producerId"]) == ("ABORT", "9", "8")
    assert "endTxnMarker" not in aborted
    assert (plain["compresscodec"], plain["producerId"], plain["baseSequence"]) == ("gzip", "-1", "-1")
    assert (plain["baseTimestamp"], plain["maxTimestamp"]) == ("2000", "2005")
    assert all(b["crcValid"] == "true" for b in batches)
    assert int(txn["size"]) == positions[1]

    records = [line for line in result.out_lines if line.startswith("| ")]
    assert records[:4] == [
        "| offset: 0 CreateTime: 1000 sequence: 10 key: b'k0' value: b'v0' "
        "headers: [trace=b'abc', empty=null]",
        "| offset: 1 CreateTime: 1001 sequence: 11 key: null value: b'v1' headers: []",
        "| offset: 2 CreateTime: 1002 sequence: 12 key: b'k2' value: null headers: []",
        "| offset: 3 CreateTime: 1003 endTxnMarker: COMMIT coordinatorEpoch: 5",
    ]
    assert records[4].startswith("| offset: 4 CreateTime: 2000 sequence: -1 key: null value: b'xxxx")
    assert records[-1] == "| offset: 7 CreateTime: 3001 endTxnMarker: ABORT coordinatorEpoch: 9"


def test_dump_reports_bad_crc_and_corrupt_headers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, positions = _segment()
    path = tmp_path / "00000000000000000042.log"

    # a flipped byte in the gzip batch's payload: CRC mismatch, the dump goes on
    flipped = bytearray(data)
    flipped[positions[2] + 70] ^= 0x01
    path.write_bytes(flipped)
    result = run_in_process(capsys, "log", "dump", str(path))
    assert result.out_lines[1] == "Log starting offset: 42"
    assert [b["crcValid"] for b in batch_lines(result)] == ["true", "true", "false", "true", "true"]
    assert_one_line_error(
        result, str(path), f"batch at position {positions[2]} (offsets 4-5) has an invalid CRC"
    )
    assert result.returncode == 1

    # a records count that disagrees with the records: with --print-records the dump ends there
    miscounted = bytearray(data)
    struct.pack_into(">i", miscounted, positions[2] + 57, 9)
    path.write_bytes(miscounted)
    result = run_in_process(capsys, "log", "dump", str(path), "--print-records")
    assert result.returncode == 1
    assert result.out_lines[-1].startswith(f"corrupt batch at position {positions[2]}: ")
    assert len(result.err_lines) == 2  # the bad CRC and the batch that stopped the dump

    # a bad magic byte in the fourth batch: the dump stops at it
    bad_magic = bytearray(data)
    bad_magic[positions[3] + 16] = 7
    path.write_bytes(bad_magic)
    result = run_in_process(capsys, "log", "dump", str(path))
    assert len(batch_lines(result)) == 3
    assert (
        result.out_lines[-1] == f"corrupt batch at position {positions[3]}: invalid magic 7 in record batch "
        f"at position {positions[3]}"
    )
    assert_one_line_error(result, f"corrupt batch at position {positions[3]}")

    # header consistency: more records than the batch's offsets (CRC recomputed); fewer is what compaction
    # leaves, and is dumped
    inconsistent = bytearray(data[: positions[1]])
    struct.pack_into(">i", inconsistent, 23, 1)  # 3 records, 2 offsets
    from exactly.records.batch import set_crc

    set_crc(inconsistent, 0)
    path.write_bytes(inconsistent)
    result = run_in_process(capsys, "log", "dump", str(path))
    assert batch_lines(result)[0]["crcValid"] == "true"
    assert_one_line_error(result, "corrupt batch at position 0", "inconsistent batch offset range")


def test_dump_indexes_and_snapshots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from exactly.storage.snapshot import SnapshotBatch, SnapshotEntry, encode_snapshot

    base = "00000000000000000100"
    index = tmp_path / f"{base}.index"
    index.write_bytes(struct.pack(">IIII", 5, 0, 9, 4096))
    time_index = tmp_path / f"{base}.timeindex"
    time_index.write_bytes(struct.pack(">qIqI", 1_000, 5, 2_000, 9))
    txn_index = tmp_path / f"{base}.txnindex"
    txn_index.write_bytes(struct.pack(">hqqqq", 0, 8, 106, 107, 108))
    snapshot = tmp_path / "00000000000000000110.snapshot"
    entry = SnapshotEntry(7, 2, 5, -1, 1_003, (SnapshotBatch(12, 102, 2, 1_002),))
    snapshot.write_bytes(encode_snapshot([entry]))

    result = run_in_process(capsys, "log", "dump", str(index), str(time_index), str(txn_index), str(snapshot))
    assert result.returncode == 0, result
    assert result.out_lines == [
        f"Dumping {index}",
        "offset: 105 position: 0",
        "offset: 109 position: 4096",
        f"Dumping {time_index}",
        "timestamp: 1000 offset: 105",
        "timestamp: 2000 offset: 109",
        f"Dumping {txn_index}",
        "version: 0 producerId: 8 firstOffset: 106 lastOffset: 107 lastStableOffset: 108",
        f"Dumping {snapshot}",
        "version: 2 producers: 1",
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 5 currentTxnFirstOffset: -1 lastTimestamp: 1003 "
        "batches: 1",
        "| firstSequence: 10 lastSequence: 12 firstOffset: 100 lastOffset: 102 timestamp: 1002",
    ]

    index.write_bytes(struct.pack(">IIII", 9, 4096, 5, 0) + b"\x00\x01")
    result = run_in_process(capsys, "log", "dump", str(index))
    assert_one_line_error(result, "corrupt index: 2 trailing bytes after 2 entries")

    damaged = bytearray(snapshot.read_bytes())
    damaged[-1] ^= 0xFF
    snapshot.write_bytes(damaged)
    result = run_in_process(capsys, "log", "dump", str(snapshot))
    assert_one_line_error(result, "corrupt snapshot")


def test_dump_leader_epoch_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(b"0\n2\n0 0\n3 1042\n")
    result = run_in_process(capsys, "log", "dump", str(checkpoint))
    assert result.returncode == 0, result
    assert result.out_lines == [
        f"Dumping {checkpoint}",
        "leader epochs: 2",
        "epoch: 0 startOffset: 0",
        "epoch: 3 startOffset: 1042",
    ]
    checkpoint.write_bytes(b"0\n2\n0 0\n")
    result = run_in_process(capsys, "log", "dump", str(checkpoint))
    assert_one_line_error(result, "corrupt leader-epoch checkpoint: 2 entries announced, 1 found")


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("missing.log", "no such file or directory"), ("notes.txt", "don't know how to dump")],
)
def test_dump_refuses_unknown_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, fragment: str
) -> None:
    if name.endswith(".txt"):
        (tmp_path / name).write_text("hello")
    result = run_in_process(capsys, "log", "dump", str(tmp_path / name))
    assert_one_line_error(result, fragment)
    empty_dir = tmp_path / "empty-0"
    empty_dir.mkdir()
    assert_one_line_error(run_in_process(capsys, "log", "dump", str(empty_dir)), "no .log files")


def test_no_arguments_prints_the_overview(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_in_process(capsys)
    assert result.returncode == 0
    for command in (
        "exactly serve",
        "exactly topics create",
        "exactly produce",
        "exactly consume",
        "exactly log dump",
    ):
        assert command in result.out


def test_transaction_log_decoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--transaction-log-decoder prints __transaction_state records as states, tombstones as <DELETE>,
    and an undecodable value as invalid without stopping the dump."""
    from exactly.txn import TransactionLogValue, TxnState, encode_key, encode_value

    ongoing = TransactionLogValue(7, 3, 60000, TxnState.ONGOING, frozenset({("b", 1), ("a", 0)}), 1000, 900)
    builder = BatchBuilder()
    builder.append(1000, encode_key("app-1"), encode_value(ongoing))
    builder.append(1001, encode_key("app-2"), None)
    builder.append(1002, encode_key("app-3"), b"\x00\x09garbage")
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(builder.build())
    result = run_in_process(capsys, "log", "dump", str(path), "--transaction-log-decoder")
    assert result.returncode == 0, result
    records = [line for line in result.out_lines if line.startswith("| offset:")]
    assert len(records) == 3
    assert records[0].endswith(
        "transactionalId: app-1 producerId: 7 producerEpoch: 3 state: Ongoing partitions: [a-0,b-1] "
        "txnLastUpdateTimestamp: 1000 txnTimeoutMs: 60000"
    )
    assert records[1].endswith("transactionalId: app-2 <DELETE>")
    assert "transactionLog: invalid (" in records[2]


def test_transaction_log_decoder_shows_prepared_tags_and_batch_decisions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The two-phase commit extension's records: a Prepared transaction with its tag, a batch decision."""
    from exactly.txn import TransactionLogValue, TxnState, encode_key, encode_value
    from exactly.txn.decisions import BatchDecisionRecord, encode_decision_key, encode_decision_value
    from exactly.txn.records import PreparedTag

    tag = PreparedTag("query-9", 4, 2, 950)
    prepared = TransactionLogValue(
        7, 3, 60000, TxnState.PREPARED, frozenset({("out", 2)}), 1000, 900, prepared=tag
    )
    decision = BatchDecisionRecord("query-9", 4, ("t-a", "t-b"), 1100)
    builder = BatchBuilder()
    builder.append(1000, encode_key("t-a"), encode_value(prepared))
    builder.append(1100, encode_decision_key("query-9", 4), encode_decision_value(decision))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(builder.build())
    result = run_in_process(capsys, "log", "dump", str(path), "--transaction-log-decoder")
    assert result.returncode == 0, result
    records = [line for line in result.out_lines if line.startswith("| offset:")]
    assert records[0].endswith(
        "transactionalId: t-a producerId: 7 producerEpoch: 3 state: Prepared partitions: [out-2] "
        "txnLastUpdateTimestamp: 1000 txnTimeoutMs: 60000 "
        "prepared: [queryId: query-9 batchId: 4 partition: 2]"
    )
    assert records[1].endswith(
        "batchDecision: queryId: query-9 batchId: 4 winners: [t-a,t-b] timestamp: 1100"
    )
