"""The cluster demo's choices: which broker leads the busiest input partitions, what a broker leads and
coordinates (from Metadata alone), and how long commits paused around a kill."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.demo.cluster import (
    TRANSACTION_STATE_TOPIC,
    busiest_leader,
    commit_gap,
    coordinated_by,
    coordinator_partition,
    first_after,
    led_by,
)
from exactly.group.partitioning import partition_for


def test_the_busiest_leader_leads_the_most_records() -> None:
    leaders = {0: 1, 1: 2, 2: 3, 3: 2}
    assert busiest_leader(leaders, {0: 900, 1: 400, 2: 700, 3: 400}) == 1
    assert busiest_leader(leaders, {0: 500, 1: 400, 2: 700, 3: 400}) == 2  # two partitions: 800
    assert busiest_leader(leaders, {}) == 2  # no records yet: the most partitions
    assert busiest_leader({0: -1, 1: 3}, {0: 10_000, 1: 1}) == 3  # a partition without a leader is skipped
    with pytest.raises(ValueError, match="no partition has a leader"):
        busiest_leader({0: -1}, {0: 1})


@given(st.dictionaries(st.integers(0, 7), st.integers(1, 3), min_size=1), st.data())
def test_no_broker_leads_more_records_than_the_busiest(leaders: dict[int, int], data: st.DataObject) -> None:
    records = {p: data.draw(st.integers(0, 1000)) for p in leaders}
    chosen = busiest_leader(leaders, records)
    load = {b: sum(records[p] for p, lead in leaders.items() if lead == b) for b in set(leaders.values())}
    assert load[chosen] == max(load.values())


def test_the_pause_is_the_gap_between_the_commits_around_the_kill() -> None:
    commits = [10.0, 11.0, 12.5, 21.0, 22.0]
    assert commit_gap(commits, 13.0) == pytest.approx(8.5)
    assert commit_gap(commits, 12.5) == pytest.approx(8.5)  # a commit at the kill was before it
    assert commit_gap(commits, 5.0) == pytest.approx(5.0)  # none before: from the kill
    assert commit_gap(commits, 30.0) is None  # none after
    assert commit_gap([], 1.0) is None
    assert commit_gap(reversed(commits), 13.0) == pytest.approx(8.5)
    assert first_after(commits, 13.0) == pytest.approx(8.0)
    assert first_after(commits, 22.0) is None


def test_what_a_broker_leads_and_coordinates_comes_from_metadata() -> None:
    query = "9f0c1d2e-0000-4000-8000-000000000000"
    replay = "exactly-demo-replay-1"
    state = dict.fromkeys(range(50), 1)
    state[coordinator_partition(query)] = 2
    state[coordinator_partition(replay)] = 3
    leaders = {
        "flights": {0: 1, 1: 2, 2: 1, 3: 3},
        "windows": {0: 2, 1: 1},
        TRANSACTION_STATE_TOPIC: state,
    }
    assert led_by(leaders, 1, ("flights", "windows")) == ("flights-0", "flights-2", "windows-1")
    assert led_by(leaders, 3, ("windows",)) == ()
    ids = {"the sink": query, "replay 1": replay, "replay 0": "exactly-demo-replay-0"}
    assert coordinated_by(leaders, 2, ids) == ("the sink",)
    assert coordinator_partition(replay) != coordinator_partition(query)  # the test's premise
    assert coordinated_by(leaders, 3, ids) == ("replay 1",)
    assert coordinated_by(leaders, 1, ids) == ("replay 0",)


@given(st.uuids().map(str), st.uuids())
def test_a_sink_transactional_id_shares_its_querys_coordinator(query: str, unique: uuid.UUID) -> None:
    tid = f"exactly-spark.{query}.7.1.{unique.hex}"
    assert coordinator_partition(tid) == partition_for(query, 50) == coordinator_partition(query)
