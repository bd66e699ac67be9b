"""The Spark sink's pool of transactional ids (`exactly.spark.txn_ids`): bounded, placed with the query,
concurrent attempts apart, ids held by Prepared transactions avoided."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly.spark.txn_ids import (
    POOL_LANES,
    POOL_SIZE,
    PoolExhaustedError,
    choose_transactional_id,
    pooled_id,
    slot_order,
)
from exactly.txn.placement import placement_key

Q = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"  # a Spark query id


def test_the_format_is_the_documented_one_and_placed_with_the_query() -> None:
    assert pooled_id(Q, 3, 5) == f"exactly-spark.{Q}.3.5"
    assert placement_key(pooled_id(Q, 3, 5)) == Q
    assert POOL_SIZE == 2 * POOL_LANES == 8


def test_a_query_uses_at_most_pool_size_ids_per_partition_whatever_the_batches() -> None:
    ids = {
        choose_transactional_id(Q, batch, partition, attempt, held=())
        for batch in range(10_000)
        for partition in range(4)
        for attempt in range(3)
    }
    assert len(ids) <= 4 * POOL_SIZE
    assert {i.rsplit(".", 2)[1] for i in ids} == {"0", "1", "2", "3"}


@given(st.integers(0, 10**9), st.integers(0, 50))
def test_the_slot_order_is_every_slot_once_own_parity_first(batch: int, attempt: int) -> None:
    order = slot_order(batch, attempt)
    assert sorted(order) == list(range(POOL_SIZE))
    assert {s // POOL_LANES for s in order[:POOL_LANES]} == {batch % 2}
    assert order[0] == (batch % 2) * POOL_LANES + attempt % POOL_LANES


def test_concurrent_attempts_and_the_previous_batch_take_different_ids() -> None:
    # speculative / retried attempts of one task in one batch
    assert len({choose_transactional_id(Q, 7, 0, a, held=()) for a in range(POOL_LANES)}) == POOL_LANES
    # a zombie of batch 6 keeps its id off batch 7's
    assert choose_transactional_id(Q, 6, 0, 0, held=()) != choose_transactional_id(Q, 7, 0, 0, held=())


def test_an_id_held_by_a_prepared_transaction_is_skipped() -> None:
    """A restarted query replays batch 7, whose earlier run left attempt 0's transaction Prepared."""
    first = choose_transactional_id(Q, 7, 0, 0, held=())
    again = choose_transactional_id(Q, 7, 0, 0, held={first})
    assert again != first
    assert again == pooled_id(Q, 0, POOL_LANES + 1)  # parity 1, the next lane


@given(st.sets(st.integers(0, POOL_SIZE - 1), max_size=POOL_SIZE - 1), st.integers(0, 99), st.integers(0, 9))
def test_the_choice_is_never_held_while_a_slot_is_free(
    held_slots: set[int], batch: int, attempt: int
) -> None:
    held = {pooled_id(Q, 2, s) for s in held_slots}
    chosen = choose_transactional_id(Q, batch, 2, attempt, held)
    assert chosen not in held
    assert chosen.startswith(f"exactly-spark.{Q}.2.")


def test_a_pool_held_entirely_says_what_to_do() -> None:
    held = {pooled_id(Q, 0, s) for s in range(POOL_SIZE)}
    with pytest.raises(PoolExhaustedError, match="abort-query"):
        choose_transactional_id(Q, 3, 0, 0, held)
