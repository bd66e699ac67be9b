"""Transactions with the real clients against the real broker: commit/abort across topics and partitions
(confluent-kafka, kafka-python, aiokafka producers and consumers), read_committed hold-back by open
transactions (and the LSO through ListOffsets), interleaved transactions on one partition, zombie
fencing, the transaction timeout, transactional.id expiry, and the coordinator's error codes through the
raw client.

What the clients did is always read back independently: raw Fetch/ListOffsets with our own codecs
(`support.fetch_partition`, `txn_support.fetch_once`), and the other clients' consumers.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.records.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from exactly.records.control import parse_control_record_type
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic, fetch_partition, running_broker
from tests.interop.txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    RawTxn,
    consume_values,
    describe_transaction,
    fetch_once,
    latest_offset,
    wait_for_state,
)

pytestmark = pytest.mark.interop

Send = tuple[str, int, bytes]  # topic, partition, value
Plan = list[tuple[bool, list[Send]]]  # (commit?, records) per transaction
COMMIT, ABORT = "COMMIT", "ABORT"


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module; every test works on its own topics and transactional ids (the
    tests that need other broker settings start their own)."""
    with running_broker(
        tmp_path_factory.mktemp("txn") / "data", "group.initial.rebalance.delay.ms=0"
    ) as proc:
        yield proc


@dataclass(frozen=True)
class Env:
    """A test's own `orders` (3 partitions) and `audit` (2 partitions) topics on the shared broker."""

    bootstrap: str
    tag: str

    @property
    def orders(self) -> str:
        return f"orders-{self.tag}"

    @property
    def audit(self) -> str:
        return f"audit-{self.tag}"

    def txn(self, name: str) -> str:
        return f"{name}-{self.tag}"

    def partitions(self) -> list[tuple[str, int]]:
        return [(self.orders, p) for p in range(3)] + [(self.audit, p) for p in range(2)]


_ENVS = itertools.count()


@pytest.fixture
def env(shared_broker: BrokerProcess) -> Env:
    made = Env(shared_broker.bootstrap, str(next(_ENVS)))
    create_topic(made.bootstrap, made.orders, 3)
    create_topic(made.bootstrap, made.audit, 2)
    return made


def log_layout(bootstrap: str, topic: str, partition: int) -> list[bytes | str]:
    """The whole partition, offset by offset: a data record's value, or COMMIT/ABORT for a marker.
    Waits until no transaction is open on it (LSO = high watermark: EndTxn is answered before the
    markers are written) and asserts that the offsets are contiguous from 0."""
    deadline = time.monotonic() + 10
    while True:
        dump = fetch_partition(bootstrap, topic, partition, isolation_level=READ_UNCOMMITTED)
        if dump.last_stable_offset == dump.high_watermark:
            break
        assert time.monotonic() < deadline, f"{topic}-{partition} has an open transaction: {dump}"
        time.sleep(0.02)
    out: list[bytes | str] = []
    for batch in dump.batches:
        assert batch.crc_ok
        assert batch.base_offset == len(out), (topic, partition, batch.base_offset, out)
        if batch.attributes & ATTR_CONTROL:
            assert batch.attributes & ATTR_TRANSACTIONAL
            (record,) = batch.records
            out.append(parse_control_record_type(record.key).name)
        else:
            for record in batch.records:
                assert record.value is not None
                out.append(record.value)
    assert len(out) == dump.high_watermark
    return out


def log_batches(bootstrap: str, topic: str, partition: int) -> list[tuple[str, int, int]]:
    """(kind, producer id, producer epoch) per batch; kind is "data", COMMIT or ABORT."""
    out: list[tuple[str, int, int]] = []
    for batch in fetch_partition(bootstrap, topic, partition).batches:
        kind = "data"
        if batch.attributes & ATTR_CONTROL:
            kind = parse_control_record_type(batch.records[0].key).name
        out.append((kind, batch.producer_id, batch.producer_epoch))
    return out


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

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5)
    try:
        producer.init_transactions()
        for commit, sends in plan:
            producer.begin_transaction()
            futures = [producer.send(t, value=v, partition=p) for t, p, v in sends]
            producer.flush()
            for future in futures:
                future.get(timeout=0)  # every record was acknowledged, aborted ones too
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()


class _Abort(Exception):
    pass


def run_aiokafka(bootstrap: str, txn_id: str, plan: Plan) -> None:
    """`async with producer.transaction()`: commits on a clean exit, aborts when the block raises."""
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5)
        await producer.start()
        try:
            for commit, sends in plan:
                try:
                    async with producer.transaction():
                        futures = [await producer.send(t, v, partition=p) for t, p, v in sends]
                        await asyncio.gather(*futures)  # acknowledged, aborted ones too
                        if not commit:
                            raise _Abort
                except _Abort:
                    pass
        finally:
            await producer.stop()

    asyncio.run(main())


PRODUCERS: dict[str, Callable[[str, str, Plan], None]] = {
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def make_plan(client: str, env: Env) -> Plan:
    """Five transactions (commit, abort, commit, abort, commit), each writing 2 records to every
    partition of `orders` and 3 to every partition of `audit`."""
    plan: Plan = []
    for n, commit in enumerate([True, False, True, False, True]):
        sends = [
            (topic, i % partitions, f"{client}-{n}-{'c' if commit else 'a'}-{topic}-{i}".encode())
            for topic, partitions in ((env.orders, 3), (env.audit, 2))
            for i in range(6)
        ]
        plan.append((commit, sends))
    return plan


def committed_values(plan: Plan) -> list[bytes]:
    return sorted(v for commit, sends in plan if commit for _, _, v in sends)


def all_values(plan: Plan) -> list[bytes]:
    return sorted(v for _, sends in plan for _, _, v in sends)


# --- other clients' consumers ---------------------------------------------------------------------------


def kafka_python_values(
    bootstrap: str, partitions: list[tuple[str, int]], isolation: str, expected: int, settle: float = 0.5
) -> list[bytes]:
    """kafka-python's KafkaConsumer from offset 0 until `expected` values arrived, then `settle` s more."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False, fetch_max_wait_ms=50
    )
    try:
        consumer.assign([TopicPartition(t, p) for t, p in partitions])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < expected and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=200)
            values += [m.value for msgs in batches.values() for m in msgs]
        settle_until = time.monotonic() + settle
        while time.monotonic() < settle_until:
            batches = consumer.poll(timeout_ms=100)
            values += [m.value for msgs in batches.values() for m in msgs]
        return values
    finally:
        consumer.close()


def aiokafka_values(
    bootstrap: str, partitions: list[tuple[str, int]], isolation: str, expected: int, settle: float = 0.5
) -> list[bytes]:
    """aiokafka's AIOKafkaConsumer from offset 0 until `expected` values arrived, then `settle` s more."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def read() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level=isolation,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(t, p) for t, p in partitions])
            await consumer.seek_to_beginning()
            values: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(values) < expected and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                values += [m.value for msgs in batches.values() for m in msgs]
            settle_until = time.monotonic() + settle
            while time.monotonic() < settle_until:
                batches = await consumer.getmany(timeout_ms=100)
                values += [m.value for msgs in batches.values() for m in msgs]
            return values
        finally:
            await consumer.stop()

    return asyncio.run(read())


CONSUMERS: dict[str, Callable[[str, list[tuple[str, int]], str, int], list[bytes]]] = {
    "confluent": lambda b, ps, iso, n: consume_values(b, ps, iso, n, settle=0.5),
    "kafka-python": kafka_python_values,
    "aiokafka": aiokafka_values,
}


def watermarks(bootstrap: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """confluent-kafka's `get_watermark_offsets` (ListOffsets earliest/latest, read_uncommitted)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)
            for t, p in partitions
        }
    finally:
        consumer.close()


# --- 1. commit and abort across topics and partitions ---------------------------------------------------


@pytest.mark.parametrize("client", list(PRODUCERS))
def test_commit_and_abort_across_topics(env: Env, client: str) -> None:
    plan = make_plan(client, env)
    PRODUCERS[client](env.bootstrap, env.txn(f"{client}-tx"), plan)
    committed, everything = committed_values(plan), all_values(plan)
    assert (len(committed), len(everything)) == (36, 60)

    # a read_committed consumer gets exactly the committed values; read_uncommitted gets the aborted too
    assert (
        sorted(consume_values(env.bootstrap, env.partitions(), "read_committed", 36, settle=0.5)) == committed
    )
    assert (
        sorted(consume_values(env.bootstrap, env.partitions(), "read_uncommitted", 60, settle=0.5))
        == everything
    )

    # Every partition, offset by offset: each transaction's records, then its COMMIT/ABORT marker. So the
    # log end offset is the records plus one marker per partition per transaction.
    for topic, partition in env.partitions():
        expected: list[bytes | str] = []
        for commit, sends in plan:
            expected += [v for t, p, v in sends if (t, p) == (topic, partition)]
            expected.append(COMMIT if commit else ABORT)
        assert log_layout(env.bootstrap, topic, partition) == expected, (topic, partition)
    marks = watermarks(env.bootstrap, env.partitions())
    for topic, partition in env.partitions():
        records = 10 if topic == env.orders else 15
        assert marks[(topic, partition)] == (0, records + len(plan))
        # nothing is open: the LSO is the high watermark; read_committed keeps the committed ones in order
        raw = fetch_once(env.bootstrap, topic, partition)
        assert raw.last_stable_offset == raw.high_watermark == records + len(plan)
        assert latest_offset(env.bootstrap, topic, partition, READ_COMMITTED) == records + len(plan)
        assert raw.markers == len(plan)
        assert raw.visible == [v for c, s in plan if c for t, p, v in s if (t, p) == (topic, partition)]
    # the last transaction committed
    described = wait_for_state(env.bootstrap, env.txn(f"{client}-tx"), {"CompleteCommit"})
    assert described.topics == []


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_their_consumers_read_committed_and_uncommitted(env: Env, client: str) -> None:
    """kafka-python's and aiokafka's own consumers: read_committed skips the aborted records (using the
    aborted-transaction lists in Fetch responses); read_uncommitted returns them."""
    plan = make_plan(client, env)
    run_confluent(env.bootstrap, env.txn(f"{client}-tx"), plan)
    committed, everything = committed_values(plan), all_values(plan)
    read = CONSUMERS[client]
    assert sorted(read(env.bootstrap, env.partitions(), "read_committed", len(committed))) == committed
    assert sorted(read(env.bootstrap, env.partitions(), "read_uncommitted", len(everything))) == everything


# --- 2. an open transaction holds back read_committed readers of its partitions ------------------------


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_open_transaction_holds_back_read_committed(env: Env, commit: bool) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    plain = Producer({"bootstrap.servers": env.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    plain.produce(env.orders, value=b"before", partition=0)  # offset 0
    assert plain.flush(20) == 0

    txn = Producer(
        {"bootstrap.servers": env.bootstrap, "transactional.id": env.txn("holder"), "linger.ms": 0}
    )
    txn.init_transactions(20)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(env.orders, value=b"txn-%d" % i, partition=0)  # offsets 1-3
    txn.produce(env.audit, value=b"txn-audit", partition=1)  # offset 0
    assert txn.flush(20) == 0
    for i in range(2):
        plain.produce(env.orders, value=b"plain-%d" % i, partition=0)  # offsets 4-5, after the open txn
        plain.produce(env.orders, value=b"other-%d" % i, partition=1)  # not in the transaction
        plain.produce(env.audit, value=b"audit-%d" % i, partition=1)  # offsets 1-2
    assert plain.flush(20) == 0

    # raw Fetch: nothing at or beyond the LSO (the transaction's first offset), not even the later
    # non-transactional records; read_uncommitted sees everything
    held = fetch_once(env.bootstrap, env.orders, 0)
    assert (held.high_watermark, held.last_stable_offset) == (6, 1)
    assert held.values == [b"before"]
    held_audit = fetch_once(env.bootstrap, env.audit, 1)
    assert (held_audit.high_watermark, held_audit.last_stable_offset, held_audit.values) == (3, 0, [])
    uncommitted = fetch_once(env.bootstrap, env.orders, 0, isolation=READ_UNCOMMITTED)
    assert uncommitted.values == [b"before", b"txn-0", b"txn-1", b"txn-2", b"plain-0", b"plain-1"]
    free = fetch_once(env.bootstrap, env.orders, 1)
    assert (free.last_stable_offset, free.visible) == (2, [b"other-0", b"other-1"])

    # ListOffsets latest: the LSO for read_committed, the high watermark for read_uncommitted
    assert latest_offset(env.bootstrap, env.orders, 0, READ_COMMITTED) == 1
    assert latest_offset(env.bootstrap, env.orders, 0, READ_UNCOMMITTED) == 6
    assert latest_offset(env.bootstrap, env.audit, 1, READ_COMMITTED) == 0
    assert latest_offset(env.bootstrap, env.orders, 1, READ_COMMITTED) == 2
    tps = [TopicPartition(env.orders, 0), TopicPartition(env.orders, 1), TopicPartition(env.audit, 1)]
    kp = KafkaConsumer(bootstrap_servers=env.bootstrap, isolation_level="read_committed")
    try:
        assert kp.end_offsets(tps) == {tps[0]: 1, tps[1]: 2, tps[2]: 0}
    finally:
        kp.close()

    # a real read_committed consumer: the partition outside the transaction is readable at once
    readable = [(env.orders, 0), (env.orders, 1), (env.audit, 1)]
    seen = consume_values(env.bootstrap, readable, "read_committed", 3, settle=1.0)
    assert sorted(seen) == [b"before", b"other-0", b"other-1"]

    if commit:
        txn.commit_transaction(20)
    else:
        txn.abort_transaction(20)
    ours = [b"txn-0", b"txn-1", b"txn-2"] if commit else []
    expected = [b"before", *ours, b"plain-0", b"plain-1"]
    deadline = time.monotonic() + 5
    while (released := fetch_once(env.bootstrap, env.orders, 0)).last_stable_offset != 7:
        assert time.monotonic() < deadline, released
        time.sleep(0.01)
    assert released.high_watermark == 7
    assert released.visible == expected
    assert released.markers == 1
    assert latest_offset(env.bootstrap, env.orders, 0, READ_COMMITTED) == 7
    assert log_layout(env.bootstrap, env.audit, 1) == [
        b"txn-audit",
        b"audit-0",
        b"audit-1",
        COMMIT if commit else ABORT,
    ]
    everything = consume_values(env.bootstrap, readable, "read_committed", 6 + len(ours), settle=0.5)
    assert sorted(everything) == sorted(
        [*expected, b"other-0", b"other-1", *([b"txn-audit"] if commit else []), b"audit-0", b"audit-1"]
    )


def test_interleaved_transactions_on_one_partition(env: Env) -> None:
    """Two transactions interleaved on one partition: the LSO is the first offset of the oldest open one;
    the aborted one's records are filtered by every client even when reading from the middle of it."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    one = Producer({"bootstrap.servers": env.bootstrap, "transactional.id": env.txn("one"), "linger.ms": 0})
    two = Producer({"bootstrap.servers": env.bootstrap, "transactional.id": env.txn("two"), "linger.ms": 0})
    for producer in (one, two):
        producer.init_transactions(20)
        producer.begin_transaction()
    for producer, value in ((one, b"a1"), (two, b"b1"), (one, b"a2"), (two, b"b2")):  # offsets 0-3
        producer.produce(env.orders, value=value, partition=0)
        assert producer.flush(20) == 0
    assert fetch_once(env.bootstrap, env.orders, 0).last_stable_offset == 0

    one.commit_transaction(20)  # marker at 4; "two" still holds the LSO at its first offset, 1
    deadline = time.monotonic() + 5
    while fetch_once(env.bootstrap, env.orders, 0, isolation=READ_UNCOMMITTED).high_watermark < 5:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    held = fetch_once(env.bootstrap, env.orders, 0)
    assert (held.high_watermark, held.last_stable_offset, held.visible) == (5, 1, [b"a1"])
    assert latest_offset(env.bootstrap, env.orders, 0, READ_COMMITTED) == 1

    two.abort_transaction(20)  # marker at 5
    two_pid = describe_transaction(env.bootstrap, env.txn("two")).producer_id
    deadline = time.monotonic() + 5
    while (done := fetch_once(env.bootstrap, env.orders, 0)).last_stable_offset != 6:
        assert time.monotonic() < deadline, done
        time.sleep(0.01)
    assert log_layout(env.bootstrap, env.orders, 0) == [b"a1", b"b1", b"a2", b"b2", COMMIT, ABORT]
    assert done.visible == [b"a1", b"a2"]
    # from offset 2, inside the aborted transaction: the broker still lists it (first offset 1)
    middle = fetch_once(env.bootstrap, env.orders, 0, offset=2)
    assert middle.aborted == [(two_pid, 1)]
    assert middle.visible == [b"a2"]
    assert fetch_once(env.bootstrap, env.orders, 0, offset=3).visible == []

    for start, expected in ((0, [b"a1", b"a2"]), (2, [b"a2"]), (3, [])):
        consumer = Consumer(
            {
                "bootstrap.servers": env.bootstrap,
                "group.id": f"interleaved-{start}",
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 50,
            }
        )
        try:
            consumer.assign([TopicPartition(env.orders, 0, start)])
            got: list[bytes | None] = []
            deadline = time.monotonic() + 10
            while True:
                assert time.monotonic() < deadline, got
                message = consumer.poll(0.1)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    break
                got.append(message.value())
            assert got == expected, start
        finally:
            consumer.close()
    assert sorted(kafka_python_values(env.bootstrap, [(env.orders, 0)], "read_committed", 2)) == [
        b"a1",
        b"a2",
    ]
    assert sorted(aiokafka_values(env.bootstrap, [(env.orders, 0)], "read_committed", 2)) == [b"a1", b"a2"]


# --- 3. zombie fencing -----------------------------------------------------------------------------------


def _check_fenced_log(env: Env, txn_id: str, partition: int) -> None:
    """The zombie's record (epoch 0) was aborted by a marker at the fencing epoch 1; the successor
    (epoch 2) committed its own; read_committed sees only the successor's."""
    pid = describe_transaction(env.bootstrap, txn_id).producer_id
    assert log_layout(env.bootstrap, env.orders, partition) == [b"zombie", ABORT, b"successor", COMMIT]
    assert log_batches(env.bootstrap, env.orders, partition) == [
        ("data", pid, 0),
        (ABORT, pid, 1),
        ("data", pid, 2),
        (COMMIT, pid, 2),
    ]
    assert fetch_once(env.bootstrap, env.orders, partition).visible == [b"successor"]
    assert consume_values(env.bootstrap, [(env.orders, partition)], "read_committed", 1, settle=0.5) == [
        b"successor"
    ]


def test_zombie_is_fenced_confluent(env: Env) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer

    zombie = Producer(
        {"bootstrap.servers": env.bootstrap, "transactional.id": env.txn("fence-me"), "linger.ms": 0}
    )
    zombie.init_transactions(20)
    zombie.begin_transaction()
    zombie.produce(env.orders, value=b"zombie", partition=0)
    assert zombie.flush(20) == 0
    assert fetch_once(env.bootstrap, env.orders, 0, isolation=READ_UNCOMMITTED).values == [b"zombie"]

    successor = Producer(
        {"bootstrap.servers": env.bootstrap, "transactional.id": env.txn("fence-me"), "linger.ms": 0}
    )
    successor.init_transactions(20)  # fences the zombie and aborts its open transaction
    described = wait_for_state(env.bootstrap, env.txn("fence-me"), {"Empty"})
    assert described.producer_epoch == 2  # +1 fencing the open transaction, +1 for the new instance

    # EndTxn with epoch 0 -> PRODUCER_FENCED, which librdkafka raises as its local, fatal _FENCED
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(20)
    error = info.value.args[0]
    assert error.code() == KafkaError._FENCED, error
    assert error.fatal()
    assert not error.txn_requires_abort()
    assert not error.retriable()

    successor.begin_transaction()
    successor.produce(env.orders, value=b"successor", partition=0)
    successor.commit_transaction(20)
    _check_fenced_log(env, env.txn("fence-me"), 0)


def test_zombie_is_fenced_kafka_python(env: Env) -> None:
    from kafka import KafkaProducer
    from kafka.errors import ProducerFencedError

    zombie = KafkaProducer(bootstrap_servers=env.bootstrap, transactional_id=env.txn("fence-kp"))
    successor = KafkaProducer(bootstrap_servers=env.bootstrap, transactional_id=env.txn("fence-kp"))
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(env.orders, value=b"zombie", partition=1).get(timeout=10)
        successor.init_transactions()
        assert describe_transaction(env.bootstrap, env.txn("fence-kp")).producer_epoch == 2
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
        successor.begin_transaction()
        successor.send(env.orders, value=b"successor", partition=1)
        successor.commit_transaction()
    finally:
        zombie.close(timeout=1)
        successor.close()
    _check_fenced_log(env, env.txn("fence-kp"), 1)


def test_zombie_is_fenced_aiokafka(env: Env) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ProducerFenced

    async def main() -> None:
        zombie = AIOKafkaProducer(bootstrap_servers=env.bootstrap, transactional_id=env.txn("fence-aio"))
        successor = AIOKafkaProducer(bootstrap_servers=env.bootstrap, transactional_id=env.txn("fence-aio"))
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await zombie.send_and_wait(env.orders, b"zombie", partition=2)
            await successor.start()  # InitProducerId: fences the zombie
            with pytest.raises(ProducerFenced):
                await zombie.commit_transaction()
            async with successor.transaction():
                await successor.send_and_wait(env.orders, b"successor", partition=2)
        finally:
            await zombie.stop()
            await successor.stop()

    asyncio.run(main())
    _check_fenced_log(env, env.txn("fence-aio"), 2)


# --- 4. transaction timeout ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_abandoned_transaction_is_aborted_after_its_timeout(tmp_path: Path) -> None:
    """A producer that goes quiet inside a transaction: the coordinator's timeout scan fences it (epoch+1)
    and aborts the transaction, which releases read_committed readers; the zombie's late commit gets
    PRODUCER_FENCED (the epoch moved on), i.e. librdkafka's fatal _FENCED, as with Kafka."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    cleanup_ms, timeout_ms = 500, 2000
    with running_broker(
        tmp_path / "data",
        f"transaction.abort.timed.out.transaction.cleanup.interval.ms={cleanup_ms}",
        "transaction.max.timeout.ms=10000",
    ) as proc:
        bootstrap = proc.bootstrap
        create_topic(bootstrap, "orders", 1)
        # transaction.max.timeout.ms bounds what producers may ask for
        with RawTxn(bootstrap) as raw:
            assert raw.init("bounded", 10_001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
            assert raw.init("bounded", 10_000)[0] == ErrorCode.NONE
        greedy = Producer({"bootstrap.servers": bootstrap, "transactional.id": "greedy"})  # 60 s default
        with pytest.raises(KafkaException) as info:
            greedy.init_transactions(10)
        assert info.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
        assert info.value.args[0].fatal()

        zombie = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": "slow",
                "transaction.timeout.ms": timeout_ms,
                "linger.ms": 0,
            }
        )
        zombie.init_transactions(20)
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "timeout-reader",
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 50,
            }
        )
        consumer.assign([TopicPartition("orders", 0, 0)])
        plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
        try:
            started = time.monotonic()  # before AddPartitionsToTxn starts the transaction's clock
            zombie.begin_transaction()
            zombie.produce("orders", value=b"abandoned", partition=0)
            assert zombie.flush(20) == 0
            plain.produce("orders", value=b"after", partition=0)
            assert plain.flush(20) == 0
            held = fetch_once(bootstrap, "orders", 0)
            assert (held.high_watermark, held.last_stable_offset, held.values) == (2, 0, [])

            seen: list[bytes | None] = []
            limit = (timeout_ms + cleanup_ms + 3000) / 1000
            while not seen:
                assert time.monotonic() - started < limit, f"reader not released:\n{proc.log()}"
                message = consumer.poll(0.02)
                if message is not None and message.error() is None:
                    seen.append(message.value())
            released_after = time.monotonic() - started
            settle_until = time.monotonic() + 0.5
            while time.monotonic() < settle_until:
                message = consumer.poll(0.05)
                if message is not None and message.error() is None:
                    seen.append(message.value())
        finally:
            consumer.close()
        assert seen == [b"after"]  # the abandoned record was aborted, the later one released
        assert timeout_ms / 1000 <= released_after < limit, released_after
        assert log_layout(bootstrap, "orders", 0) == [b"abandoned", b"after", ABORT]
        described = wait_for_state(bootstrap, "slow", {"CompleteAbort"})
        assert described.producer_epoch == 1  # the timeout fenced the zombie's epoch 0
        assert "aborting transaction of 'slow': older than its timeout" in proc.log()

        with pytest.raises(KafkaException) as info:
            zombie.commit_transaction(20)
        error = info.value.args[0]
        assert error.code() == KafkaError._FENCED, error
        assert error.fatal()
        assert log_layout(bootstrap, "orders", 0) == [b"abandoned", b"after", ABORT]  # nothing more
        print(f"released after {released_after:.2f} s")


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
        with RawTxn(bootstrap) as raw:
            error, pid, epoch = raw.init("short-lived")
        assert (error, epoch) == (ErrorCode.NONE, 0)
        assert pid != first.producer_id


# --- 5. error codes through the raw client ------------------------------------------------------------------


def _hw(bootstrap: str, topic: str, partition: int) -> int:
    return latest_offset(bootstrap, topic, partition, READ_UNCOMMITTED)


def test_init_producer_id_timeout_bounds(shared_broker: BrokerProcess) -> None:
    with RawTxn(shared_broker.bootstrap) as raw:
        for version in (0, 4):
            for bad in (0, -1, 900_001):
                assert raw.init("bounds", bad, version=version)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        error, _, epoch = raw.init("bounds", 900_000)  # transaction.max.timeout.ms itself is fine
        assert (error, epoch) == (ErrorCode.NONE, 0)
        error, _, epoch = raw.init("bounds", 1)
        assert (error, epoch) == (ErrorCode.NONE, 1)


def test_add_partitions_with_unknown_topic_adds_nothing(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "add-known", 2)
    with RawTxn(bootstrap) as raw:
        error, pid, epoch = raw.init("adder")
        assert error == ErrorCode.NONE
        codes = raw.add("adder", pid, epoch, {"add-known": [0, 1], "add-missing": [0]})
        assert codes == {
            ("add-known", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("add-known", 1): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("add-missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        codes = raw.add("adder", pid, epoch, {"add-known": [0, 7]})  # a partition that does not exist
        assert codes == {
            ("add-known", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("add-known", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        # nothing was added: there is no transaction, and the partitions refuse transactional batches
        assert describe_transaction(bootstrap, "adder").transaction_state == "Empty"
        assert raw.end("adder", pid, epoch) == ErrorCode.INVALID_TXN_STATE
        assert raw.produce("adder", pid, epoch, "add-known", 0, b"x") == ErrorCode.INVALID_TXN_STATE
        assert _hw(bootstrap, "add-known", 0) == 0
        # a request naming only existing partitions works
        assert raw.add("adder", pid, epoch, {"add-known": [0, 1]}) == {
            ("add-known", 0): ErrorCode.NONE,
            ("add-known", 1): ErrorCode.NONE,
        }
        described = describe_transaction(bootstrap, "adder")
        assert described.transaction_state == "Ongoing"
        assert [(t.topic, sorted(t.partitions)) for t in described.topics] == [("add-known", [0, 1])]
        assert raw.end("adder", pid, epoch, commit=False) == ErrorCode.NONE


def test_end_txn_errors(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "end-errors", 1)
    with RawTxn(bootstrap) as raw:
        # an id the coordinator never saw
        assert raw.end("never-initialised", 12345, 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # an id that never started a transaction (initialised, nothing added)
        error, pid, epoch = raw.init("ender")
        assert (error, epoch) == (ErrorCode.NONE, 0)
        for commit in (True, False):
            assert raw.end("ender", pid, epoch, commit) == ErrorCode.INVALID_TXN_STATE
        assert raw.end("ender", pid + 1, epoch) == ErrorCode.INVALID_PRODUCER_ID_MAPPING

        # a second instance (no transaction open: answered at once) fences epoch 0
        error, pid2, epoch2 = raw.init("ender")
        assert (error, pid2, epoch2) == (ErrorCode.NONE, pid, 1)
        for version in range(4):
            want = ErrorCode.INVALID_PRODUCER_EPOCH if version < 2 else ErrorCode.PRODUCER_FENCED
            assert raw.end("ender", pid, 0, version=version) == want, version
        for version in (1, 2, 3):  # AddPartitionsToTxn downgrades the same way
            want = ErrorCode.INVALID_PRODUCER_EPOCH if version < 2 else ErrorCode.PRODUCER_FENCED
            assert raw.add("ender", pid, 0, {"end-errors": [0]}, version=version) == {
                ("end-errors", 0): want
            }, version

        # the current epoch can commit; a retried commit is fine; then abort is the wrong decision
        assert raw.add("ender", pid, 1, {"end-errors": [0]}) == {("end-errors", 0): ErrorCode.NONE}
        assert raw.produce("ender", pid, 1, "end-errors", 0, b"committed") == ErrorCode.NONE
        assert raw.end("ender", pid, 1, commit=True) == ErrorCode.NONE
        wait_for_state(bootstrap, "ender", {"CompleteCommit"})
        assert raw.end("ender", pid, 1, commit=True) == ErrorCode.NONE
        assert raw.end("ender", pid, 1, commit=False) == ErrorCode.INVALID_TXN_STATE
    assert log_layout(bootstrap, "end-errors", 0) == [b"committed", COMMIT]


def test_produce_txn_errors(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "produce-errors", 2)
    with RawTxn(bootstrap) as raw:
        error, pid, epoch = raw.init("writer")
        assert error == ErrorCode.NONE

        # KIP-890 part 1: a transactional batch to a partition not in the transaction is refused...
        assert (
            raw.produce("writer", pid, epoch, "produce-errors", 0, b"no-txn") == ErrorCode.INVALID_TXN_STATE
        )
        # ...also while a transaction is open on another partition
        assert raw.add("writer", pid, epoch, {"produce-errors": [0]}) == {
            ("produce-errors", 0): ErrorCode.NONE
        }
        assert (
            raw.produce("writer", pid, epoch, "produce-errors", 1, b"not-added")
            == ErrorCode.INVALID_TXN_STATE
        )
        assert _hw(bootstrap, "produce-errors", 1) == 0  # nothing appended
        # a transactional batch without a transactional id
        assert (
            raw.produce(None, pid, epoch, "produce-errors", 0, b"anonymous")
            == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        # under someone else's transactional id
        assert raw.init("bystander")[0] == ErrorCode.NONE
        assert (
            raw.produce("bystander", pid, epoch, "produce-errors", 0, b"borrowed")
            == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        )
        assert _hw(bootstrap, "produce-errors", 0) == 0

        assert raw.produce("writer", pid, epoch, "produce-errors", 0, b"ok") == ErrorCode.NONE
        # a second instance finds the transaction open: it is fenced (epoch 1) and aborted, and the
        # request (which Kafka answers CONCURRENT_TRANSACTIONS to retry) waits for that and gets epoch 2
        error, _, new_epoch = raw.init("writer")
        assert (error, new_epoch) == (ErrorCode.NONE, 2)
        # the old instance's next batch: its epoch is stale
        assert (
            raw.produce("writer", pid, epoch, "produce-errors", 0, b"late", sequence=1)
            == ErrorCode.INVALID_PRODUCER_EPOCH
        )
    assert log_batches(bootstrap, "produce-errors", 0) == [("data", pid, 0), (ABORT, pid, 1)]
    assert fetch_once(bootstrap, "produce-errors", 0).visible == []
    assert fetch_once(bootstrap, "produce-errors", 0, isolation=READ_UNCOMMITTED).values == [b"ok"]
    assert _hw(bootstrap, "produce-errors", 1) == 0


def test_init_producer_id_with_expected_epoch(shared_broker: BrokerProcess) -> None:
    """KIP-360: InitProducerId naming the current producer id and epoch bumps it; a retry of that bump
    (naming the previous epoch) gets the same epoch again; an older epoch or another producer id is
    fenced. With a transaction open, Kafka fences the open epoch, aborts, and then fences the caller too
    (which is why the Java client sends EndTxn before such a bump)."""
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "kip360", 1)
    with RawTxn(bootstrap) as raw:

        def bump(pid: int, epoch: int, version: int = 4) -> tuple[int, int, int]:
            response = raw.client.request(
                ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest("bumper", 60_000, pid, epoch)
            )
            return response.error_code, response.producer_id, response.producer_epoch

        error, pid, epoch = raw.init("bumper")
        assert (error, epoch) == (ErrorCode.NONE, 0)
        assert bump(pid, 0) == (ErrorCode.NONE, pid, 1)
        assert bump(pid, 0) == (ErrorCode.NONE, pid, 1)  # a retry of the same bump
        assert bump(pid, 1) == (ErrorCode.NONE, pid, 2)
        assert bump(pid, 0) == (ErrorCode.PRODUCER_FENCED, -1, -1)
        assert bump(pid, 0, version=3) == (ErrorCode.INVALID_PRODUCER_EPOCH, -1, -1)
        assert bump(pid + 100, 2) == (ErrorCode.PRODUCER_FENCED, -1, -1)

        assert raw.add("bumper", pid, 2, {"kip360": [0]}) == {("kip360", 0): ErrorCode.NONE}
        assert raw.produce("bumper", pid, 2, "kip360", 0, b"open") == ErrorCode.NONE
        assert bump(pid, 2) == (ErrorCode.PRODUCER_FENCED, -1, -1)
        described = wait_for_state(bootstrap, "bumper", {"CompleteAbort"})
        assert (described.producer_id, described.producer_epoch) == (pid, 3)
        assert bump(pid, 3) == (ErrorCode.NONE, pid, 4)
    assert log_batches(bootstrap, "kip360", 0) == [("data", pid, 2), (ABORT, pid, 3)]


def test_offsets_for_times_read_committed_stops_at_the_lso(shared_broker: BrokerProcess) -> None:
    """Kafka (`Partition.fetchOffsetForTimestamp`) answers a timestamp lookup only with an offset below
    the last fetchable offset: the LSO for read_committed. An offset inside or after an open transaction
    is "no offset" (-1, -1) for read_committed, while read_uncommitted finds it."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "by-time", 1)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    plain.produce("by-time", value=b"before", partition=0, timestamp=1_000)  # offset 0
    assert plain.flush(20) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "by-time", "linger.ms": 0})
    txn.init_transactions(20)
    txn.begin_transaction()
    txn.produce("by-time", value=b"open", partition=0, timestamp=2_000)  # offset 1 = the LSO
    assert txn.flush(20) == 0
    plain.produce("by-time", value=b"after", partition=0, timestamp=3_000)  # offset 2
    assert plain.flush(20) == 0
    try:
        assert fetch_once(bootstrap, "by-time", 0).last_stable_offset == 1
        assert list_offsets(bootstrap, "by-time", 0, 500, READ_COMMITTED) == (0, 1_000)
        for timestamp, found in ((1_500, (1, 2_000)), (2_500, (2, 3_000))):
            assert list_offsets(bootstrap, "by-time", 0, timestamp, READ_UNCOMMITTED) == found
        tp = TopicPartition("by-time", 0)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        try:
            assert consumer.offsets_for_times({tp: 500})[tp].offset == 0
            the_bug = consumer.offsets_for_times({tp: 1_500})[tp]
        finally:
            consumer.close()
        assert list_offsets(bootstrap, "by-time", 0, 1_500, READ_COMMITTED) == (-1, -1)
        assert list_offsets(bootstrap, "by-time", 0, 2_500, READ_COMMITTED) == (-1, -1)
        assert the_bug is None
    finally:
        txn.abort_transaction(20)


def list_offsets(
    bootstrap: str, topic: str, partition: int, timestamp: int, isolation: int
) -> tuple[int, int]:
    """ListOffsets v7 for one timestamp: (offset, timestamp)."""
    from exactly.protocol.messages.list_offsets import (
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
    )

    client = RawClient(bootstrap)
    try:
        response = client.request(
            ApiKey.LIST_OFFSETS,
            7,
            ListOffsetsRequest(
                -1, isolation, [ListOffsetsTopic(topic, [ListOffsetsPartition(partition, -1, timestamp)])]
            ),
        )
    finally:
        client.close()
    p = response.topics[0].partitions[0]
    assert p.error_code == ErrorCode.NONE, p
    return p.offset, p.timestamp


# --- many concurrent transactions, small segments --------------------------------------------------------


def read_committed_from(
    bootstrap: str, topic: str, partition: int, start: int, max_bytes: int
) -> list[bytes]:
    """Read from `start` to the LSO with raw read_committed Fetches, filtering as a client does: a batch
    of a producer listed in the response's aborted transactions (from its first offset on) is dropped
    until that producer's next marker."""
    from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
    from exactly.records.batch import iter_batches

    client = RawClient(bootstrap)
    try:
        offset, out = start, []
        while True:
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=max_bytes,
                isolation_level=READ_COMMITTED,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchTopic(topic, partitions=[FetchPartition(partition, -1, offset, -1, -1, max_bytes)])
                ],
            )
            data = client.request(ApiKey.FETCH, 12, request).responses[0].partitions[0]
            assert data.error_code == ErrorCode.NONE, data
            pending = sorted((a.first_offset, a.producer_id) for a in data.aborted_transactions or [])
            skipping: set[int] = set()
            progressed = False
            for batch in iter_batches(bytes(data.records or b""), allow_partial=True):
                if batch.last_offset < offset:
                    continue
                while pending and pending[0][0] <= batch.last_offset:
                    skipping.add(pending.pop(0)[1])
                if batch.attributes & ATTR_CONTROL:
                    skipping.discard(batch.producer_id)
                elif batch.producer_id not in skipping:
                    out += [r.value for r in batch.records() if r.offset >= offset and r.value is not None]
                offset = batch.last_offset + 1
                progressed = True
            if offset >= data.last_stable_offset or not progressed:
                assert offset == data.last_stable_offset == data.high_watermark, (offset, data)
                return out
    finally:
        client.close()


@pytest.mark.slow
def test_concurrent_transactions_across_segments(shared_broker: BrokerProcess) -> None:
    """Three transactional producers (random commits and aborts) and an idempotent one write to the same
    two partitions at once, with 600-byte segments so that transactions and their markers straddle
    segments (and their .txnindex files). From every offset, with tiny and large fetches, read_committed
    returns exactly the committed values in log order; all three clients' consumers agree."""
    import random
    import threading

    from confluent_kafka import Producer

    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "busy", 2, {"segment.bytes": "600"})
    committed: set[bytes] = set()
    aborted: set[bytes] = set()
    lock = threading.Lock()
    failures: list[BaseException] = []

    def transactional(n: int) -> None:
        try:
            rng = random.Random(n)
            producer = Producer(
                {"bootstrap.servers": bootstrap, "transactional.id": f"busy-{n}", "linger.ms": 2}
            )
            producer.init_transactions(20)
            for t in range(10):
                producer.begin_transaction()
                values = [f"t{n}-{t}-{i}".encode() for i in range(rng.randint(1, 4))]
                for value in values:
                    producer.produce("busy", value=value, partition=rng.randint(0, 1))
                assert producer.flush(20) == 0
                commit = rng.random() < 0.5
                (producer.commit_transaction if commit else producer.abort_transaction)(20)
                with lock:
                    (committed if commit else aborted).update(values)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    def idempotent() -> None:
        try:
            producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
            for i in range(30):
                producer.produce("busy", value=b"plain-%d" % i, partition=i % 2)
                assert producer.flush(20) == 0
                with lock:
                    committed.add(b"plain-%d" % i)
                time.sleep(0.01)
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=transactional, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=idempotent))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert committed
    assert aborted

    partitions = [("busy", 0), ("busy", 1)]
    for topic, partition in partitions:
        layout = log_layout(bootstrap, topic, partition)
        data = [v for v in layout if isinstance(v, bytes)]
        assert set(data) <= committed | aborted
        for start in range(len(layout)):
            expected = [v for v in layout[start:] if isinstance(v, bytes) and v in committed]
            for max_bytes in (1, 1 << 20):
                got = read_committed_from(bootstrap, topic, partition, start, max_bytes)
                assert got == expected, (topic, partition, start, max_bytes)
    n = len(committed)
    for client, read in CONSUMERS.items():
        assert sorted(read(bootstrap, partitions, "read_committed", n)) == sorted(committed), client
    everything = consume_values(bootstrap, partitions, "read_uncommitted", n + len(aborted), settle=0.5)
    assert sorted(everything) == sorted(committed | aborted)
