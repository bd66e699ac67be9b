"""`exactly bench rebalance`'s pure part: settling detected from assignment timelines, the partitions that
stopped being consumed, the statistics and the tables; and the member's client configuration (KIP-848
members leave the session and heartbeat to the broker)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.bench import rebalance, rebalance_member
from exactly.bench.figures import Sheet
from exactly.bench.rebalance import (
    Change,
    Options,
    Phase,
    PhaseResult,
    double_ownership,
    is_settled,
    ownership_gaps,
    phase_result,
    settle_time,
    spread,
)

MEMBERS = ("a", "b", "c")


def c(t: float, member: str, *partitions: int) -> Change:
    return Change(t, member, frozenset(partitions))


def state_at(changes: Sequence[Change], t: float) -> dict[str, frozenset[int]]:
    """Brute force: replay, in time order, every change at or before t."""
    owned: dict[str, frozenset[int]] = {}
    for change in sorted(changes, key=lambda x: x.t):
        if change.t <= t:
            owned[change.member] = change.partitions
    return owned


# --- is_settled ---------------------------------------------------------------------------------------


def test_settled_needs_every_partition_once_balanced_and_nothing_on_departed_members() -> None:
    assert is_settled({"a": frozenset({0, 1}), "b": frozenset({2})}, ["a", "b"], 3)
    assert not is_settled({"a": frozenset({0, 1, 2}), "b": frozenset()}, ["a", "b"], 3)  # unbalanced
    assert not is_settled({"a": frozenset({0, 1}), "b": frozenset({1, 2})}, ["a", "b"], 3)  # 1 twice
    assert not is_settled({"a": frozenset({0}), "b": frozenset({2})}, ["a", "b"], 3)  # 1 unowned
    assert not is_settled({"a": frozenset({0, 1}), "b": frozenset({2}), "x": frozenset({2})}, ["a", "b"], 3)
    assert is_settled({"a": frozenset({0, 1}), "b": frozenset({2}), "x": frozenset()}, ["a", "b"], 3)
    assert not is_settled({"a": frozenset({0, 1}), "b": frozenset({2})}, ["a", "b", "new"], 3)
    assert not is_settled({}, [], 0)


# --- settle_time --------------------------------------------------------------------------------------


def test_an_eager_rebalance_settles_at_the_last_assignment() -> None:
    before = [c(0, "a", 0, 1, 2, 3)]
    rebalance_ = [c(10, "a"), c(11, "b", 2, 3), c(12, "a", 0, 1)]
    assert settle_time([*before, *rebalance_], ["a", "b"], 4, start=9) == 12


def test_a_transient_settled_state_does_not_count() -> None:
    changes = [
        c(1, "a", 0, 1),
        c(2, "b", 2, 3),  # settled here...
        c(3, "b"),  # ...but the group rebalances once more
        c(4, "b", 2, 3),
    ]
    assert settle_time(changes, ["a", "b"], 4, start=0) == 4


def test_settled_before_the_start_and_untouched_settles_at_the_start() -> None:
    assert settle_time([c(1, "a", 0, 1)], ["a"], 2, start=5) == 5


def test_not_settled_at_the_end_is_none() -> None:
    assert settle_time([c(1, "a", 0), c(2, "b", 0)], ["a", "b"], 2, start=0) is None
    assert settle_time([], ["a"], 2, start=0) is None


def test_a_killed_member_must_have_dropped_out() -> None:
    """The bench writes an empty set at the kill: until the survivors own its partitions, unsettled."""
    changes = [c(0, "a", 0, 1), c(0, "b", 2, 3), c(5, "b"), c(8, "a", 0, 1, 2, 3)]
    assert settle_time(changes, ["a"], 4, start=5) == 8


@st.composite
def timelines(draw: st.DrawFn) -> tuple[list[Change], list[str], int, int]:
    partitions = draw(st.integers(1, 6))
    live = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=3, unique=True))
    change = st.builds(
        Change,
        st.integers(0, 20).map(float),
        st.sampled_from([*MEMBERS, "gone"]),
        st.frozensets(st.integers(0, partitions - 1), max_size=partitions),
    )
    changes = draw(st.lists(change, max_size=25))
    if draw(st.booleans()):  # converge: a balanced final assignment, the departed member empty
        changes.append(c(21, "gone"))
        for i, member in enumerate(MEMBERS):
            share = (
                [p for p in range(partitions) if p % len(live) == live.index(member)]
                if member in live
                else []
            )
            changes.append(Change(21.0 + i, member, frozenset(share)))
    start = draw(st.integers(0, 24))
    return changes, live, partitions, start


@given(timelines())
def test_settle_time_is_the_start_of_the_final_settled_stretch(
    case: tuple[list[Change], list[str], int, int],
) -> None:
    changes, live, partitions, start = case
    settled = settle_time(changes, live, partitions, start)
    times = sorted({x.t for x in changes if x.t >= start})
    end_state = state_at(changes, math.inf)
    if not is_settled(end_state, live, partitions):
        assert settled is None
        return
    assert settled is not None
    assert settled >= start
    # settled from then on, at every change
    for t in [settled, *(t for t in times if t >= settled)]:
        assert is_settled(state_at(changes, t), live, partitions), t
    # and not just before it (unless it is the start: settled all along)
    if settled > start:
        earlier = [t for t in times if t < settled]
        before = earlier[-1] if earlier else start - 0.5
        assert not is_settled(state_at(changes, max(before, start - 0.5)), live, partitions)


def test_changes_logged_at_the_same_moment_leave_no_unsettled_state_between_them() -> None:
    """Found by the property above: b's assignment and its revocation at t=1 never made the group
    unsettled, since no time passed between them."""
    changes = [c(0, "a", 0), c(1, "b", 0), c(1, "b")]
    assert settle_time(changes, ["a"], 1, 0) == 0
    assert settle_time([*changes, c(2, "b", 0), c(3, "b")], ["a"], 1, 0) == 3


# --- ownership_gaps, double_ownership ------------------------------------------------------------------


def test_an_eager_rebalance_stops_every_partition() -> None:
    changes = [c(0, "a", 0, 1), c(0, "b", 2, 3), c(10, "a"), c(10.5, "b"), c(12, "a", 0, 1), c(13, "b", 2, 3)]
    gaps = ownership_gaps(changes, 4, 9, 13)
    assert gaps == {0: 2.0, 1: 2.0, 2: 2.5, 3: 2.5}
    result = phase_result(changes, 4, 9, 13, 20)
    assert result == PhaseResult(4.0, 4, 2.5, 9.0, 0.0)


def test_an_incremental_rebalance_stops_only_what_moves() -> None:
    changes = [c(0, "a", 0, 1, 2, 3), c(5, "a", 0, 1), c(6, "b", 2, 3)]
    assert ownership_gaps(changes, 4, 4, 6) == {0: 0.0, 1: 0.0, 2: 1.0, 3: 1.0}
    unsettled = phase_result(changes, 4, 4, None, 7)  # not settled: counted up to the end
    assert math.isnan(unsettled.settle_s)
    assert (unsettled.stopped, unsettled.longest_stop_s, unsettled.stopped_partition_s) == (2, 1.0, 2.0)


def test_a_partition_given_before_it_is_revoked_is_double_owned() -> None:
    changes = [c(0, "a", 0, 1), c(2, "b", 1), c(3, "a", 0)]
    assert double_ownership(changes, 2, 0, 10) == 1.0
    assert double_ownership(changes, 2, 2.5, 10) == 0.5


@given(timelines(), st.integers(0, 24), st.integers(0, 24))
def test_gaps_and_doubles_match_a_unit_by_unit_count(
    case: tuple[list[Change], list[str], int, int], a: int, b: int
) -> None:
    changes, _, partitions, _ = case
    start, end = min(a, b), max(a, b)
    gaps = ownership_gaps(changes, partitions, start, end)
    doubles = double_ownership(changes, partitions, start, end)
    expected_gaps = dict.fromkeys(range(partitions), 0.0)
    expected_doubles = 0.0
    for k in range(start, end):  # changes are at whole seconds: the state is constant on [k, k + 1)
        owners = [0] * partitions
        for parts in state_at(changes, k).values():
            for p in parts:
                owners[p] += 1
        for p in range(partitions):
            expected_gaps[p] += owners[p] == 0
        expected_doubles += max(owners) > 1
    assert gaps == expected_gaps
    assert doubles == expected_doubles


# --- statistics and tables ----------------------------------------------------------------------------


def test_spread_is_the_median_and_range_without_unsettled_rounds() -> None:
    s = spread([3.0, 1.0, math.nan, 2.0])
    assert (s.median, s.low, s.high, s.n, s.missing) == (2.0, 1.0, 3.0, 3, 1)
    assert s.text() == "2.000 (1.000..3.000) ⚠1 unsettled"
    empty = spread([math.nan])
    assert empty.n == 0
    assert empty.text() == "n/a"


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=9))
def test_spread_bounds_its_median(values: list[float]) -> None:
    s = spread(values)
    assert s.low <= s.median <= s.high
    assert (s.low, s.high, s.n) == (min(values), max(values), len(values))


def test_sheet_and_table_hold_every_round() -> None:
    options = Options(sizes=(3,), rounds=2, variants=("classic-range", "consumer-uniform"))
    outcomes = [
        rebalance.Outcome(variant, 3, number, phase, PhaseResult(1.0 + number, 30, 0.5, 4.0, 0.0))
        for number in range(2)
        for variant in options.variants
        for phase in Phase
    ]
    sheet = Sheet("rebalance")
    rebalance.fill_sheet(outcomes, sheet)
    assert sheet.runs("classic-range.n3.kill.settle_s") == [[1.0], [2.0]]
    assert sheet.values("consumer-uniform.n3.join.stopped") == [30.0, 30.0]
    assert sheet.values("consumer-uniform.n3.form.stopped") == []  # everything starts unowned
    table = rebalance.markdown(sheet, options, "exactly bench rebalance", "2 CPUs")
    assert "| 3 | (d) one killed (SIGKILL) | 1.500 (1.000..2.000) | 1.500 (1.000..2.000) |" in table
    assert "| 3 | (b) one joins | 30 / 0.5 / 4.000 | 30 / 0.5 / 4.000 |" in table


def test_a_written_sheet_loads_back(tmp_path: Path) -> None:
    sheet = Sheet("rebalance")
    sheet.add("consumer-uniform.n3.kill.settle_s", [3.25], "s", run=2)
    sheet.add("consumer-uniform.n3.kill.stopped", [10], "partitions", run=2)
    loaded = rebalance.load_sheet(sheet.write(tmp_path))
    assert loaded.rows == sheet.rows


def test_options_round_trip_through_the_command_line() -> None:
    options = Options(sizes=(2, 5), partitions=12, rounds=4, quiet_s=1.5, initial_delay_ms=3000)
    parsed, out = rebalance.parse_options([*options.argv(), "--out", "x"])
    assert parsed == options
    assert str(out) == "x"
    settings = options.broker_settings()
    assert "group.consumer.session.timeout.ms=3000" in settings
    assert "group.initial.rebalance.delay.ms=3000" in settings


# --- the member ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_member_sets_session_and_heartbeat_only_for_the_classic_protocol(protocol: str) -> None:
    args = argparse.Namespace(
        bootstrap="b:1",
        group="g",
        name="m0",
        protocol=protocol,
        strategy="cooperative-sticky",
        session_ms=3000,
        heartbeat_ms=500,
    )
    config = rebalance_member.consumer_config(args)
    if protocol == "consumer":
        assert config["group.protocol"] == "consumer"
        assert not {"session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"} & set(
            config
        )
    else:
        assert "group.protocol" not in config
        assert config["session.timeout.ms"] == 3000
        assert config["heartbeat.interval.ms"] == 500
        assert config["partition.assignment.strategy"] == "cooperative-sticky"
