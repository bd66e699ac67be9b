"""Leader epochs on the wire: OffsetForLeaderEpoch answers from the partition's leader-epoch cache, and
Fetch, ListOffsets and OffsetForLeaderEpoch check a request's `current_leader_epoch` as Kafka does (-1: no
check; greater: UNKNOWN_LEADER_EPOCH; smaller: FENCED_LEADER_EPOCH, which one broker at epoch 0 never
sees). The cache lives in `<partition>/leader-epoch-checkpoint` and survives a restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from exactly.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from exactly.storage import files
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import LATEST, create_topic, running_broker

pytestmark = pytest.mark.interop

TOPIC = "epochs"
RECORDS = 100  # 100 x 200 bytes: more than a small log (which makes no checkpoint file)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("leader-epochs") / "data") as proc:
        create_topic(proc.bootstrap, TOPIC)
        create_topic(proc.bootstrap, "empty")
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(RECORDS):
            producer.produce(TOPIC, key=b"k", value=b"%03d" % i + b"x" * 197)
            producer.poll(0)
        assert producer.flush(30) == 0
        yield proc


def offset_for_epoch(
    bootstrap: str, topic: str, leader_epoch: int, current_leader_epoch: int = -1, version: int = 4
) -> EpochEndOffset:
    client = RawClient(bootstrap)
    try:
        request = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                OffsetForLeaderTopic(topic, [OffsetForLeaderPartition(0, current_leader_epoch, leader_epoch)])
            ],
        )
        response = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, request)
        result: EpochEndOffset = response.topics[0].partitions[0]
        return result
    finally:
        client.close()


def answer(p: EpochEndOffset) -> tuple[int, int, int]:
    return p.error_code, p.leader_epoch, p.end_offset


def test_offset_for_leader_epoch_answers_the_log_end_of_epoch_0(broker: BrokerProcess) -> None:
    for version in (2, 3, 4):
        for current in (-1, 0):
            got = offset_for_epoch(broker.bootstrap, TOPIC, 0, current, version)
            assert answer(got) == (ErrorCode.NONE, 0, RECORDS), (version, current)
    assert answer(offset_for_epoch(broker.bootstrap, "empty", 0)) == (ErrorCode.NONE, 0, 0)
    # an epoch this partition never had: Kafka's UNDEFINED (-1, -1), no error
    assert answer(offset_for_epoch(broker.bootstrap, TOPIC, 3)) == (ErrorCode.NONE, -1, -1)
    assert answer(offset_for_epoch(broker.bootstrap, TOPIC, -1)) == (ErrorCode.NONE, -1, -1)
    got = offset_for_epoch(broker.bootstrap, TOPIC, 0, current_leader_epoch=5)
    assert answer(got) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)


def fetch(bootstrap: str, current_leader_epoch: int, version: int = 12) -> tuple[int, int, int, int, bytes]:
    client = RawClient(bootstrap)
    try:
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchTopic(TOPIC, partitions=[FetchPartition(0, current_leader_epoch, 0, -1, -1, 1 << 20)])
            ],
        )
        p = client.request(ApiKey.FETCH, version, request).responses[0].partitions[0]
        return (
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            bytes(p.records or b""),
        )
    finally:
        client.close()


def test_fetch_checks_the_current_leader_epoch(broker: BrokerProcess) -> None:
    for version in (9, 11, 12):
        code, hw, _lso, _start, records = fetch(broker.bootstrap, 0, version)
        assert (code, hw) == (ErrorCode.NONE, RECORDS)
        assert records
        assert fetch(broker.bootstrap, -1, version)[0] == ErrorCode.NONE
        assert fetch(broker.bootstrap, 5, version) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1, -1, b"")


def test_list_offsets_checks_the_current_leader_epoch(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    try:
        for current, expected in (
            (-1, ErrorCode.NONE),
            (0, ErrorCode.NONE),
            (5, ErrorCode.UNKNOWN_LEADER_EPOCH),
        ):
            request = ListOffsetsRequest(
                -1, 0, [ListOffsetsTopic(TOPIC, [ListOffsetsPartition(0, current, LATEST)])]
            )
            p = client.request(ApiKey.LIST_OFFSETS, 7, request).topics[0].partitions[0]
            assert p.error_code == expected, current
            if expected == ErrorCode.NONE:
                assert (p.offset, p.leader_epoch) == (RECORDS, 0)
            else:
                assert (p.offset, p.leader_epoch) == (-1, -1)
    finally:
        client.close()


def test_the_checkpoint_is_on_disk_and_survives_a_restart(broker: BrokerProcess) -> None:
    path = broker.data_dir / files.partition_dir_name(TOPIC, 0) / files.LEADER_EPOCH_CHECKPOINT
    assert path.read_bytes() == b"0\n1\n0 0\n"  # written by the flush of an acks=all produce
    broker.restart()
    assert path.read_bytes() == b"0\n1\n0 0\n"
    assert answer(offset_for_epoch(broker.bootstrap, TOPIC, 0)) == (ErrorCode.NONE, 0, RECORDS)
    assert fetch(broker.bootstrap, 0)[0] == ErrorCode.NONE
