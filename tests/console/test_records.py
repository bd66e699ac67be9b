"""The record browser's rows: aborted records marked (read_uncommitted) or left out and counted
(read_committed), open transactions marked, markers shown only as stored, paging by offset."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exactly.console.model import Isolation
from exactly.console.records import PREVIEW, AbortedRange, browse, preview
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker_batch


def _batch(base: int, values: list[bytes], producer_id: int = -1, transactional: bool = False) -> bytes:
    builder = BatchBuilder(
        base_offset=base,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + base + i, b"key", value, [("h", b"x")])
    return builder.build()


def _marker(offset: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_end_txn_marker_batch(producer_id, 0, EndTxnMarker(kind, 0), offset, 1_700_000_000_000)


# offsets 0-1 plain; 2-3 txn of producer 7 aborted by the marker at 4; 5-6 txn of producer 8 committed by
# 7; 8-9 an open txn of producer 9 (the LSO is 8)
LOG = b"".join(
    [
        _batch(0, [b"plain-0", b"plain-1"]),
        _batch(2, [b"aborted-2", b"aborted-3"], 7, True),
        _marker(4, 7, ControlRecordType.ABORT),
        _batch(5, [b"committed-5", b"committed-6"], 8, True),
        _marker(7, 8, ControlRecordType.COMMIT),
        _batch(8, [b"open-8", b"open-9"], 9, True),
    ]
)
ABORTED = [AbortedRange(7, 2, 4)]


def test_read_uncommitted_shows_everything_marked() -> None:
    got = browse(LOG, ABORTED, Isolation.READ_UNCOMMITTED, 0, lso=8, limit=100)
    by_offset = {r.offset: r for r in got.rows}
    assert sorted(by_offset) == list(range(10))
    assert [o for o, r in by_offset.items() if r.aborted] == [2, 3]
    assert [o for o, r in by_offset.items() if r.open] == [8, 9]
    assert {o: r.control for o, r in by_offset.items() if r.control} == {4: "ABORT", 7: "COMMIT"}
    assert by_offset[5].value == "committed-5"
    assert by_offset[5].transactional
    assert by_offset[0].key == "key"
    assert by_offset[0].headers == (("h", "x"),)
    assert not by_offset[0].transactional
    assert by_offset[0].producer_id == -1
    assert got.next_offset == 10
    assert got.skipped_aborted == 0


def test_read_committed_is_what_a_read_committed_consumer_sees() -> None:
    got = browse(LOG[: len(LOG)], ABORTED, Isolation.READ_COMMITTED, 0, lso=8, limit=100)
    assert [(r.offset, r.value) for r in got.rows] == [
        (0, "plain-0"),
        (1, "plain-1"),
        (5, "committed-5"),
        (6, "committed-6"),
    ]
    assert got.skipped_aborted == 2
    assert not any(r.aborted or r.open or r.control for r in got.rows)


def test_pages_start_at_the_offset_and_stop_at_the_limit() -> None:
    first = browse(LOG, ABORTED, Isolation.READ_UNCOMMITTED, 3, lso=8, limit=3)
    assert [r.offset for r in first.rows] == [3, 4, 5]
    assert first.next_offset == 6
    second = browse(LOG, ABORTED, Isolation.READ_UNCOMMITTED, first.next_offset, lso=8, limit=3)
    assert [r.offset for r in second.rows] == [6, 7, 8]


def test_a_trailing_partial_batch_is_ignored() -> None:
    got = browse(LOG[:-5], ABORTED, Isolation.READ_UNCOMMITTED, 0, lso=8, limit=100)
    assert [r.offset for r in got.rows] == list(range(8))


@given(st.binary(max_size=400))
def test_preview_is_text_or_hex_and_bounded(data: bytes) -> None:
    shown = preview(data)
    assert shown is not None
    assert len(shown) <= 3 * PREVIEW + 4
    try:
        text = data.decode()
    except UnicodeDecodeError:
        assert shown.startswith("0x")
    else:
        if len(text) <= PREVIEW and text.isprintable():
            assert shown == text


def test_preview_of_null_is_none() -> None:
    assert preview(None) is None
