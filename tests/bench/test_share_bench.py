"""The pure parts of `exactly bench share`: a round's figures from its workers' reports (the exactly-once
check: distinct, duplicate and missing offsets), the rotation of the variants and the table."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exactly.bench.figures import Sheet
from exactly.bench.share import (
    RECORD_SIZE,
    RoundResult,
    WorkerReport,
    fill_sheet,
    markdown,
    order,
    spread,
    summarize,
)


def test_a_round_counts_distinct_duplicate_and_missing_offsets() -> None:
    expected = {0: 3, 1: 2}  # offsets 0..2 of partition 0, 0..1 of partition 1
    reports = [
        WorkerReport(((0, 0), (0, 1), (1, 0)), first=10.0, last=12.0, started=9.0),
        WorkerReport(((0, 1), (1, 1)), first=10.5, last=14.0, started=9.5),
        WorkerReport((), None, None, started=9.2),  # got nothing
    ]
    result = summarize("share-4", 2, reports, expected)
    assert (result.records, result.duplicates, result.missing) == (4, 1, 1)  # (0, 1) twice, (0, 2) never
    assert result.seconds == 4.0
    assert result.total_seconds == 5.0
    assert result.records_per_s == 1.0
    assert result.mb_per_s == RECORD_SIZE / (1 << 20)
    assert result.records_per_s_with_join == 4 / 5


def test_a_round_with_no_records_has_no_rate() -> None:
    result = summarize("share-1", 0, [WorkerReport((), None, None)], {0: 5})
    assert (result.records, result.missing, result.seconds, result.records_per_s) == (0, 5, 0.0, 0.0)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9)), max_size=60), st.integers(1, 4))
def test_every_delivery_is_distinct_or_a_duplicate(delivered: list[tuple[int, int]], workers: int) -> None:
    reports = [WorkerReport(tuple(delivered[i::workers]), 0.0, 1.0) for i in range(workers)]
    result = summarize("v", 0, reports, dict.fromkeys(range(4), 10))
    assert result.records + result.duplicates == len(delivered)
    assert result.records + result.missing == 40
    assert result.records == len(set(delivered))


@given(st.lists(st.text(min_size=1, max_size=3), unique=True, min_size=1, max_size=5))
def test_each_variant_runs_first_once_in_as_many_rounds(variants: list[str]) -> None:
    firsts = [order(variants, r)[0] for r in range(len(variants))]
    assert sorted(firsts) == sorted(variants)
    assert all(sorted(order(variants, r)) == sorted(variants) for r in range(7))


def test_spread_and_table() -> None:
    assert spread([3.0, 1.0, 2.0]) == spread([2.0, 3.0, 1.0])
    s = spread([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.low, s.high, s.n) == (2.5, 1.0, 10.0, 4)
    assert spread([]).n == 0
    sheet = Sheet("share")
    fill_sheet(
        [
            RoundResult("share-1", 0, 100, 0, 0, 2.0, 2.5),
            RoundResult("share-1", 1, 100, 0, 0, 1.0, 1.5),
            RoundResult("classic-1", 0, 100, 3, 0, 0.5, 1.0),
        ],
        sheet,
    )
    assert sheet.runs("share-1_records_per_s") == [[50.0], [100.0]]
    table = markdown(sheet, ["share-1", "classic-1"], 2, 100)
    rows = [
        line for line in table.splitlines() if line.startswith("| share-1") or line.startswith("| classic-1")
    ]
    assert rows[0].startswith("| share-1 | 75.00 (50.00..100.0) |")
    assert rows[1].endswith("| 3 | 0 |")
