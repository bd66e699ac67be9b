"""The runner's reading of the job: which micro-batch is in flight (from the checkpoint directory), and
the stream state over every driver process (a replayed batch counts once)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exactly.demo.runner import Settings, StreamState, batch_in_flight


def test_batch_in_flight_is_the_planned_batch_without_a_commit(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    assert batch_in_flight(checkpoint) is None  # no query yet
    (checkpoint / "offsets").mkdir(parents=True)
    assert batch_in_flight(checkpoint) is None
    (checkpoint / "offsets" / "0").write_text("v1")
    (checkpoint / "offsets" / ".0.crc").write_text("")
    assert batch_in_flight(checkpoint) == 0
    (checkpoint / "commits").mkdir()
    (checkpoint / "commits" / "0").write_text("v1")
    assert batch_in_flight(checkpoint) is None
    (checkpoint / "offsets" / "1").write_text("v1")
    assert batch_in_flight(checkpoint) == 1


def test_a_replayed_batch_is_counted_once() -> None:
    state = StreamState()
    events: list[dict[str, Any]] = [
        {"event": "started", "query": "q"},
        {"event": "batch", "batch": 0, "rows": 100, "watermark": "1970-01-01T00:00:00.000Z", "late_rows": 0},
        {"event": "batch", "batch": 1, "rows": 50, "watermark": "2013-01-01T00:00:00.000Z", "late_rows": 0},
    ]
    for event in events:
        state.apply(event)
    state.batches_this_driver = 0  # the driver is killed during batch 2 and restarted
    state.apply({"event": "batch", "batch": 1, "rows": 50, "watermark": None, "late_rows": 0})
    state.apply({"event": "query-failed", "error": "broker gone"})
    state.apply(
        {"event": "batch", "batch": 2, "rows": 70, "watermark": "2013-01-02T00:00:00.000Z", "late_rows": 3}
    )
    state.apply({"event": "stream-done"})
    state.apply({"event": "batch-aggregated", "windows": 12})
    assert state.consumed == 220
    assert state.batches_this_driver == 2
    assert state.watermark == "2013-01-02T00:00:00.000Z"
    assert sum(state.late_rows.values()) == 3
    assert (state.query_failures, state.stream_done, state.batch_windows) == (1, True, 12)


def test_the_replay_stays_about_ten_batches_ahead_at_most() -> None:
    assert Settings(rows=336_776, work_dir=Path()).lead_rows == 33_677
    assert Settings(rows=1000, work_dir=Path()).lead_rows == 500  # two transactions
