"""ShareService's transactional acknowledgements through the share coordinator (docs/share-transactional-
acks.md), in one broker: pending acks are appended by the coordinator and replayed into its shard; a
COMMIT marker on the state partition applies them to the stored state and to the live share partition;
a share partition loaded again takes back the open transactions' pending acks from the shard; and a key
whose state partition this broker does not lead is refused with NOT_COORDINATOR."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exactly.broker.config import BrokerConfig
from exactly.broker.server import Broker
from exactly.errors import ErrorCode, KafkaError
from exactly.group.share.partition import AckBatch, AckType, RecordState
from exactly.group.share.records import SHARE_STATE_TOPIC, SharePartitionKey
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, EndTxnMarker


def _props(tmp_path: Path) -> dict[str, str]:
    return {
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "group.share.enable": "true",
        "share.transactional.ack.enable": "true",
        "share.auto.offset.reset": "earliest",
    }


def _records(n: int) -> bytes:
    builder = BatchBuilder()
    for i in range(n):
        builder.append(i, None, b"v")
    return bytes(builder.build())


def test_pending_acks_are_decided_by_the_marker_and_restored_at_load(tmp_path: Path) -> None:
    async def run() -> None:
        broker = Broker(BrokerConfig.from_properties(_props(tmp_path)))
        await broker.start()
        try:
            info = await broker.topics.create_topic("t", 1, {})
            broker.replicas.append_records(
                broker.replicas.online_partition("t", 0), _records(6), required_acks=1
            )
            key = SharePartitionKey("g", info.topic_id, 0)
            shares, shard = broker.shares, broker.share_coordinator.shard
            share = await shares.load(key, "t")
            assert [
                (r.first_offset, r.last_offset) for r in shares.acquire(key, "t", "m", 6, 1 << 20).ranges
            ] == [(0, 5)]
            # two producers' transactions hold acks of offsets 0-1 and 2
            for producer, first, last in ((11, 0, 1), (12, 2, 2)):
                code = await shares.add_pending(
                    key, "t", "m", producer, 0, [AckBatch(first, last, (int(AckType.ACCEPT),))], None
                )
                assert code == ErrorCode.NONE
            assert [(r.producer_id, r.acks) for r in shard.pending_for(key)] == [
                (11, ((0, AckType.ACCEPT), (1, AckType.ACCEPT))),
                (12, ((2, AckType.ACCEPT),)),
            ]
            # a second pending ack of the same offset is refused, as is a plain ack of it
            again = [AckBatch(0, 0, (int(AckType.ACCEPT),))]
            assert (
                await shares.add_pending(key, "t", "m", 13, 0, again, None) == ErrorCode.INVALID_RECORD_STATE
            )
            assert await shares.acknowledge(key, "t", "m", again) == ErrorCode.INVALID_RECORD_STATE

            # producer 11 commits: the stored state and the live share partition both apply its acks
            state_partition = broker.share_coordinator.partition_for(key)
            broker.replicas.append_end_txn_marker(
                SHARE_STATE_TOPIC, state_partition, 11, 0, EndTxnMarker(ControlRecordType.COMMIT, 0)
            )
            stored = shard.get(key)
            assert stored is not None
            assert stored.state.start_offset == 2
            assert share.start_offset == 2
            assert share.pending_of(12) == [(2, AckType.ACCEPT)]

            # the update that follows the decision is written
            await asyncio.wait_for(asyncio.gather(*shares._writes), 10)

            # the share partition is loaded again (a new leader epoch, a restart): producer 12's open
            # transaction holds offset 2 again, acquired by its member; the rest is deliverable
            shares.forget(key)
            share = await shares.load(key, "t")
            assert share.start_offset == 2
            assert share.pending_of(12) == [(2, AckType.ACCEPT)]
            assert share.holder(2) == "m"
            assert share.state_of(3) == RecordState.AVAILABLE

            # producer 12 aborts: offset 2 comes back
            broker.replicas.append_end_txn_marker(
                SHARE_STATE_TOPIC, state_partition, 12, 0, EndTxnMarker(ControlRecordType.ABORT, 0)
            )
            assert share.state_of(2) == RecordState.AVAILABLE
            assert shard.pending_for(key) == []
        finally:
            await broker.stop()

    asyncio.run(run())


def test_a_state_partition_led_elsewhere_is_not_coordinator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run() -> None:
        broker = Broker(BrokerConfig.from_properties(_props(tmp_path)))
        await broker.start()
        try:
            info = await broker.topics.create_topic("t", 1, {})
            key = SharePartitionKey("g", info.topic_id, 0)
            shares = broker.shares
            await shares.load(key, "t")
            monkeypatch.setattr(broker.share_coordinator.runtime, "is_leader", lambda partition: False)
            with pytest.raises(KafkaError) as refused:
                shares.check_pending_path(key)
            assert refused.value.code == ErrorCode.NOT_COORDINATOR
            assert "led by another broker" in (refused.value.message or "")
            acks = [AckBatch(0, 0, (int(AckType.ACCEPT),))]
            assert await shares.add_pending(key, "t", "m", 11, 0, acks, None) == ErrorCode.NOT_COORDINATOR
            assert broker.share_coordinator.shard.pending == {}
        finally:
            await broker.stop()

    asyncio.run(run())
