"""Helpers for the transaction interop tests: raw read_committed fetches, consumers that read a set of
partitions to their end, and the transaction coordinator's view through the raw client."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from exactly.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from exactly.protocol.messages.describe_transactions import DescribeTransactionsRequest
from exactly.protocol.messages.end_txn import EndTxnRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from exactly.records.batch import ATTR_CONTROL, iter_batches
from exactly.records.builder import BatchBuilder
from tests.interop.client import RawClient

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass
class FetchedOnce:
    values: list[bytes | None]  # data records of the returned batches (aborted ones included)
    visible: list[bytes | None]  # what a read_committed client keeps: aborted transactions filtered out
    markers: int
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]] | None  # (producer id, first offset)


def fetch_once(
    bootstrap: str, topic: str, partition: int, offset: int = 0, isolation: int = READ_COMMITTED
) -> FetchedOnce:
    """One Fetch v12 (no wait) of up to 4 MiB, decoded, with read_committed filtering applied as a
    client does (a batch of an aborted producer is dropped from its first offset until its marker)."""
    client = RawClient(bootstrap)
    try:
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=4 << 20,
            isolation_level=isolation,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic, partitions=[FetchPartition(partition, -1, offset, -1, -1, 4 << 20)])],
        )
        response = client.request(ApiKey.FETCH, 12, request)
    finally:
        client.close()
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NONE, data
    aborted = (
        None
        if data.aborted_transactions is None
        else [(a.producer_id, a.first_offset) for a in data.aborted_transactions]
    )
    pending = sorted(aborted or [], key=lambda a: a[1])
    skipping: set[int] = set()
    values: list[bytes | None] = []
    visible: list[bytes | None] = []
    markers = 0
    for batch in iter_batches(bytes(data.records or b"")):
        while pending and pending[0][1] <= batch.last_offset:
            skipping.add(pending.pop(0)[0])
        if batch.attributes & ATTR_CONTROL:
            markers += 1
            skipping.discard(batch.producer_id)
            continue
        for record in batch.records():
            values.append(record.value)
            if batch.producer_id not in skipping:
                visible.append(record.value)
    return FetchedOnce(values, visible, markers, data.high_watermark, data.last_stable_offset, aborted)


def latest_offset(bootstrap: str, topic: str, partition: int, isolation: int) -> int:
    """ListOffsets v7 latest (-1): the high watermark, or the LSO for read_committed."""
    client = RawClient(bootstrap)
    try:
        response = client.request(
            ApiKey.LIST_OFFSETS,
            7,
            ListOffsetsRequest(
                -1, isolation, [ListOffsetsTopic(topic, [ListOffsetsPartition(partition, -1, -1)])]
            ),
        )
    finally:
        client.close()
    p = response.topics[0].partitions[0]
    assert p.error_code == ErrorCode.NONE, p
    offset: int = p.offset
    return offset


def describe_transaction(bootstrap: str, transactional_id: str) -> Any:
    client = RawClient(bootstrap)
    try:
        response = client.request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest([transactional_id])
        )
    finally:
        client.close()
    return response.transaction_states[0]


def wait_for_state(bootstrap: str, transactional_id: str, states: set[str], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        described = describe_transaction(bootstrap, transactional_id)
        if described.transaction_state in states:
            return described
        assert time.monotonic() < deadline, (
            f"{transactional_id} is {described.transaction_state}, not {states}"
        )
        time.sleep(0.05)


def consume_values(
    bootstrap: str,
    partitions: list[tuple[str, int]],
    isolation: str,
    expected: int,
    *,
    settle: float = 1.0,
    timeout: float = 30.0,
) -> list[bytes]:
    """Read `partitions` from offset 0 with a confluent-kafka consumer until `expected` values arrived,
    then `settle` seconds more (anything extra is returned too, so that the caller sees it)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        settle_until: float | None = None
        while time.monotonic() < deadline:
            if settle_until is None and len(values) >= expected:
                settle_until = time.monotonic() + settle
            if settle_until is not None and time.monotonic() >= settle_until:
                break
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            assert value is not None
            values.append(value)
        return values
    finally:
        consumer.close()


class RawTxn:
    """The transactional requests with our own codecs."""

    def __init__(self, bootstrap: str) -> None:
        self.client = RawClient(bootstrap)

    def __enter__(self) -> RawTxn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def init(self, txn_id: str | None, timeout_ms: int = 60_000, version: int = 4) -> tuple[int, int, int]:
        response = self.client.request(
            ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(txn_id, timeout_ms, -1, -1)
        )
        return response.error_code, response.producer_id, response.producer_epoch

    def add(
        self, txn_id: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3
    ) -> dict[tuple[str, int], int]:
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in parts.items()],
        )
        response = self.client.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
        return {
            (t.name, r.partition_index): r.partition_error_code
            for t in response.results_by_topic_v3_and_below
            for r in t.results_by_partition
        }

    def add_offsets(self, txn_id: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        response = self.client.request(
            ApiKey.ADD_OFFSETS_TO_TXN, version, AddOffsetsToTxnRequest(txn_id, pid, epoch, group)
        )
        code: int = response.error_code
        return code

    def commit_offsets(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        group: str,
        offsets: dict[str, dict[int, int]],
        version: int = 3,
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit (no member: a producer outside the group, as `send_offsets_to_transaction`
        with a bare group id): the error of every partition."""
        request = TxnOffsetCommitRequest(
            txn_id,
            group,
            pid,
            epoch,
            topics=[
                TxnOffsetCommitRequestTopic(
                    t, [TxnOffsetCommitRequestPartition(p, offset) for p, offset in parts.items()]
                )
                for t, parts in offsets.items()
            ],
        )
        response = self.client.request(ApiKey.TXN_OFFSET_COMMIT, version, request)
        return {(t.name, r.partition_index): r.error_code for t in response.topics for r in t.partitions}

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool = True, version: int = 3) -> int:
        response = self.client.request(ApiKey.END_TXN, version, EndTxnRequest(txn_id, pid, epoch, commit))
        code: int = response.error_code
        return code

    def produce(
        self,
        txn_id: str | None,
        pid: int,
        epoch: int,
        topic: str,
        partition: int,
        value: bytes,
        sequence: int = 0,
    ) -> int:
        builder = BatchBuilder(
            producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
        )
        builder.append(int(time.time() * 1000), None, value)
        request = ProduceRequest(
            txn_id,
            -1,
            10_000,
            [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, builder.build())])],
        )
        response = self.client.request(ApiKey.PRODUCE, 9, request)
        code: int = response.responses[0].partition_responses[0].error_code
        return code
