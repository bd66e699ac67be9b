"""The demo's result: one aggregate per (carrier, origin, hour of scheduled departure), and its record on
the output topic.

Output record (one per window, written by the streaming job through the exactly-once sink)::

    key   = "<carrier>|<origin>|<hour>", UTF-8             b"UA|EWR|2013-01-01T10:00:00Z"
    value = JSON object, UTF-8:
      {"carrier": "UA", "origin": "EWR",
       "hour": "2013-01-01T10:00:00Z",                     window start, UTC (windows are one hour)
       "flights": 3,                                       flights scheduled in the window
       "departures": 3,                                    of which departed (dep_delay not null)
       "mean_dep_delay": 4.333333333333333}                minutes; null when none departed

The same value shape holds the batch aggregation the job writes for the proof (one JSON line each).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

WINDOW_FIELDS = ("carrier", "origin", "hour", "flights", "departures", "mean_dep_delay")


class WindowFormatError(ValueError):
    """An output record that is not a window aggregate."""


@dataclass(frozen=True, slots=True)
class WindowKey:
    carrier: str
    origin: str
    hour: str  # ISO 8601 UTC, e.g. 2013-01-01T10:00:00Z

    def __str__(self) -> str:
        return f"{self.carrier}|{self.origin}|{self.hour}"


@dataclass(frozen=True, slots=True)
class WindowAggregate:
    key: WindowKey
    flights: int
    departures: int
    mean_dep_delay: float | None


def decode_window(value: bytes | str) -> WindowAggregate:
    """One output record's value (or one line of the batch result)."""
    try:
        obj: Any = json.loads(value)
        if not isinstance(obj, dict):
            raise WindowFormatError(f"not a JSON object: {value!r:.200}")
        mean = obj["mean_dep_delay"]
        return WindowAggregate(
            key=WindowKey(str(obj["carrier"]), str(obj["origin"]), str(obj["hour"])),
            flights=int(obj["flights"]),
            departures=int(obj["departures"]),
            mean_dep_delay=None if mean is None else float(mean),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise WindowFormatError(f"bad window record {value!r:.200}: {e}") from None


def encode_window(window: WindowAggregate) -> str:
    return json.dumps(
        {
            "carrier": window.key.carrier,
            "origin": window.key.origin,
            "hour": window.key.hour,
            "flights": window.flights,
            "departures": window.departures,
            "mean_dep_delay": window.mean_dep_delay,
        },
        separators=(",", ":"),
    )
