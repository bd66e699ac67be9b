"""The pure parts of DescribeQuorum (55) and ListConfigResources (74), and the metadata log's offset."""

from __future__ import annotations

from pathlib import Path

from exactly.broker.handlers.describe_quorum import (
    QuorumView,
    only_metadata_partition,
    partition_state,
)
from exactly.broker.handlers.list_config_resources import config_resources
from exactly.cluster.metadata import ClusterMetadata
from exactly.protocol.messages.describe_quorum import DescribeQuorumRequest, PartitionData, TopicData


def test_a_cluster_quorum_has_the_controller_as_voter_and_brokers_as_observers() -> None:
    view = QuorumView(leader=2, epoch=7, high_watermark=40, observers=(1, 3), end_offsets={1: 40})
    state = partition_state(view, now_ms=1_000)
    assert (state.leader_id, state.leader_epoch, state.high_watermark, state.error_code) == (2, 7, 40, 0)
    ((voter_id, voter_leo, voter_fetch, voter_caught_up),) = [
        (r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
        for r in state.current_voters
    ]
    assert (voter_id, voter_leo, voter_fetch, voter_caught_up) == (2, 40, 1_000, 1_000)
    assert [(r.replica_id, r.log_end_offset, r.last_fetch_timestamp) for r in state.observers] == [
        (1, 40, -1),
        (3, -1, -1),  # another broker's view: unknown, as Kafka says it
    ]


def test_only_cluster_metadata_partition_zero_is_described() -> None:
    def asks(*topics: tuple[str, list[int]]) -> bool:
        request = DescribeQuorumRequest([TopicData(n, [PartitionData(p) for p in ps]) for n, ps in topics])
        return only_metadata_partition(request)

    assert asks(("__cluster_metadata", [0]))
    assert not asks(("__cluster_metadata", [1]))
    assert not asks(("__cluster_metadata", [0, 0]))
    assert not asks(("__cluster_metadata", [0]), ("t", [0]))
    assert not asks()


def test_config_resources_by_type() -> None:
    every = config_resources([], ["b", "a"], [2, 1])
    assert every is not None
    assert [(r.resource_type, r.resource_name) for r in every] == [
        (2, "a"),
        (2, "b"),
        (4, "1"),
        (4, "2"),
        (8, "1"),
        (8, "2"),
    ]
    only = config_resources([32, 16, 4], ["a"], [0])
    assert only is not None
    assert [(r.resource_type, r.resource_name) for r in only] == [(4, "0")]
    assert config_resources([2, 99], ["a"], [0]) is None


def test_the_metadata_offset_counts_records_across_a_restart(tmp_path: Path) -> None:
    metadata = ClusterMetadata(tmp_path)
    assert metadata.end_offset == 0
    metadata.create_topic("t", 1)
    metadata.set_configs("t", {"retention.ms": "1"})
    assert metadata.end_offset == 2
    metadata.close()
    reopened = ClusterMetadata(tmp_path)
    assert reopened.end_offset == 2
    reopened.close()
