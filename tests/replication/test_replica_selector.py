"""KIP-392's preferred read replica: Kafka's RackAwareReplicaSelector over the leader's view of its
followers (in the ISR, covering the fetch offset), and the follower reads a consumer is allowed."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from exactly.errors import ErrorCode
from exactly.replication.partition import Partition
from exactly.replication.replica_selector import ReplicaView, preferred_read_replica, select_rack_aware
from tests.storage.helpers import data_batch, open_log

RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}
NOW = 100_000


def _leader(tmp_path: Path, records: int = 10, replicas: tuple[int, ...] = (1, 2, 3)) -> Partition:
    """Broker 1 leading a partition of `records` records, every follower caught up to the log end."""
    partition = Partition(open_log(tmp_path / "t-0"), local_id=1)
    partition.make_leader(1, replicas, replicas, 1, now_ms=0)
    for follower in replicas[1:]:
        partition.update_follower_fetch_state(follower, 0, now_ms=0, log_start_offset=0)
    partition.append_records_to_leader(data_batch(records))
    for follower in replicas[1:]:
        partition.update_follower_fetch_state(follower, records, now_ms=NOW - 10, log_start_offset=0)
    return partition


def _rack(broker_id: int) -> str | None:
    return RACKS.get(broker_id)


def test_a_consumer_in_a_followers_rack_is_sent_to_that_follower(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    assert preferred_read_replica(partition, "b", 5, NOW, _rack) == 2
    assert preferred_read_replica(partition, "c", 10, NOW, _rack) == 3


def test_the_leader_keeps_a_consumer_without_a_rack_in_its_own_rack_or_an_unknown_one(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    assert preferred_read_replica(partition, None, 5, NOW, _rack) is None
    assert preferred_read_replica(partition, "", 5, NOW, _rack) is None
    assert preferred_read_replica(partition, "a", 5, NOW, _rack) is None  # the leader's rack
    assert preferred_read_replica(partition, "z", 5, NOW, _rack) is None  # nobody there


def test_a_follower_out_of_the_isr_is_never_preferred(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    partition.update_isr((1, 3), partition.partition_epoch + 1)
    assert preferred_read_replica(partition, "b", 5, NOW, _rack) is None
    assert preferred_read_replica(partition, "c", 5, NOW, _rack) == 3


def test_the_follower_must_cover_the_fetch_offset_as_far_as_the_leader_knows(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    partition.update_follower_fetch_state(2, 6, NOW, log_start_offset=4)  # now holds [4, 6)
    assert preferred_read_replica(partition, "b", 6, NOW, _rack) == 2
    assert preferred_read_replica(partition, "b", 7, NOW, _rack) is None  # beyond its log end
    assert preferred_read_replica(partition, "b", 3, NOW, _rack) is None  # before its log start
    assert preferred_read_replica(partition, "b", 4, NOW, _rack) == 2


def test_a_new_leader_prefers_nobody_until_the_follower_fetched(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    partition.make_leader(2, (1, 2, 3), (1, 2, 3), 2, now_ms=NOW)  # a new epoch: follower ends unknown
    assert preferred_read_replica(partition, "b", 0, NOW, _rack) is None


def test_only_the_leader_chooses(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    partition.make_follower(2, 2, (1, 2, 3), (1, 2, 3), 2)
    assert preferred_read_replica(partition, "b", 5, NOW, _rack) is None


def test_a_replica_without_an_endpoint_on_the_listener_is_never_chosen(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    assert preferred_read_replica(partition, "b", 5, NOW, lambda b: None if b == 2 else _rack(b)) is None


def test_among_followers_of_the_clients_rack_the_most_caught_up_wins(tmp_path: Path) -> None:
    partition = _leader(tmp_path, replicas=(1, 2, 3, 4))
    partition.update_follower_fetch_state(2, 8, NOW - 5, log_start_offset=0)  # 2 behind, 4 at the end
    assert preferred_read_replica(partition, "b", 5, NOW, _rack) == 4


def test_a_follower_serves_a_consumer_only_when_the_fetch_allows_it(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    partition.make_follower(2, 2, (1, 2, 3), (1, 2, 3), 2)
    assert partition.check_leader_epoch(-1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.check_leader_epoch(-1, require_leader=False) is ErrorCode.NONE
    assert partition.check_leader_epoch(2, require_leader=False) is ErrorCode.NONE
    assert partition.check_leader_epoch(1, require_leader=False) is ErrorCode.FENCED_LEADER_EPOCH
    assert partition.check_leader_epoch(3, require_leader=False) is ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_replica_that_knows_no_leader_serves_nobody(tmp_path: Path) -> None:
    partition = Partition(open_log(tmp_path / "t-0"), local_id=2)
    partition.is_leader = False
    partition.leader_id = -1  # a cluster replica before its state arrived
    assert partition.check_leader_epoch(-1, require_leader=False) is ErrorCode.NOT_LEADER_OR_FOLLOWER


_views = st.builds(
    ReplicaView,
    broker_id=st.integers(1, 9),
    rack=st.sampled_from([None, "a", "b"]),
    log_end_offset=st.integers(0, 20),
    time_since_caught_up_ms=st.integers(0, 1000),
)


@given(
    client_rack=st.sampled_from([None, "", "a", "b"]),
    leader=_views,
    followers=st.lists(_views, max_size=5, unique_by=lambda v: v.broker_id),
)
def test_the_rack_aware_choice_is_kafkas(
    client_rack: str | None, leader: ReplicaView, followers: list[ReplicaView]
) -> None:
    followers = [f for f in followers if f.broker_id != leader.broker_id]
    chosen = select_rack_aware(client_rack, leader, [leader, *followers])
    same_rack = [r for r in (leader, *followers) if client_rack and r.rack == client_rack]
    if not same_rack or leader in same_rack:
        assert chosen == leader
        return
    assert chosen in same_rack
    for other in same_rack:  # nobody in the rack is more caught up (then more recently, then higher id)
        assert (other.log_end_offset, -other.time_since_caught_up_ms, other.broker_id) <= (
            chosen.log_end_offset,
            -chosen.time_since_caught_up_ms,
            chosen.broker_id,
        )
