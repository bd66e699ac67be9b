"""A leader whose partition moved on in ZooKeeper cannot change the ISR, so it can never shrink the ISR to
itself and acknowledge acks=all alone (the partition epoch is the state znode's version). Real ZooKeeper,
real logs, the real replica manager and cluster member (its ZooKeeper session only: the watches that would
tell it of the new leader are not started, as for a leader cut off from them)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from exactly.broker.cluster_member import ClusterConfig, ClusterMember
from exactly.broker.flusher import Flusher
from exactly.broker.replica_manager import ReplicaManager
from exactly.clock import ManualClock
from exactly.cluster import znodes
from exactly.cluster.metadata import ClusterMetadata, TopicInfo
from exactly.cluster.znodes import PartitionState, TopicAssignment
from exactly.errors import ErrorCode
from exactly.storage.config import LogConfig
from exactly.storage.log_manager import LogManager
from tests.storage.helpers import data_batch

TOPIC_ID = uuid.uuid4()


async def _leader(tmp_path: Path, zk_connect: str) -> tuple[ClusterMember, ReplicaManager, LogManager]:
    logs = LogManager(tmp_path / "data", LogConfig(min_insync_replicas=2), ManualClock())
    logs.startup()
    replicas = ReplicaManager(logs, Flusher(logs.data_dir), local_id=1, cluster=True)
    metadata = ClusterMetadata(tmp_path / "data")
    member = ClusterMember(
        ClusterConfig(1, zk_connect, session_timeout_ms=6000), replicas, metadata, lambda: (), lambda t: None
    )
    await member.zk.start()
    member.cache.assignments["t"] = TopicAssignment(TOPIC_ID, {0: (1, 2, 3)})
    metadata.mirror_topic(TopicInfo("t", TOPIC_ID, 1, {}))
    state = PartitionState(1, 5, (1, 2, 3), 1)
    await member.zk.create(znodes.partition_state_path("t", 0), state.encode(), makepath=True)
    found = await member.zk.get(znodes.partition_state_path("t", 0))
    assert found is not None
    member._state_changed("t", 0, found[0], found[1])  # the state watch's first delivery
    return member, replicas, logs


def test_an_isr_change_lands_only_on_the_partition_epoch_it_was_read_at(
    tmp_path: Path, zk_connect: str
) -> None:
    async def run() -> None:
        member, replicas, logs = await _leader(tmp_path, zk_connect)
        partition = replicas.partition("t", 0)
        assert partition is not None
        assert (partition.is_leader, partition.leader_epoch, partition.partition_epoch) == (True, 5, 0)

        # the leader's own shrink at the version it knows: written, and its partition epoch follows
        await replicas.write_isr(partition, (1, 2))
        found = await member.zk.get(znodes.partition_state_path("t", 0))
        assert found is not None
        assert PartitionState.decode(found[0]).isr == (1, 2)
        assert (partition.isr, partition.partition_epoch) == ((1, 2), 1)

        # the controller elects broker 2 meanwhile (this leader is cut off: it hears nothing of it)
        await member.zk.set(
            znodes.partition_state_path("t", 0), PartitionState(2, 6, (2, 3), 2).encode(), version=1
        )
        await replicas.write_isr(partition, (1,))  # shrinking the ISR to itself fails the version check
        found = await member.zk.get(znodes.partition_state_path("t", 0))
        assert found is not None
        assert PartitionState.decode(found[0]) == PartitionState(2, 6, (2, 3), 2)
        assert partition.isr == (1, 2)
        assert partition.pending_isr is None

        # so an acks=all write on the deposed leader is never acknowledged
        appended = replicas.append_records(partition, data_batch(1, pid=9, epoch=0, seq=0), required_acks=-1)
        (outcome,) = await replicas.wait_replicated([(partition, appended.info.last_offset + 1)], 0.3)
        assert outcome == ErrorCode.REQUEST_TIMED_OUT
        assert partition.high_watermark == 0

        await member.zk.stop()
        replicas.flusher.close()
        logs.close()

    asyncio.run(run())
