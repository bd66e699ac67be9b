"""Transactions with the real clients against the real broker (issue 6): commit/abort across topics and
partitions, read_committed hold-back by open transactions, zombie fencing, transaction timeouts, and the
coordinator's error codes through the raw client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from exactly.protocol.messages.end_txn import EndTxnRequest
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import BatchBuilder
from tests.interop.client import RawClient
from tests.interop.support import create_topic, running_broker
from tests.interop.txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    consume_values,
    describe_transaction,
    fetch_once,
    latest_offset,
    wait_for_state,
)

pytestmark = pytest.mark.interop

Send = tuple[str, int, bytes]  # topic, partition, value
Plan = list[tuple[bool, list[Send]]]  # (commit?, records) per transaction
TOPICS = {"orders": 3, "audit": 2}


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with running_broker(tmp_path / "data", "group.initial.rebalance.delay.ms=0") as proc:
        for name, partitions in TOPICS.items():
            create_topic(proc.bootstrap, name, partitions)
        yield proc.bootstrap


def all_partitions() -> list[tuple[str, int]]:
    return [(t, p) for t, n in TOPICS.items() for p in range(n)]


# --- the three clients' transactional producers ---------------------------------------------------------


def run_confluent(bootstrap: str, txn_id: str, plan: Plan) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(20)
    for commit, sends in plan:
        producer.begin_transaction()
        for topic, partition, value in sends:
            producer.produce(topic, value=value, partition=partition)
        assert producer.flush(20) == 0  # the records reach the broker, aborted ones too
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)


def run_kafka_python(bootstrap: str, txn_id: str, plan: Plan) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    try:
        producer.init_transactions()
        for commit, sends in plan:
            producer.begin_transaction()
            for topic, partition, value in sends:
                producer.send(topic, value=value, partition=partition)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()


def run_aiokafka(bootstrap: str, txn_id: str, plan: Plan) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await producer.start()
        try:
            for commit, sends in plan:
                await producer.begin_transaction()
                for topic, partition, value in sends:
                    await producer.send_and_wait(topic, value, partition=partition)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(main())


PRODUCERS: dict[str, Callable[[str, str, Plan], None]] = {
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def make_plan(client: str) -> Plan:
    plan: Plan = []
    for n, commit in enumerate([True, False, True, False, True]):
        sends = [
            (topic, i % partitions, f"{client}-{n}-{'c' if commit else 'a'}-{topic}-{i}".encode())
            for topic, partitions in TOPICS.items()
            for i in range(6)
        ]
        plan.append((commit, sends))
    return plan


# --- 1. commit and abort across topics and partitions ---------------------------------------------------


@pytest.mark.parametrize("client", list(PRODUCERS))
def test_commit_and_abort_across_topics(bootstrap: str, client: str) -> None:
    plan = make_plan(client)
    PRODUCERS[client](bootstrap, f"{client}-tx", plan)
    committed = sorted(v for commit, sends in plan if commit for _, _, v in sends)
    everything = sorted(v for _, sends in plan for _, _, v in sends)
    assert len(committed) == 36
    assert len(everything) == 60

    assert sorted(consume_values(bootstrap, all_partitions(), "read_committed", len(committed))) == committed
    assert (
        sorted(consume_values(bootstrap, all_partitions(), "read_uncommitted", len(everything))) == everything
    )

    # one COMMIT/ABORT marker per partition per transaction; the LSO has reached the end everywhere
    for topic, partition in all_partitions():
        raw = fetch_once(bootstrap, topic, partition)
        assert raw.markers == len(plan)
        assert raw.last_stable_offset == raw.high_watermark
        assert sorted(raw.values) == sorted(
            v for _, s in plan for t, p, v in s if (t, p) == (topic, partition)
        )
        assert sorted(raw.visible) == sorted(
            v for c, s in plan if c for t, p, v in s if (t, p) == (topic, partition)
        )
    wait_for_state(bootstrap, f"{client}-tx", {"CompleteCommit"})  # the last transaction committed


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_their_read_committed_consumers(bootstrap: str, client: str) -> None:
    """kafka-python's and aiokafka's own read_committed consumers skip the aborted records."""
    plan = make_plan(client)
    run_confluent(bootstrap, f"{client}-tx", plan)
    committed = sorted(v for commit, sends in plan if commit for _, _, v in sends)
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level="read_committed", consumer_timeout_ms=3000
        )
        consumer.assign([TopicPartition(t, p) for t, p in all_partitions()])
        consumer.seek_to_beginning()
        got = sorted(m.value for m in consumer)
        consumer.close()
    else:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition as AioTopicPartition

        async def read() -> list[bytes]:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
            await consumer.start()
            try:
                consumer.assign([AioTopicPartition(t, p) for t, p in all_partitions()])
                await consumer.seek_to_beginning()
                values: list[bytes] = []
                deadline = time.monotonic() + 10
                while len(values) < len(committed) and time.monotonic() < deadline:
                    batches = await consumer.getmany(timeout_ms=500)
                    values += [m.value for msgs in batches.values() for m in msgs]
                batches = await consumer.getmany(timeout_ms=1000)  # nothing else may come
                values += [m.value for msgs in batches.values() for m in msgs]
                return values
            finally:
                await consumer.stop()

        got = sorted(asyncio.run(read()))
    assert got == committed


# --- 2. an open transaction holds back read_committed readers of its partitions ------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_open_transaction_holds_back_read_committed(bootstrap: str, commit: bool) -> None:
    from confluent_kafka import Producer

    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "holder", "linger.ms": 0})
    txn.init_transactions(20)
    txn.begin_transaction()
    for i in range(3):
        txn.produce("orders", value=b"txn-%d" % i, partition=0)
    assert txn.flush(20) == 0
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(2):
        plain.produce("orders", value=b"plain-%d" % i, partition=0)
        plain.produce("orders", value=b"other-%d" % i, partition=1)
    assert plain.flush(20) == 0

    held = fetch_once(bootstrap, "orders", 0)
    assert held.high_watermark == 5
    assert held.last_stable_offset == 0  # the transaction's first offset
    assert held.values == []  # nothing at or beyond the LSO, not even the later plain records
    assert latest_offset(bootstrap, "orders", 0, READ_COMMITTED) == 0
    assert latest_offset(bootstrap, "orders", 0, READ_UNCOMMITTED) == 5
    free = fetch_once(bootstrap, "orders", 1)
    assert free.visible == [b"other-0", b"other-1"]  # a partition outside the transaction is not held
    uncommitted = fetch_once(bootstrap, "orders", 0, isolation=READ_UNCOMMITTED)
    assert uncommitted.values == [b"txn-0", b"txn-1", b"txn-2", b"plain-0", b"plain-1"]

    if commit:
        txn.commit_transaction(20)
    else:
        txn.abort_transaction(20)
    expected = [b"txn-0", b"txn-1", b"txn-2", b"plain-0", b"plain-1"] if commit else [b"plain-0", b"plain-1"]
    deadline = time.monotonic() + 5
    while (released := fetch_once(bootstrap, "orders", 0)).last_stable_offset != 6:
        assert time.monotonic() < deadline, released
        time.sleep(0.01)
    assert released.visible == expected
    assert released.markers == 1
    assert sorted(consume_values(bootstrap, [("orders", 0)], "read_committed", len(expected))) == sorted(
        expected
    )


# --- 3. zombie fencing -----------------------------------------------------------------------------------


def test_zombie_is_fenced_confluent(bootstrap: str) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer

    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fence-me", "linger.ms": 0})
    zombie.init_transactions(20)
    zombie.begin_transaction()
    zombie.produce("orders", value=b"zombie", partition=0)
    assert zombie.flush(20) == 0

    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fence-me", "linger.ms": 0})
    successor.init_transactions(20)  # fences the zombie and aborts its open transaction
    described = wait_for_state(bootstrap, "fence-me", {"Empty"})
    assert described.producer_epoch == 2  # +1 fencing the open transaction, +1 for the new instance

    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(20)
    error = info.value.args[0]
    assert error.fatal(), error
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)

    successor.begin_transaction()
    successor.produce("orders", value=b"successor", partition=0)
    successor.commit_transaction(20)
    assert consume_values(bootstrap, [("orders", 0)], "read_committed", 1) == [b"successor"]
    assert fetch_once(bootstrap, "orders", 0, isolation=READ_UNCOMMITTED).values == [b"zombie", b"successor"]


def test_zombie_is_fenced_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    zombie = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="fence-kp")
    successor = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="fence-kp")
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send("orders", value=b"zombie", partition=1).get(timeout=10)
        successor.init_transactions()
        with pytest.raises(KafkaError) as info:
            zombie.commit_transaction()
        assert type(info.value).__name__ in ("ProducerFencedError", "InvalidProducerEpochError"), info.value
        successor.begin_transaction()
        successor.send("orders", value=b"successor", partition=1)
        successor.commit_transaction()
    finally:
        zombie.close(timeout=1)
        successor.close()
    assert consume_values(bootstrap, [("orders", 1)], "read_committed", 1) == [b"successor"]


# --- 4. transaction timeout ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_abandoned_transaction_is_aborted_after_its_timeout(tmp_path: Path) -> None:
    from confluent_kafka import KafkaException, Producer

    cleanup_ms, timeout_ms = 500, 2000
    with running_broker(
        tmp_path / "data", f"transaction.abort.timed.out.transaction.cleanup.interval.ms={cleanup_ms}"
    ) as proc:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "orders", 1)
        zombie = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": "slow", "transaction.timeout.ms": timeout_ms}
        )
        zombie.init_transactions(20)
        zombie.begin_transaction()
        zombie.produce("orders", value=b"abandoned", partition=0)
        assert zombie.flush(20) == 0
        started = time.monotonic()
        plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        plain.produce("orders", value=b"after", partition=0)
        assert plain.flush(20) == 0
        assert fetch_once(bootstrap, "orders", 0).visible == []  # held back by the open transaction

        while (fetched := fetch_once(bootstrap, "orders", 0)).last_stable_offset < fetched.high_watermark:
            assert time.monotonic() - started < (timeout_ms + cleanup_ms + 3000) / 1000, "reader not released"
            time.sleep(0.05)
        released_after = time.monotonic() - started
        assert released_after >= timeout_ms / 1000 - 0.2  # not before the timeout
        assert fetched.visible == [b"after"]  # the abandoned record is aborted
        described = wait_for_state(bootstrap, "slow", {"CompleteAbort"})
        assert described.producer_epoch == 1  # the timeout fenced the zombie
        assert "aborting transaction of 'slow'" in proc.log()

        with pytest.raises(KafkaException) as info:
            zombie.commit_transaction(20)
        assert info.value.args[0].code() != 0


# --- 5. error codes -------------------------------------------------------------------------------------


def _init(client: RawClient, txn_id: str, timeout_ms: int = 60_000, version: int = 4) -> tuple[int, int, int]:
    response = client.request(
        ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(txn_id, timeout_ms, -1, -1)
    )
    return response.error_code, response.producer_id, response.producer_epoch


def _add(
    client: RawClient, txn_id: str, pid: int, epoch: int, parts: dict[str, list[int]]
) -> dict[tuple[str, int], int]:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in parts.items()],
    )
    response = client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, request)
    return {
        (t.name, r.partition_index): r.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for r in t.results_by_partition
    }


def _produce(client: RawClient, txn_id: str | None, pid: int, epoch: int, value: bytes) -> int:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True)
    builder.append(int(time.time() * 1000), None, value)
    request = ProduceRequest(
        txn_id,
        -1,
        10_000,
        [TopicProduceData("orders", partition_data=[PartitionProduceData(0, builder.build())])],
    )
    response = client.request(ApiKey.PRODUCE, 9, request)
    code: int = response.responses[0].partition_responses[0].error_code
    return code


def test_coordinator_error_codes(bootstrap: str) -> None:
    client = RawClient(bootstrap)
    try:
        assert _init(client, "raw", 0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert _init(client, "raw", 900_001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        error, pid, epoch = _init(client, "raw")
        assert (error, epoch) == (ErrorCode.NONE, 0)

        # a transactional batch to a partition that is not in the transaction (KIP-890 part 1)
        assert _produce(client, "raw", pid, epoch, b"sneaky") == ErrorCode.INVALID_TXN_STATE
        assert fetch_once(bootstrap, "orders", 0, isolation=READ_UNCOMMITTED).high_watermark == 0
        # a transactional batch without a transactional id
        assert (
            _produce(client, None, pid, epoch, b"anonymous")
            == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )

        codes = _add(client, "raw", pid, epoch, {"orders": [0, 1], "missing": [0]})
        assert codes == {
            ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("orders", 1): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        end = client.request(ApiKey.END_TXN, 3, EndTxnRequest("raw", pid, epoch, True))
        assert end.error_code == ErrorCode.INVALID_TXN_STATE  # nothing was added: no transaction

        assert _add(client, "raw", pid, epoch, {"orders": [0]}) == {("orders", 0): ErrorCode.NONE}
        assert _produce(client, "raw", pid, epoch, b"ok") == ErrorCode.NONE
        # a second instance fences the open transaction (aborted at epoch + 1) and gets epoch + 2; the
        # broker holds its InitProducerId until the abort is complete instead of answering
        # CONCURRENT_TRANSACTIONS and making it retry
        error, _, new_epoch = _init(client, "raw")
        assert (error, new_epoch) == (ErrorCode.NONE, 2)
        assert describe_transaction(bootstrap, "raw").transaction_state == "Empty"
        for version, code in ((1, ErrorCode.INVALID_PRODUCER_EPOCH), (2, ErrorCode.PRODUCER_FENCED)):
            end = client.request(ApiKey.END_TXN, version, EndTxnRequest("raw", pid, epoch, True))
            assert end.error_code == code, version
        assert _produce(client, "raw", pid, epoch, b"late") == ErrorCode.INVALID_PRODUCER_EPOCH
        assert _add(client, "raw", pid + 1, new_epoch, {"orders": [0]}) == {
            ("orders", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING
        }
    finally:
        client.close()
    partition = fetch_once(bootstrap, "orders", 0)
    assert partition.visible == []
    assert fetch_once(bootstrap, "orders", 0, isolation=READ_UNCOMMITTED).values == [b"ok"]


def test_broker_process_kept_serving(bootstrap: str) -> None:
    """Sanity for the fixture: the broker answers after a transactional round trip."""
    run_confluent(bootstrap, "sanity", [(True, [("audit", 0, b"x")])])
    assert consume_values(bootstrap, [("audit", 0)], "read_committed", 1) == [b"x"]


def test_idle_transactional_id_expires(tmp_path: Path) -> None:
    """transactional.id.expiration.ms: an id without transactions is forgotten (a tombstone in
    __transaction_state); its next InitProducerId starts again with a new producer id."""
    with running_broker(
        tmp_path / "data",
        "transactional.id.expiration.ms=1000",
        "transaction.remove.expired.transaction.cleanup.interval.ms=200",
    ) as proc:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "orders", 1)
        run_confluent(bootstrap, "short-lived", [(True, [("orders", 0, b"one")])])
        first = wait_for_state(bootstrap, "short-lived", {"CompleteCommit"})
        deadline = time.monotonic() + 10
        while (described := describe_transaction(bootstrap, "short-lived")).error_code == ErrorCode.NONE:
            assert time.monotonic() < deadline, described
            time.sleep(0.1)
        assert described.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert "transactional id 'short-lived' expired" in proc.log()
        client = RawClient(bootstrap)
        try:
            error, pid, epoch = _init(client, "short-lived")
        finally:
            client.close()
        assert (error, epoch) == (ErrorCode.NONE, 0)
        assert pid != first.producer_id
