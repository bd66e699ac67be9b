"""Output records of the demo: the documented JSON, decoded and encoded."""

from __future__ import annotations

import pytest

from exactly.demo.windows import WindowAggregate, WindowFormatError, WindowKey, decode_window, encode_window

SPARK_RECORD = (
    b'{"carrier":"UA","origin":"EWR","hour":"2013-01-01T10:00:00Z","flights":3,"departures":3,'
    b'"mean_dep_delay":4.333333333333333}'
)


def test_a_record_as_the_job_writes_it() -> None:
    window = decode_window(SPARK_RECORD)
    assert window == WindowAggregate(WindowKey("UA", "EWR", "2013-01-01T10:00:00Z"), 3, 3, 4.333333333333333)
    assert str(window.key) == "UA|EWR|2013-01-01T10:00:00Z"
    assert encode_window(window).encode() == SPARK_RECORD


def test_a_window_without_departures_has_a_null_mean() -> None:
    window = decode_window(
        b'{"carrier":"AA","origin":"JFK","hour":"h","flights":2,"departures":0,"mean_dep_delay":null}'
    )
    assert (window.departures, window.mean_dep_delay) == (0, None)
    assert decode_window(encode_window(window)) == window


@pytest.mark.parametrize(
    "value",
    [b"not json", b"[1]", b'{"carrier":"AA"}', b'{"carrier":"AA","origin":"JFK","hour":"h","flights":"x",'
     b'"departures":0,"mean_dep_delay":null}'],
)  # fmt: skip
def test_anything_else_is_a_format_error(value: bytes) -> None:
    with pytest.raises(WindowFormatError):
        decode_window(value)
