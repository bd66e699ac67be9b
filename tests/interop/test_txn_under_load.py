"""Issue 10 item 8: librdkafka transactional producers died with a fatal INVALID_TXN_STATE under load.

Cause (measured with the broker's DEBUG trace): `abort_transaction()` right after `produce()` sends
EndTxn(abort) as soon as librdkafka has *sent* an AddPartitionsToTxn for the transaction
(`txn_req_cnt`), pipelined behind it on the coordinator connection. Under load the previous commit's
markers were still being written, so that AddPartitionsToTxn waited for CompleteCommit (the
CONCURRENT_TRANSACTIONS wait) while the EndTxn, run concurrently, overtook it, found PrepareCommit and
answered INVALID_TXN_STATE; then the AddPartitions completed and left the transaction Ongoing until the
timeout scan fenced the (already dead) producer. Now one id's requests run in arrival order, EndTxn
waits while markers are written (Kafka's pending CompleteX), and the abort of a transaction whose
AddPartitions was answered CONCURRENT_TRANSACTIONS is done instead of INVALID_TXN_STATE.

`test_abort_behind_a_waiting_add_partitions` forces the race with slow markers
(`exactly.debug.marker.delay.ms`) for librdkafka, and shows that kafka-python and aiokafka, which retry
the AddPartitionsToTxn before they send EndTxn, get a real abort; `test_soak_under_cpu_load` is the
reported scenario, with two busy-loop processes on the machine.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess
from tests.interop.support import create_topic
from tests.interop.txn_soak import run_soak
from tests.interop.txn_support import consume_values, describe_transaction, wait_for_state

pytestmark = [pytest.mark.interop, pytest.mark.slow]

ENDED = {"Empty", "CompleteCommit", "CompleteAbort"}
# the broker's DEBUG trace of an AddPartitionsToTxn told to wait for the previous commit's markers
ADD_REFUSED = r"ADD_PARTITIONS_TO_TXN v\d \([^)]*\) of 'app': CONCURRENT_TRANSACTIONS"


def _wait_for_log(broker: BrokerProcess, pattern: str, after: int, timeout: float = 30.0) -> int:
    """Wait until the broker log has a line matching `pattern` past character `after`; its end."""
    deadline = time.monotonic() + timeout
    while True:
        text = broker.full_log()
        match = re.compile(pattern).search(text, after)
        if match is not None:
            return match.end()
        assert time.monotonic() < deadline, f"no {pattern!r} in the broker log:\n{text[after:][-3000:]}"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("marker_delay_ms", "state_after_abort"),
    [
        (300, "CompleteAbort"),  # the AddPartitions completes in its wait: a real abort follows it
        (1500, "CompleteCommit"),  # it is answered CONCURRENT_TRANSACTIONS: nothing to abort
    ],
)
def test_abort_behind_a_waiting_add_partitions(
    tmp_path: Path, marker_delay_ms: int, state_after_abort: str
) -> None:
    from confluent_kafka import Producer

    settings = (f"exactly.debug.marker.delay.ms={marker_delay_ms}",)
    with BrokerProcess(tmp_path / "data", *settings, log_level="DEBUG") as broker:
        create_topic(broker.bootstrap, "t", 1)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "app", "linger.ms": 2}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("t", b"committed-1")
        producer.commit_transaction(30)  # answered at PrepareCommit; the markers take marker_delay_ms
        seen = len(broker.full_log())
        producer.begin_transaction()
        for i in range(50):
            producer.produce("t", f"aborted-{i}".encode())
        # The AddPartitionsToTxn reached the coordinator and waits for the commit to complete.
        _wait_for_log(broker, ADD_REFUSED, seen)
        producer.abort_transaction(30)  # librdkafka sends EndTxn(abort) behind it (txn_req_cnt > 0)
        wait_for_state(broker.bootstrap, "app", {state_after_abort}, timeout=30)  # never Ongoing
        log = broker.full_log()[seen:]
        assert "INVALID_TXN_STATE" not in log
        assert re.search(r"END_TXN v\d \([^)]*\) abort of 'app'", log), "no EndTxn(abort) was sent"
        producer.begin_transaction()
        producer.produce("t", b"committed-2")
        producer.commit_transaction(30)
        producer.flush(10)
        values = consume_values(broker.bootstrap, [("t", 0)], "read_committed", 2)
        assert values == [b"committed-1", b"committed-2"]
        wait_for_state(broker.bootstrap, "app", {"CompleteCommit"}, timeout=30)


def _kafka_python_abort_behind_slow_markers(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="app", linger_ms=2)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"committed-1")
    producer.commit_transaction()
    seen = len(broker.full_log())
    producer.begin_transaction()
    for i in range(50):
        producer.send("t", f"aborted-{i}".encode())
    _wait_for_log(broker, ADD_REFUSED, seen)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("t", b"committed-2")
    producer.commit_transaction()
    producer.close()


async def _aiokafka_abort_behind_slow_markers(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="app", linger_ms=2)
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send("t", b"committed-1")
        await producer.commit_transaction()
        seen = len(broker.full_log())
        await producer.begin_transaction()
        for i in range(50):
            await producer.send("t", f"aborted-{i}".encode())
        await asyncio.to_thread(_wait_for_log, broker, ADD_REFUSED, seen)
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send("t", b"committed-2")
        await producer.commit_transaction()
    finally:
        await producer.stop()


@pytest.mark.parametrize("marker_delay_ms", [300, 1500])
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_other_clients_abort_behind_slow_markers(tmp_path: Path, client: str, marker_delay_ms: int) -> None:
    """kafka-python and aiokafka retry the refused AddPartitionsToTxn until the commit completes and
    only then send EndTxn(abort): a real abort of the (empty) transaction."""
    settings = (f"exactly.debug.marker.delay.ms={marker_delay_ms}",)
    with BrokerProcess(tmp_path / "data", *settings, log_level="DEBUG") as broker:
        create_topic(broker.bootstrap, "t", 1)
        if client == "kafka-python":
            _kafka_python_abort_behind_slow_markers(broker)
        else:
            asyncio.run(_aiokafka_abort_behind_slow_markers(broker))
        values = consume_values(broker.bootstrap, [("t", 0)], "read_committed", 2)
        assert values == [b"committed-1", b"committed-2"]
        ends = re.findall(r"END_TXN v\d \([^)]*\) (commit|abort) of 'app': (\w+)", broker.full_log())
        assert ends == [("commit", "NONE"), ("abort", "NONE"), ("commit", "NONE")]
        wait_for_state(broker.bootstrap, "app", {"CompleteCommit"}, timeout=30)


def _busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def test_soak_under_cpu_load(tmp_path: Path) -> None:
    """Three librdkafka transactional producers, every fifth transaction aborted right after produce(),
    a read_committed consumer, two busy loops hogging the two cores, 60 s."""
    with BrokerProcess(tmp_path / "data") as broker:
        hogs = _busy_loops(2)
        try:
            outcome = run_soak(broker.bootstrap, seconds=60)
        finally:
            for hog in hogs:
                hog.kill()
            for hog in hogs:
                hog.wait(10)
        summary = outcome.summary()
        assert [p.fatal for p in outcome.producers] == [None, None, None], summary
        for p in outcome.producers:
            assert len(p.committed) >= 10, summary
            assert p.aborted, summary
        # read_committed saw every committed record once and nothing else (no aborted record).
        expected = outcome.expected()
        assert outcome.consumed == expected, {
            "missing": sum((expected - outcome.consumed).values()),
            "unexpected": sorted(outcome.consumed - expected)[:5],
            **summary,
        }
        # No transaction the clients ended is left open on the coordinator (PrepareX is only the last
        # commit's markers being written; Ongoing would stay until the timeout scan).
        deadline = time.monotonic() + 30
        while True:
            states = {
                p.transactional_id: describe_transaction(
                    broker.bootstrap, p.transactional_id
                ).transaction_state
                for p in outcome.producers
            }
            assert "Ongoing" not in states.values(), states
            if set(states.values()) <= ENDED:
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.05)
        assert "older than its timeout" not in broker.full_log()
