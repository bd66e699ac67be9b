"""`exactly bench scale` runs end to end with tiny sizes (the figures are for the closing note)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.bench import scale

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_scale_bench_measures_partitions_restarts_and_connections(tmp_path: Path) -> None:
    lines: list[str] = []
    r = scale.measure(
        topics=3, per_topic=7, nofile=1024, connections=50, data_dir=tmp_path / "data", say=lines.append
    )
    assert r.partitions == 21
    assert r.produce_librdkafka_s is not None
    assert r.produce_librdkafka_s > 0
    printed = "\n".join(lines)
    for label in (
        "create ",
        "metadata ",
        "produce ",
        "produce librdkafka ",
        "consume ",
        "restart ",
        "connections ",
    ):
        assert f"\n{label}" in "\n" + printed, label
    assert "(42 records)" in printed  # both producers' records read back
    assert "SIGTERM: stopped in " in printed
    assert "(not seen)" not in printed  # the broker's background loading line was found both times
    assert r.records_moved == 1000
    assert r.connections == 50
    for seconds in (r.create_s, r.metadata_s, r.produce_s, r.consume_s, r.restart_clean_s, r.restart_kill_s):
        assert 0 < seconds < 120
    assert 10 < r.rss_mb < 2048
    assert 21 <= r.open_fds < 1024
