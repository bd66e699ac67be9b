"""`ReplayPlan`: which flights form each transaction and which transactions are aborted on purpose."""

from __future__ import annotations

import pytest

from exactly.demo.replay import ReplayPlan


def test_spans_cover_every_row_once_in_order() -> None:
    plan = ReplayPlan.make(rows=1005, transaction_rows=100, abort_every=10, seed=1)
    assert plan.transactions == 11
    rows = [row for t in range(plan.transactions) for row in plan.span(t)]
    assert rows == list(range(1005))
    assert len(plan.span(10)) == 5


def test_one_transaction_in_every_group_is_aborted_deterministically_by_seed() -> None:
    plan = ReplayPlan.make(rows=10_000, transaction_rows=100, abort_every=10, seed=13)
    assert len(plan.aborted) == 10
    for group in range(10):
        assert len([t for t in plan.aborted if group * 10 <= t < group * 10 + 10]) == 1
    assert ReplayPlan.make(rows=10_000, transaction_rows=100, abort_every=10, seed=13) == plan
    others = {ReplayPlan.make(10_000, 100, 10, seed).aborted for seed in range(5)}
    assert len(others) > 1  # the seed chooses
    assert plan.aborted_rows() == [row for t in sorted(plan.aborted) for row in plan.span(t)]


def test_a_last_partial_group_of_two_or_more_has_one_abort_and_a_single_transaction_none() -> None:
    assert len(ReplayPlan.make(rows=1200, transaction_rows=100, abort_every=10, seed=0).aborted) == 2
    assert len(ReplayPlan.make(rows=1100, transaction_rows=100, abort_every=10, seed=0).aborted) == 1
    assert ReplayPlan.make(rows=50, transaction_rows=100, abort_every=10, seed=0).aborted == frozenset()


@pytest.mark.parametrize(("rows", "size", "every"), [(0, 10, 10), (10, 0, 10), (10, 10, 1)])
def test_bad_plans_are_refused(rows: int, size: int, every: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        ReplayPlan.make(rows, size, every, seed=0)
