"""A long-running query keeps the coordinator bounded (issue 23 part 1): pooled transactional ids are
reused batch after batch with epoch fencing, PrepareTxn names its producer instance, decisions older
than the retention are pruned with tombstones that a reload honours, and the Prepared transactions are
indexed by (query, batch)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactly.errors import ErrorCode
from exactly.txn import TxnConfig, TxnState
from exactly.txn.decisions import (
    BatchDecisionRecord,
    decode_decision_key,
    decode_decision_value_or_tombstone,
    encode_decision_key,
    encode_decision_value,
)
from tests.txn.helpers import Harness

E = ErrorCode
S = TxnState
RETAIN = 3


def pooled(query: str, partition: int, slot: int) -> str:
    return f"exactly-spark.{query}.{partition}.{slot}"


def run_batch(h: Harness, query: str, batch: int, partitions: int = 2) -> list[str]:
    """One micro-batch: every partition's task on its pooled id (slot = batch parity), then the decision."""
    winners = []
    for partition in range(partitions):
        tid = pooled(query, partition, batch % 2)
        assert h.init(tid).error == E.NONE
        h.begin(tid, ("out", partition))
        txn = h.coordinator.transactions[tid]
        result = h.prepare(tid, query, batch, partition, txn.producer_id, txn.producer_epoch)
        assert result.error == E.NONE
        winners.append(tid)
    assert h.commit_batch(query, batch, winners).error == E.NONE
    h.finish_markers()
    return winners


def test_pooled_ids_are_reused_and_keep_their_producer_id() -> None:
    h = Harness(TxnConfig(decisions_retained_batches=RETAIN))
    for batch in range(40):
        run_batch(h, "q", batch)
    assert sorted(h.coordinator.transactions) == sorted(pooled("q", p, s) for p in range(2) for s in range(2))
    assert len({t.producer_id for t in h.coordinator.transactions.values()}) == 4
    assert all(t.state is S.COMPLETE_COMMIT for t in h.coordinator.transactions.values())
    assert len(h.coordinator.prepared_index) == 0


def test_decisions_below_the_retention_are_pruned_and_their_tombstones_survive_a_reload() -> None:
    h = Harness(TxnConfig(decisions_retained_batches=RETAIN))
    for batch in range(12):
        run_batch(h, "q", batch)
        kept = h.coordinator.decisions.batches("q")
        assert kept == list(range(max(0, batch - RETAIN), batch + 1))
    tombstones = [decode_decision_key(k) for k, v in h.log if v is None and k[:2] == b"\x00\x64"]
    assert tombstones == [("q", b) for b in range(12 - RETAIN - 1)]
    before = h.coordinator.decisions.all()
    h.restart()
    assert h.coordinator.decisions.all() == before
    assert h.coordinator.decisions.decided_hw("q") == 11


def test_compaction_of_the_log_keeps_what_the_query_needs() -> None:
    """Compaction keeps the last record of each key and drops tombstones: the reload still knows the
    retained decisions and the high watermark."""
    h = Harness(TxnConfig(decisions_retained_batches=RETAIN))
    for batch in range(10):
        run_batch(h, "q", batch)
    before = h.coordinator.decisions.all()
    last: dict[bytes, bytes | None] = {}
    for key, value in h.log:
        last.pop(key, None)
        last[key] = value
    h.log = [(k, v) for k, v in last.items() if v is not None]
    h.restart()
    assert h.coordinator.decisions.all() == before
    assert h.coordinator.decisions.decided_hw("q") == 9


def test_a_prepare_for_a_pruned_batch_is_still_a_zombie() -> None:
    h = Harness(TxnConfig(decisions_retained_batches=RETAIN))
    for batch in range(10):
        run_batch(h, "q", batch)
    assert h.coordinator.decisions.get("q", 1) is None  # pruned
    h.restart()
    h.init("zombie")
    h.begin("zombie", ("out", 0))
    assert h.prepare("zombie", "q", 1, 0).error == E.PRODUCER_FENCED
    assert h.coordinator.transactions["zombie"].pending_state is None
    assert h.state("zombie") is S.PREPARE_ABORT
    replay = h.coordinator.commit_batch("q", 1, [])
    assert replay.error == E.INVALID_TXN_STATE


def test_retention_minus_one_keeps_every_decision() -> None:
    h = Harness(TxnConfig(decisions_retained_batches=-1))
    for batch in range(8):
        run_batch(h, "q", batch)
    assert h.coordinator.decisions.batches("q") == list(range(8))
    assert all(v is not None for k, v in h.log if k[:2] == b"\x00\x64")


def test_pruning_is_per_query() -> None:
    h = Harness(TxnConfig(decisions_retained_batches=1))
    for batch in range(5):
        run_batch(h, "a", batch)
    run_batch(h, "b", 0)
    assert h.coordinator.decisions.batches("a") == [3, 4]
    assert h.coordinator.decisions.batches("b") == [0]


def test_tombstone_codec() -> None:
    decision = BatchDecisionRecord("q", 7, ("t",), 5)
    raw = encode_decision_value(decision)
    assert decode_decision_value_or_tombstone("q", 7, raw) == decision
    assert decode_decision_value_or_tombstone("q", 7, None) is None
    assert decode_decision_key(encode_decision_key("q", 7)) == ("q", 7)


# --- the producer instance a prepare names ---------------------------------------------------------------


def test_a_zombie_cannot_prepare_the_transaction_of_the_instance_that_took_its_id_over() -> None:
    h = Harness()
    tid = pooled("q", 0, 0)
    h.init(tid)
    h.begin(tid, ("out", 0))
    zombie = h.coordinator.transactions[tid]
    zombie_pid, zombie_epoch = zombie.producer_id, zombie.producer_epoch
    # a new instance takes the id over: the zombie's transaction is fenced and aborted
    assert h.init(tid).error == E.CONCURRENT_TRANSACTIONS
    h.finish_markers()
    assert h.init(tid).error == E.NONE
    h.begin(tid, ("out", 0))
    txn = h.coordinator.transactions[tid]
    assert txn.producer_epoch > zombie_epoch
    records = len(h.log)
    assert h.prepare(tid, "q", 0, 0, zombie_pid, zombie_epoch).error == E.INVALID_PRODUCER_EPOCH
    assert h.state(tid) is S.ONGOING  # the new instance's work untouched
    assert len(h.log) == records
    assert h.prepare(tid, "q", 0, 0, txn.producer_id, txn.producer_epoch).error == E.NONE
    assert h.state(tid) is S.PREPARED


def test_a_zombie_of_a_closed_batch_is_fenced_without_touching_the_current_instance() -> None:
    h = Harness()
    run_batch(h, "q", 0, partitions=1)
    tid = pooled("q", 0, 0)
    old = h.coordinator.transactions[tid]
    old_pid, old_epoch = old.producer_id, old.producer_epoch
    h.init(tid)
    h.begin(tid, ("out", 0))
    assert h.prepare(tid, "q", 0, 0, old_pid, old_epoch).error == E.PRODUCER_FENCED
    assert h.state(tid) is S.ONGOING


def test_init_on_a_prepared_pooled_id_waits_for_the_decision() -> None:
    """Why the task avoids ids held by Prepared transactions: InitProducerId on one waits."""
    h = Harness()
    tid = pooled("q", 0, 0)
    h.task(tid, "q", 0, 0)
    assert h.init(tid).error == E.CONCURRENT_TRANSACTIONS
    assert h.state(tid) is S.PREPARED
    h.commit_batch("q", 0, [tid])
    h.finish_markers()
    assert h.init(tid).error == E.NONE


# --- the index ------------------------------------------------------------------------------------------


def scan(h: Harness) -> dict[tuple[str, int], list[str]]:
    out: dict[tuple[str, int], list[str]] = {}
    for txn in h.coordinator.transactions.values():
        if txn.state is S.PREPARED and txn.prepared is not None:
            out.setdefault((txn.prepared.query_id, txn.prepared.batch_id), []).append(txn.transactional_id)
    return {k: sorted(v) for k, v in out.items()}


def indexed(h: Harness) -> dict[tuple[str, int], list[str]]:
    index = h.coordinator.prepared_index
    keys = {(q, b) for q in ("a", "b") for b in range(6)}
    return {k: index.of_batch(*k) for k in keys if index.of_batch(*k)}


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_the_index_matches_a_scan_through_every_operation(seed: int) -> None:
    rng = random.Random(seed)
    h = Harness(TxnConfig(decisions_retained_batches=2))
    for _ in range(40):
        query, batch, partition = rng.choice("ab"), rng.randrange(6), rng.randrange(2)
        tid = pooled(query, partition, rng.randrange(3))
        op = rng.randrange(5)
        if op <= 1:
            if h.init(tid).error == E.NONE:
                h.begin(tid, ("out", partition))
                h.prepare(tid, query, batch, partition)
        elif op == 2:
            h.commit_batch(query, batch, h.coordinator.prepared_index.of_batch(query, batch))
        elif op == 3:
            h.abort_batch(query, rng.choice([batch, -1]))
        else:
            h.finish_markers()
        assert indexed(h) == scan(h)
        for query_id in "ab":
            listed = [t.transactional_id for t in h.coordinator.list_prepared(query_id)]
            assert sorted(listed) == sorted(
                t for (q, _), ids in scan(h).items() if q == query_id for t in ids
            )
    h.restart()
    assert indexed(h) == scan(h)


@pytest.mark.parametrize("partition", [0, 1])
def test_unloading_a_partition_drops_its_ids_from_the_index(partition: int) -> None:
    h = Harness(TxnConfig(num_partitions=2))
    h.task(pooled("q", 0, 0), "q", 0, 0)
    mine = h.coordinator.partition_for("q")
    h.coordinator.unload_partition(partition)
    assert len(h.coordinator.prepared_index) == (0 if partition == mine else 1)
