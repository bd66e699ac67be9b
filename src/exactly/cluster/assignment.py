"""Replica assignment: which brokers hold each partition of a new topic (Kafka's
`AdminUtils.assignReplicasToBrokers`) or of the partitions CreatePartitions adds (Kafka's
`AdminZkClient.createNewPartitionsAssignment`).

An assignment maps a partition to its ordered replica list; the first replica is the partition's
preferred leader. The goals, in Kafka's words: spread replicas evenly over brokers; spread the other
replicas of the partitions a broker leads over the other brokers; and, when every broker has a rack,
put a partition's replicas on different racks while there are racks left.

Rack-unaware (no broker has a rack), with n brokers sorted by id and b = brokers[i]:

    start  = fixed_start_index if >= 0 else random in [0, n)        (drawn first)
    shift  = fixed_start_index if >= 0 else random in [0, n)        (drawn second)
    p      = max(0, start_partition_id), counting up; shift += 1 at every p > 0 with p % n == 0
    first  = (p + start) % n                                        -> the first replica (leader)
    the j-th other replica (j = 0 .. rf-2) is brokers[(first + 1 + (shift + j) % (n - 1)) % n]

Rack-aware (every broker has a rack): the same round robin over the *rack-alternated* list (racks in
sorted order, each rack's brokers by id, taking one broker per rack in turn: racks a:{0,1}, b:{2} give
0,2,1), with the follower shift multiplied by the number of racks; a candidate follower is skipped
while its rack already holds a replica and some rack holds none, or while it already holds one (it
never does before every broker does). So a partition spans min(rf, racks) racks.

Errors are the ones Kafka answers CreateTopics/CreatePartitions with: partitions < 1 ->
INVALID_PARTITIONS; rf < 1 or rf > brokers -> INVALID_REPLICATION_FACTOR; some brokers with a rack and
some without -> UNKNOWN_SERVER_ERROR (Kafka throws AdminOperationException, which is no ApiException,
so ZK-mode Kafka answers UNKNOWN_SERVER_ERROR and, as for any such error, sends no message).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from exactly.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as replica assignment sees it: its id and rack (None without `broker.rack`)."""

    broker_id: int
    rack: str | None = None


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Kafka's `getRackAlternatedBrokerList`: one broker per rack in turn, racks in sorted order
    (Java's String order, i.e. by UTF-16 code units) and each rack's brokers by id."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack, key=lambda r: r.encode("utf-16-be"))]
    result: list[int] = []
    for round_ in range(max((len(q) for q in queues), default=0)):
        result.extend(q[round_] for q in queues if round_ < len(q))
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    brokers: Sequence[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """The replica lists of `partitions` partitions numbered from max(0, start_partition_id).

    `brokers` are sorted by id first (as Kafka's callers do). Without a fixed start index the start
    and the follower shift are drawn from `rng` (a fresh Random when None)."""
    if partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    ordered = sorted(brokers, key=lambda b: b.broker_id)
    if len({b.broker_id for b in ordered}) != len(ordered):
        raise ValueError(f"duplicate broker ids in {[b.broker_id for b in ordered]}")
    with_rack = sum(b.rack is not None for b in ordered)
    if 0 < with_rack < len(ordered):
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    rng = rng or random.Random()
    if with_rack:
        racks = {b.broker_id: b.rack for b in ordered if b.rack is not None}
        arranged = rack_alternated_broker_list(racks)
    else:
        racks = {}
        arranged = [b.broker_id for b in ordered]
    n = len(arranged)
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    num_racks = len(set(racks.values()))

    result: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition_id)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        if with_rack:
            result[partition] = _rack_aware_replicas(
                arranged, racks, num_racks, first, shift, replication_factor
            )
        else:
            followers = (arranged[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1))
            result[partition] = (arranged[first], *followers)
        partition += 1
    return result


def _rack_aware_replicas(
    arranged: Sequence[int], racks: Mapping[int, str], num_racks: int, first: int, shift: int, rf: int
) -> tuple[int, ...]:
    n = len(arranged)
    leader = arranged[first]
    replicas = [leader]
    used_racks = {racks[leader]}
    used_brokers = {leader}
    k = 0
    for _ in range(rf - 1):
        while True:
            broker = arranged[_replica_index(first, shift * num_racks, k, n)]
            rack = racks[broker]
            k += 1
            if (rack not in used_racks or len(used_racks) == num_racks) and (
                broker not in used_brokers or len(used_brokers) == n
            ):
                replicas.append(broker)
                used_racks.add(rack)
                used_brokers.add(broker)
                break
    return tuple(replicas)


def assign_new_partitions(
    existing: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    new_total: int,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """The replica lists of the partitions CreatePartitions adds to grow a topic to `new_total`
    (only the new ones, numbered from len(existing)), as Kafka's AdminZkClient does: the same
    replication factor as partition 0, and a fixed start index (also the follower shift) at the first
    broker, in id order, whose id is >= partition 0's first replica (0 if none is)."""
    old = len(existing)
    if new_total < old:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {old} partitions, which is higher than the requested {new_total}.",
        )
    if new_total == old:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
    if 0 not in existing or not existing[0]:
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Unexpected existing replica assignment, partition id 0 is missing. "
            f"Assignment: {dict(existing)}",
        )
    ordered = sorted(brokers, key=lambda b: b.broker_id)
    preferred0 = existing[0][0]
    start = next((i for i, b in enumerate(ordered) if b.broker_id >= preferred0), 0)
    return assign_replicas(
        ordered, new_total - old, len(existing[0]), fixed_start_index=start, start_partition_id=old, rng=rng
    )
