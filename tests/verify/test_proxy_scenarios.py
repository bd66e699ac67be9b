"""Targeted faults with the frame-aware proxy, real broker, confluent-kafka: a replayed Produce, a lost EndTxn
answer, an EndTxn that arrives after its transactional.id moved on (KAFKA-17754), a transactional Produce that
arrives after its transaction was aborted (KIP-890's late write), a delayed AddPartitionsToTxn, a copy whose
TxnOffsetCommit answer is lost, and a network partition.

Every client connection crosses the proxy (the broker advertises the proxy's address); the checks read the
broker directly with our own codecs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from exactly.errors import ErrorCode
from exactly.protocol.api import decode_response
from exactly.testing.processes import BrokerProcess, free_port
from exactly.verify.proxy import Action, FaultProxy, Rule
from tests.interop.support import create_topic, fetch_partition
from tests.interop.txn_support import (
    consume_values,
    describe_transaction,
    fetch_once,
    latest_offset,
    wait_for_state,
)

PRODUCE, ADD_PARTITIONS, END_TXN, TXN_OFFSET_COMMIT = 0, 24, 26, 28
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[FaultProxy, BrokerProcess]]:
    port = free_port()
    with FaultProxy(("127.0.0.1", port), seed=5) as proxy:
        settings = [
            f"advertised.listeners=127.0.0.1:{proxy.port}",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
        ]
        with BrokerProcess(tmp_path / "data", *settings, port=port) as broker:
            create_topic(broker.bootstrap, "t", 1)
            yield proxy, broker


def producer(proxy: FaultProxy, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 0, "acks": "all", **conf})


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def stored_values(broker: BrokerProcess) -> list[bytes]:
    dump = fetch_partition(broker.bootstrap, "t", 0)
    control = 0x20
    return [
        r.value for b in dump.batches if not b.attributes & control for r in b.records if r.value is not None
    ]


def test_a_replayed_produce_appends_nothing(proxied: tuple[FaultProxy, BrokerProcess]) -> None:
    proxy, _ = proxied
    proxy.add_rule(Rule(Action.DUPLICATE, frozenset({PRODUCE})))
    proxy.keep_responses(frozenset({PRODUCE}))
    p = producer(proxy, **{"enable.idempotence": True})
    for n in range(20):
        for i in range(10):
            p.produce("t", f"{n}-{i}".encode(), partition=0)
        assert p.flush(15) == 0
    duplicated = proxy.stats[f"duplicate key {PRODUCE}"]
    assert duplicated >= 20
    wait_until(lambda: proxy.stats["replayed"] >= duplicated, 20, proxy.describe())
    # every replay was answered with its original's offset, or refused: DUPLICATE_SEQUENCE_NUMBER, or (as
    # Kafka does for a batch older than the five the producer state caches) OUT_OF_ORDER_SEQUENCE_NUMBER
    answers: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
    for seen in list(proxy.seen):
        _, response = decode_response(seen.api_key, seen.api_version, seen.frame)
        part = response.responses[0].partition_responses[0]
        answers[seen.replay].append((part.error_code, part.base_offset))
    assert len(answers[True]) == duplicated
    originals = {offset for error, offset in answers[False] if error == ErrorCode.NONE}
    refused = {ErrorCode.DUPLICATE_SEQUENCE_NUMBER, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER}
    for error, offset in answers[True]:
        assert error in refused or (error == ErrorCode.NONE and offset in originals), (error, offset)


def test_a_lost_end_txn_answer_commits_once(proxied: tuple[FaultProxy, BrokerProcess]) -> None:
    proxy, broker = proxied
    p = producer(proxy, **{"transactional.id": "lost-end", "request.timeout.ms": 3000})
    p.init_transactions(15)
    proxy.add_rule(Rule(Action.DROP_RESPONSE, frozenset({END_TXN}), limit=1))
    p.begin_transaction()
    for i in range(10):
        p.produce("t", f"a{i}".encode(), partition=0)
    try:
        p.commit_transaction(
            20
        )  # librdkafka retries EndTxn on a new connection: the broker answers the retry
    except KafkaException:  # or the client gives up: then a new instance goes on
        p = producer(proxy, **{"transactional.id": "lost-end"})
        p.init_transactions(15)
    assert proxy.stats[f"drop-response key {END_TXN}"] == 1
    p.begin_transaction()
    p.produce("t", b"b0", partition=0)
    p.commit_transaction(15)
    values = consume_values(broker.bootstrap, [("t", 0)], "read_committed", 11)
    assert sorted(values) == sorted([f"a{i}".encode() for i in range(10)] + [b"b0"])


def test_a_produce_arriving_after_its_abort_is_refused(proxied: tuple[FaultProxy, BrokerProcess]) -> None:
    """KIP-890: the transaction's Produce is held in the network while the client gives up and aborts; when
    it arrives, it must not be appended to a transaction that no longer exists (nor hang the LSO)."""
    proxy, broker = proxied
    conf = {"transactional.id": "late", "request.timeout.ms": 2000, "transaction.timeout.ms": 4000}
    p = producer(proxy, **conf, **{"message.timeout.ms": 3000})
    p.init_transactions(15)
    proxy.add_rule(Rule(Action.HOLD, frozenset({PRODUCE}), limit=1))
    p.begin_transaction()
    p.produce("t", b"late", partition=0)
    p.flush(5)  # held: it times out
    wait_until(lambda: proxy.held() == 1, 10, proxy.describe())
    with contextlib.suppress(KafkaException):  # an error here: the next instance aborts it
        p.abort_transaction(20)
    del p
    p2 = producer(proxy, **{"transactional.id": "late"})
    p2.init_transactions(20)
    assert proxy.release_held() == 1
    wait_until(lambda: proxy.stats["released"] == 1, 10, proxy.describe())
    p2.begin_transaction()
    p2.produce("t", b"after", partition=0)
    p2.commit_transaction(15)
    wait_until(
        lambda: (
            latest_offset(broker.bootstrap, "t", 0, READ_COMMITTED)
            == latest_offset(broker.bootstrap, "t", 0, READ_UNCOMMITTED)
        ),
        15,
        "the late write left the partition's LSO behind its HWM",
    )
    assert consume_values(broker.bootstrap, [("t", 0)], "read_committed", 1) == [b"after"]
    assert fetch_once(broker.bootstrap, "t", 0, isolation=READ_COMMITTED).visible == [b"after"]
    stored = fetch_once(broker.bootstrap, "t", 0, isolation=READ_UNCOMMITTED).values
    assert stored.count(b"late") <= 1  # refused, or appended once and aborted
    assert stored.count(b"after") == 1


def test_a_delayed_add_partitions_still_commits_once(proxied: tuple[FaultProxy, BrokerProcess]) -> None:
    proxy, broker = proxied
    proxy.add_rule(Rule(Action.DELAY, frozenset({ADD_PARTITIONS}), delay_ms=1500))
    p = producer(proxy, **{"transactional.id": "slow-add"})
    p.init_transactions(15)
    for n in range(3):
        p.begin_transaction()
        p.produce("t", f"d{n}".encode(), partition=0)
        p.commit_transaction(20)
    assert proxy.stats[f"delay key {ADD_PARTITIONS}"] == 3
    assert sorted(consume_values(broker.bootstrap, [("t", 0)], "read_committed", 3)) == [b"d0", b"d1", b"d2"]


def test_a_partition_longer_than_the_request_timeout_heals(proxied: tuple[FaultProxy, BrokerProcess]) -> None:
    proxy, broker = proxied
    p = producer(proxy, **{"enable.idempotence": True, "request.timeout.ms": 1500})
    p.produce("t", b"before", partition=0)
    assert p.flush(15) == 0
    proxy.blackhole(True)
    for i in range(5):
        p.produce("t", f"during{i}".encode(), partition=0)
    assert p.flush(3) > 0  # nothing gets through
    proxy.blackhole(False)
    assert p.flush(30) == 0
    values = stored_values(broker)
    assert values == [b"before"] + [f"during{i}".encode() for i in range(5)]


def end_txn_answers(proxy: FaultProxy) -> list[tuple[int, int]]:
    """(request version, error code) of the EndTxn responses the proxy kept (see keep_responses)."""
    out = []
    for seen in list(proxy.seen):
        if seen.api_key == END_TXN:
            _, response = decode_response(seen.api_key, seen.api_version, seen.frame)
            out.append((seen.api_version, response.error_code))
    return out


@pytest.mark.parametrize("moved_on_by", ["a new producer", "the transaction timeout"])
def test_an_end_txn_arriving_after_the_id_moved_on_is_fenced(
    proxied: tuple[FaultProxy, BrokerProcess], moved_on_by: str
) -> None:
    """KAFKA-17754: EndTxn(commit) of T1 is held in the network while the transactional.id moves on (a second
    producer re-initialises it and opens T2, or the coordinator aborts T1 on its timeout). When the old
    EndTxn arrives it must be refused with PRODUCER_FENCED, T1 stays aborted, and T2 is neither committed
    nor aborted by it: nothing half-visible."""
    proxy, broker = proxied
    txid = "k17754"
    proxy.keep_responses(frozenset({END_TXN}))
    timeout_ms = 3000 if moved_on_by == "the transaction timeout" else 60000
    p1 = producer(
        proxy, **{"transactional.id": txid, "transaction.timeout.ms": timeout_ms, "request.timeout.ms": 60000}
    )
    p1.init_transactions(15)
    p1.begin_transaction()
    for i in range(5):
        p1.produce("t", f"t1-{i}".encode(), partition=0)
    assert p1.flush(15) == 0
    hold = proxy.add_rule(Rule(Action.HOLD, frozenset({END_TXN})))  # and librdkafka's retries of it
    with pytest.raises(KafkaException):  # the commit's request is held: the call times out
        p1.commit_transaction(1)
    wait_until(lambda: proxy.held() >= 1, 10, proxy.describe())
    old_epoch = describe_transaction(broker.bootstrap, txid).producer_epoch
    p2 = None
    if moved_on_by == "a new producer":
        p2 = producer(proxy, **{"transactional.id": txid})
        p2.init_transactions(30)
        p2.begin_transaction()
        for i in range(3):
            p2.produce("t", f"t2-{i}".encode(), partition=0)
        assert p2.flush(15) == 0
        before = wait_for_state(broker.bootstrap, txid, {"Ongoing"})
    else:
        before = wait_for_state(broker.bootstrap, txid, {"CompleteAbort"}, timeout=30)
    assert before.producer_epoch > old_epoch
    assert end_txn_answers(proxy) == []
    proxy.remove_rule(hold)
    late = proxy.release_held(END_TXN)
    assert late >= 1
    wait_until(lambda: len(end_txn_answers(proxy)) == late, 15, proxy.describe())
    for version, error in end_txn_answers(proxy):
        # PRODUCER_FENCED, which versions below 2 know as INVALID_PRODUCER_EPOCH
        assert error == (ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH)
    after = describe_transaction(broker.bootstrap, txid)
    assert (after.transaction_state, after.producer_epoch) == (
        before.transaction_state,
        before.producer_epoch,
    )
    committed = fetch_once(broker.bootstrap, "t", 0, isolation=READ_COMMITTED)
    assert committed.visible == []
    if p2 is None:  # the id goes on with a new producer
        p2 = producer(proxy, **{"transactional.id": txid})
        p2.init_transactions(30)
        p2.begin_transaction()
        for i in range(3):
            p2.produce("t", f"t2-{i}".encode(), partition=0)
    else:  # T2 holds the LSO at its first offset
        assert committed.last_stable_offset == 6
    p2.commit_transaction(15)
    t1 = [f"t1-{i}".encode() for i in range(5)]
    t2 = [f"t2-{i}".encode() for i in range(3)]
    assert fetch_once(broker.bootstrap, "t", 0, isolation=READ_COMMITTED).visible == t2
    assert fetch_once(broker.bootstrap, "t", 0, isolation=READ_UNCOMMITTED).values == t1 + t2
    assert consume_values(broker.bootstrap, [("t", 0)], "read_committed", 3) == t2


def test_a_copy_with_slow_add_partitions_and_a_lost_offset_commit_answer_copies_once(
    proxied: tuple[FaultProxy, BrokerProcess],
) -> None:
    """Consume-transform-produce, offsets sent to the transaction: AddPartitionsToTxn delayed by 1 s, the
    answer to one TxnOffsetCommit lost. A failed transaction is aborted and the copier rewinds to the
    committed offsets; the output holds every input record exactly once."""
    proxy, broker = proxied
    create_topic(broker.bootstrap, "out", 1)
    source = producer(proxy)
    inputs = [f"in-{i}".encode() for i in range(60)]
    for v in inputs:
        source.produce("t", v, partition=0)
    assert source.flush(15) == 0
    proxy.add_rule(Rule(Action.DELAY, frozenset({ADD_PARTITIONS}), delay_ms=1000))
    proxy.add_rule(Rule(Action.DROP_RESPONSE, frozenset({TXN_OFFSET_COMMIT}), limit=1))
    consumer = Consumer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "group.id": "copier",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    copier = producer(proxy, **{"transactional.id": "copier", "request.timeout.ms": 5000})
    copier.init_transactions(15)
    consumer.assign([TopicPartition("t", 0)])
    position, failures = 0, 0
    deadline = time.monotonic() + 90
    try:
        while position < len(inputs):
            assert time.monotonic() < deadline, proxy.describe()
            batch = [m for m in consumer.consume(10, 1.0) if m.error() is None]
            if not batch:
                continue
            copier.begin_transaction()
            try:
                for m in batch:
                    copier.produce("out", b"copy-" + m.value(), partition=0)
                next_offset = batch[-1].offset() + 1
                offsets = [TopicPartition("t", 0, next_offset)]
                copier.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
                copier.commit_transaction(30)
                position = next_offset
            except KafkaException as e:
                failures += 1
                error: KafkaError = e.args[0]
                assert not error.fatal(), error
                copier.abort_transaction(30)
                committed = consumer.committed([TopicPartition("t", 0)], 15)[0].offset
                position = max(committed, 0)
                consumer.seek(TopicPartition("t", 0, position))
    finally:
        consumer.close()
    assert proxy.stats[f"drop-response key {TXN_OFFSET_COMMIT}"] == 1
    assert proxy.stats[f"delay key {ADD_PARTITIONS}"] >= 1
    out = consume_values(broker.bootstrap, [("out", 0)], "read_committed", len(inputs))
    assert out == [b"copy-" + v for v in inputs], f"{failures} failed transactions"


class AbortedRead(AssertionError):
    """Records of an aborted transaction are visible at read_committed."""


@pytest.mark.xfail(
    strict=True,
    raises=AbortedRead,
    reason="transaction version 1 cannot tell a late EndTxn of T1 from T2's own: same producer id and epoch "
    "(Kafka fixed KAFKA-17754 with transaction version 2, an epoch bump at every commit: EndTxn v5, which "
    "exactly serves (tests/interop/test_transactions_tv2.py), but librdkafka 2.16 is a TV1 client: it "
    "sends EndTxn v1)",
)
def test_a_late_end_txn_of_the_same_epoch_does_not_end_the_next_transaction(
    proxied: tuple[FaultProxy, BrokerProcess],
) -> None:
    """KAFKA-17754 as reported: the EndTxn(commit) of T1 is held; librdkafka times the request out, commits T1
    with a retry on a new connection, and begins T2 with the same epoch. The first EndTxn then arrives. It
    must not commit T2: the application aborts T2, so none of T2 may ever be visible."""
    proxy, broker = proxied
    txid = "same-epoch"
    proxy.keep_responses(frozenset({END_TXN}))
    p = producer(proxy, **{"transactional.id": txid, "socket.timeout.ms": 3000})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(5):
        p.produce("t", f"t1-{i}".encode(), partition=0)
    assert p.flush(15) == 0
    proxy.add_rule(Rule(Action.HOLD, frozenset({END_TXN}), limit=1))
    p.commit_transaction(30)  # the held request times out; the retry commits T1
    assert proxy.held() == 1
    p.begin_transaction()
    for i in range(3):
        p.produce("t", f"t2-{i}".encode(), partition=0)
    assert p.flush(15) == 0
    wait_for_state(broker.bootstrap, txid, {"Ongoing"})
    assert proxy.release_held() == 1
    wait_until(lambda: len(end_txn_answers(proxy)) == 2, 15, proxy.describe())
    with contextlib.suppress(KafkaException):
        p.abort_transaction(15)
    t1 = [f"t1-{i}".encode() for i in range(5)]
    visible = fetch_once(broker.bootstrap, "t", 0, isolation=READ_COMMITTED).visible
    assert visible[:5] == t1
    if visible != t1:  # only this anomaly is the expected failure; any other one fails the test
        raise AbortedRead(f"the aborted T2 is visible: {visible[5:]}")
