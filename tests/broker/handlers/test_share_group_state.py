"""The share coordinator RPCs (keys 83-87) over the wire, against a broker built in-process: a persister
that takes the broker for another one sends them (its remote path, the codecs, the handlers), the
shard's checks come back as codes, the records written (updates, then a snapshot) survive a restart, and
the RPCs are refused while share groups are off."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.config import BrokerConfig
from exactly.broker.server import Broker
from exactly.broker.share_persister import SharePersister
from exactly.errors import ErrorCode
from exactly.group.share.coordinator import StateWrite
from exactly.group.share.partition import RecordState, ShareState, StateBatch
from exactly.group.share.records import SharePartitionKey

KEY = SharePartitionKey("g", uuid.UUID(int=5), 0)
A, K = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED


@asynccontextmanager
async def running(tmp_path: Path, share: bool = True) -> AsyncIterator[Broker]:
    props = {
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.num.partitions": "2",
        "share.coordinator.snapshot.update.records.per.snapshot": "2",
        "group.share.enable": "true" if share else "false",
    }
    broker = Broker(BrokerConfig.from_properties(props))
    await broker.start()
    try:
        yield broker
    finally:
        broker.request_stop()
        await broker.stop()


def remote(broker: Broker) -> SharePersister:
    """A persister of another broker (id 99) whose share coordinator is `broker`."""
    persister = SharePersister(99, broker.share_coordinator, timeout_s=2.0)
    node = broker.config.node_id
    persister.route(lambda key: node, lambda b: ("127.0.0.1", broker.port), None)
    return persister


def test_the_rpcs_store_read_and_fence_over_the_wire(tmp_path: Path) -> None:
    asyncio.run(_store_read_and_fence(tmp_path))


async def _store_read_and_fence(tmp_path: Path) -> None:
    async with running(tmp_path) as broker:
        persister = remote(broker)
        try:
            read = await persister.read(KEY, 1)
            assert read.code == ErrorCode.NONE
            assert read.state is None  # no state yet
            assert (await persister.write(KEY, StateWrite(0, 1, 5))).code == ErrorCode.INVALID_REQUEST
            assert (await persister.initialize(KEY, 0, 5)).code == ErrorCode.NONE
            assert (await persister.initialize(KEY, 0, 7)).code == ErrorCode.FENCED_STATE_EPOCH
            assert (await persister.read(KEY, 3)).code == ErrorCode.NONE  # leader epoch 3 recorded
            assert (await persister.read(KEY, 2)).code == ErrorCode.FENCED_LEADER_EPOCH
            for i in range(3):  # update, update, snapshot
                write = StateWrite(0, 3, 5 + i, (StateBatch(5 + i, 5 + i, K, 1), StateBatch(9, 9, A, 2)))
                assert (await persister.write(KEY, write)).code == ErrorCode.NONE
            assert (await persister.write(KEY, StateWrite(0, 2, 9))).code == ErrorCode.FENCED_LEADER_EPOCH
            read = await persister.read(KEY, 3)
            assert read.state is not None
            assert read.state.state == ShareState(7, (StateBatch(7, 7, K, 1), StateBatch(9, 9, A, 2)))
            summary = await persister.summary(KEY)
            assert summary.state is not None
            assert (summary.state.state.start_offset, summary.state.leader_epoch) == (7, 3)
            assert persister.remote_requests >= 10
        finally:
            persister.stop()

    async with running(tmp_path) as broker:  # replayed from the log: snapshot and updates
        stored = broker.share_coordinator.shard.get(KEY)
        assert stored is not None
        assert stored.state == ShareState(7, (StateBatch(7, 7, K, 1), StateBatch(9, 9, A, 2)))
        assert stored.leader_epoch == 3
        persister = remote(broker)
        try:
            assert (await persister.delete(KEY)).code == ErrorCode.NONE
            assert broker.share_coordinator.shard.get(KEY) is None
        finally:
            persister.stop()


def test_refused_while_share_groups_are_off(tmp_path: Path) -> None:
    asyncio.run(_refused(tmp_path))


async def _refused(tmp_path: Path) -> None:
    async with running(tmp_path, share=False) as broker:
        persister = remote(broker)
        try:
            assert (await persister.read(KEY, 0)).code == ErrorCode.UNSUPPORTED_VERSION
        finally:
            persister.stop()
