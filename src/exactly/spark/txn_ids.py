"""The bounded pool of transactional ids the exactly-once Spark sink's tasks take theirs from.

A transactional id costs the broker a coordinator entry, a producer id, and an entry in the producer
state (and snapshots) of every partition it wrote, until `transactional.id.expiration.ms` /
`producer.id.expiration.ms`. One id per task attempt (the sink's first design) made a streaming query
grow the broker by partitions x batches ids; the pool makes it partitions x `POOL_SIZE`, whatever the
number of batches. Format::

    exactly-spark.<query id>.<Spark partition id>.<slot>        slot in 0 .. POOL_SIZE - 1
    slot = parity * POOL_LANES + lane        parity = batch id % 2, lane = attempt number % POOL_LANES

(`exactly.txn.placement.placement_key` places it in its query's `__transaction_state` partition.)
Reuse is safe because InitProducerId on an id bumps its epoch and aborts the transaction an older
instance left Ongoing (the zombie is fenced), and PrepareTxn names the producer instance (id, epoch) it
prepares for, so a zombie cannot prepare the transaction of the instance that took its id over.

Two things an id may be held by, and how the choice avoids them:

* a concurrent attempt of the same task (speculation, a retry while the failed attempt still runs):
  attempts take different lanes (their attempt numbers differ), and the batch parity keeps a zombie of
  the previous batch off the current batch's ids;
* a Prepared transaction of an undecided batch (the run before a driver restart prepared batch B, and the
  restarted query replays B): InitProducerId on a Prepared id waits for the batch's decision, which waits
  for this task — a deadlock. The task lists its query's Prepared transactions first (ListPreparedTxns)
  and takes the first id of its preference order that none holds: its own lane, the parity's other lanes,
  then the other parity's (the previous batch is decided, the next not started).

No pyspark here: a pure function, tested without Spark.
"""

from __future__ import annotations

from collections.abc import Collection

from exactly.txn.placement import TWO_PHASE_ID_PREFIX

__all__ = [
    "POOL_LANES",
    "POOL_SIZE",
    "PoolExhaustedError",
    "choose_transactional_id",
    "pooled_id",
    "slot_order",
]

POOL_LANES = 4  # attempt lanes per batch parity
POOL_SIZE = 2 * POOL_LANES  # transactional ids per (query, Spark partition)


class PoolExhaustedError(RuntimeError):
    """Every id of the task's pool is held by a Prepared transaction of an undecided batch."""


def pooled_id(query_id: str, partition: int, slot: int) -> str:
    """The transactional id of one slot of a (query, Spark partition) pool."""
    return f"{TWO_PHASE_ID_PREFIX}.{query_id}.{partition}.{slot}"


def slot_order(batch_id: int, attempt: int, lanes: int = POOL_LANES) -> list[int]:
    """The slots a task attempt tries, in order: every slot of the pool once."""
    parity = batch_id % 2
    return [side * lanes + (attempt + i) % lanes for side in (parity, 1 - parity) for i in range(lanes)]


def choose_transactional_id(
    query_id: str,
    batch_id: int,
    partition: int,
    attempt: int,
    held: Collection[str],
    lanes: int = POOL_LANES,
) -> str:
    """The id a task attempt takes: the first of its `slot_order` that `held` (the ids of the query's
    Prepared transactions) does not contain."""
    for slot in slot_order(batch_id, attempt, lanes):
        candidate = pooled_id(query_id, partition, slot)
        if candidate not in held:
            return candidate
    raise PoolExhaustedError(
        f"every transactional id of query {query_id} partition {partition} ({2 * lanes}) is held by a "
        f"prepared transaction of an undecided batch: abort them (`exactly txn abort-query --query "
        f"{query_id}`) or let the query decide its batch"
    )
