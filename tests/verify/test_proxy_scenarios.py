"""Targeted faults with the frame-aware proxy, real broker, confluent-kafka: a replayed Produce, a lost EndTxn
answer, a transactional Produce that arrives after its transaction was aborted (KIP-890's late write), a
delayed AddPartitionsToTxn, and a network partition.

Every client connection crosses the proxy (the broker advertises the proxy's address); the checks read the
broker directly with our own codecs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from exactly.verify.processes import BrokerProcess, free_port
from exactly.verify.proxy import Action, FaultProxy, Rule
from tests.interop.support import create_topic, fetch_partition
from tests.interop.txn_support import consume_values, latest_offset

PRODUCE, ADD_PARTITIONS, END_TXN = 0, 24, 26
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
    proxy, broker = proxied
    proxy.add_rule(Rule(Action.DUPLICATE, frozenset({PRODUCE})))
    p = producer(proxy, **{"enable.idempotence": True})
    for n in range(20):
        for i in range(10):
            p.produce("t", f"{n}-{i}".encode(), partition=0)
        assert p.flush(15) == 0
    duplicated = proxy.stats[f"duplicate key {PRODUCE}"]
    assert duplicated >= 20
    wait_until(lambda: proxy.stats["replayed"] >= duplicated, 20, proxy.describe())
    values = stored_values(broker)
    assert len(values) == 200
    assert sorted(values) == sorted(f"{n}-{i}".encode() for n in range(20) for i in range(10))


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
