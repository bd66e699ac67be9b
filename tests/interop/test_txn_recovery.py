"""kill -9 of the broker at each step of EndTxn, and with a transaction open (issue 6, recovery).

The broker setting `exactly.debug.end.txn.pause=<step>` parks every marker writer at one step, after the
client already has its answer: `prepare-written` (PrepareCommit/PrepareAbort durable, no marker yet),
`first-marker-written` (one partition has its marker), `markers-written` (every marker durable,
CompleteCommit/CompleteAbort not written). The broker is killed there and restarted without the setting:
the coordinator reloads `__transaction_state` and finishes what it promised. A transaction whose commit
returned is then fully visible to read_committed consumers, an aborted one never is, and nothing hangs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_transactions import ListTransactionsRequest
from tests.interop.broker import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic
from tests.interop.txn_support import READ_UNCOMMITTED, consume_values, fetch_once, wait_for_state

pytestmark = [pytest.mark.interop, pytest.mark.slow]

PARTITIONS = [("left", 0), ("left", 1), ("right", 0), ("right", 1)]


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path / "data", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"
    )
    try:
        yield broker
    finally:
        broker.kill()


def wait_for_log(proc: BrokerProcess, text: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in proc.log():
        assert time.monotonic() < deadline, f"{text!r} not in the broker log:\n{proc.log()}"
        time.sleep(0.02)


def restart_after_kill(proc: BrokerProcess) -> None:
    proc.kill()
    proc.settings = ["transaction.abort.timed.out.transaction.cleanup.interval.ms=500"]
    proc.start()


def open_transactions(bootstrap: str) -> list[tuple[str, str]]:
    client = RawClient(bootstrap)
    try:
        response = client.request(ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest())
    finally:
        client.close()
    return [
        (t.transactional_id, t.transaction_state)
        for t in response.transaction_states
        if t.transaction_state not in ("Empty", "CompleteCommit", "CompleteAbort")
    ]


def run_transaction(bootstrap: str, txn_id: str, commit: bool, tag: str) -> list[bytes]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    producer.init_transactions(20)
    producer.begin_transaction()
    values = []
    for topic, partition in PARTITIONS:
        for i in range(3):
            value = f"{tag}-{topic}-{partition}-{i}".encode()
            producer.produce(topic, value=value, partition=partition)
            values.append(value)
    assert producer.flush(20) == 0
    if commit:
        producer.commit_transaction(20)  # returns once PrepareCommit is durable
    else:
        producer.abort_transaction(20)
    return values


@pytest.mark.parametrize("step", ["prepare-written", "first-marker-written", "markers-written"])
def test_commit_survives_kill_at_each_step(proc: BrokerProcess, step: str) -> None:
    proc.settings.append(f"exactly.debug.end.txn.pause={step}")
    proc.start()
    create_topic(proc.bootstrap, "left", 2)
    create_topic(proc.bootstrap, "right", 2)
    values = run_transaction(proc.bootstrap, "survivor", commit=True, tag=step)
    wait_for_log(proc, f"parked at {step}")
    markers_before = sum(
        fetch_once(proc.bootstrap, t, p, isolation=READ_UNCOMMITTED).markers for t, p in PARTITIONS
    )
    assert markers_before == {"prepare-written": 0, "first-marker-written": 1, "markers-written": 4}[step]

    restart_after_kill(proc)
    assert sorted(consume_values(proc.bootstrap, PARTITIONS, "read_committed", len(values))) == sorted(values)
    wait_for_state(proc.bootstrap, "survivor", {"CompleteCommit"})
    assert open_transactions(proc.bootstrap) == []
    for topic, partition in PARTITIONS:
        fetched = fetch_once(proc.bootstrap, topic, partition)
        assert fetched.last_stable_offset == fetched.high_watermark
        assert fetched.markers >= 1  # a marker rewritten after the restart is harmless

    # the application starts again with the same transactional.id and carries on
    more = run_transaction(proc.bootstrap, "survivor", commit=True, tag="again")
    expected = sorted(values + more)
    assert sorted(consume_values(proc.bootstrap, PARTITIONS, "read_committed", len(expected))) == expected


def test_abort_survives_kill_before_the_markers(proc: BrokerProcess) -> None:
    proc.settings.append("exactly.debug.end.txn.pause=prepare-written")
    proc.start()
    create_topic(proc.bootstrap, "left", 2)
    create_topic(proc.bootstrap, "right", 2)
    values = run_transaction(proc.bootstrap, "quitter", commit=False, tag="aborted")
    wait_for_log(proc, "parked at prepare-written")
    restart_after_kill(proc)
    wait_for_state(proc.bootstrap, "quitter", {"CompleteAbort"})
    for topic, partition in PARTITIONS:
        fetched = fetch_once(proc.bootstrap, topic, partition)
        assert fetched.visible == []
        assert fetched.markers == 1
        assert fetched.last_stable_offset == fetched.high_watermark
    uncommitted = consume_values(proc.bootstrap, PARTITIONS, "read_uncommitted", len(values))
    assert sorted(uncommitted) == sorted(values)
    assert consume_values(proc.bootstrap, PARTITIONS, "read_committed", 0) == []


def test_open_transaction_is_aborted_after_a_kill(proc: BrokerProcess) -> None:
    from confluent_kafka import Producer

    proc.start()
    create_topic(proc.bootstrap, "left", 2)
    producer = Producer(
        {"bootstrap.servers": proc.bootstrap, "transactional.id": "orphan", "transaction.timeout.ms": 3000}
    )
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("left", value=b"orphaned", partition=0)
    assert producer.flush(20) == 0
    restart_after_kill(proc)
    started = time.monotonic()
    plain = Producer({"bootstrap.servers": proc.bootstrap, "enable.idempotence": True})
    plain.produce("left", value=b"later", partition=0)
    assert plain.flush(20) == 0
    while (fetched := fetch_once(proc.bootstrap, "left", 0)).last_stable_offset < fetched.high_watermark:
        assert time.monotonic() - started < 10, "the open transaction was not aborted after the restart"
        time.sleep(0.05)
    assert fetched.visible == [b"later"]
    assert wait_for_state(proc.bootstrap, "orphan", {"CompleteAbort"}).producer_epoch == 1
