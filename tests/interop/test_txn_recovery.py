"""kill -9 of the broker at each step of EndTxn, and with a transaction open (recovery of transactions).

The broker setting `exactly.debug.end.txn.pause=<step>` parks every marker writer at one step, after the
client already has its answer: `prepare-written` (PrepareCommit/PrepareAbort durable, no marker yet),
`first-marker-written` (one partition has its marker), `markers-written` (every marker durable,
CompleteCommit/CompleteAbort not written). The broker is killed there and restarted without the setting:
the coordinator reloads `__transaction_state` and finishes what it promised. A transaction whose commit
returned is then fully visible to read_committed consumers — its data and the consumer offsets it carried
(send_offsets_to_transaction, a marker on `__consumer_offsets`) — an aborted one never is, the
coordinator's view (kafka-python's admin client, as `exactly txn` uses it) shows it completed, no
partition keeps an open transaction (`exactly txn find-hanging`'s check), and the application carries
on with the same transactional.id. A transaction left open by a crash is aborted once its timeout
passes, which releases read_committed consumers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.group.partitioning import partition_for
from exactly.testing.processes import BrokerProcess
from tests.interop.support import create_topic
from tests.interop.txn_support import READ_UNCOMMITTED, fetch_once

pytestmark = [pytest.mark.interop, pytest.mark.slow]

PARTITIONS = [("left", 0), ("left", 1), ("right", 0), ("right", 1)]
CLEANUP = "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"
PAUSE = "exactly.debug.end.txn.pause"
ACTIVE = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
GROUP = "recovering-app"
OFFSETS_PARTITION = ("__consumer_offsets", partition_for(GROUP, 50))  # offsets.topic.num.partitions
OFFSET_OF = {"prepare-written": 11, "first-marker-written": 22, "markers-written": 33}


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", CLEANUP)
    try:
        yield broker
    finally:
        broker.kill()


def start_with_topics(proc: BrokerProcess, pause: str | None) -> None:
    proc.settings = [CLEANUP] + ([f"{PAUSE}={pause}"] if pause else [])
    proc.start()
    create_topic(proc.bootstrap, "left", 2)
    create_topic(proc.bootstrap, "right", 2)
    create_topic(proc.bootstrap, "source", 1)  # the input whose offsets the transactions commit


def log_size(proc: BrokerProcess) -> int:
    return proc.log_path.stat().st_size if proc.log_path.exists() else 0


def wait_for_pause(proc: BrokerProcess, step: str, since: int, timeout: float = 10.0) -> str:
    """The broker's WARNING line that a marker job parked at `step` (written after byte `since`)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(proc.log_path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        for line in text.splitlines():
            if PAUSE in line and f"parked at {step}" in line:
                assert "WARNING" in line, line
                return line
        assert time.monotonic() < deadline, f"no {PAUSE} line for {step}:\n{proc.log()}"
        time.sleep(0.02)


def kill_and_restart(proc: BrokerProcess) -> None:
    """kill -9, then start again without the pause so that recovery can finish the job."""
    proc.kill()
    proc.settings = [CLEANUP]
    proc.start()


def run_transaction(
    bootstrap: str, txn_id: str, *, commit: bool, tag: str, source_offset: int | None = None
) -> list[tuple[bytes, bytes]]:
    """One transaction with 3 records on each partition of PARTITIONS (and, with `source_offset`, the
    offset of `source`-0 for GROUP); returns the (key, value) pairs once commit/abort returned."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    producer.init_transactions(20)
    producer.begin_transaction()
    records = []
    for topic, partition in PARTITIONS:
        for i in range(3):
            key, value = f"{topic}-{partition}-{i}".encode(), f"{tag}-{topic}-{partition}-{i}".encode()
            producer.produce(topic, key=key, value=value, partition=partition)
            records.append((key, value))
    assert producer.flush(20) == 0
    if source_offset is not None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        try:
            producer.send_offsets_to_transaction(
                [TopicPartition("source", 0, source_offset)], consumer.consumer_group_metadata(), 20
            )
        finally:
            consumer.close()
    if commit:
        producer.commit_transaction(20)  # returns once PrepareCommit is durable
    else:
        producer.abort_transaction(20)
    return records


def read_all(
    bootstrap: str, isolation: str, expected: int = 0, timeout: float = 20.0
) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of PARTITIONS that a consumer with `isolation` gets: at least `expected`
    records, and up to the end of each partition (read_committed: its last stable offset, where
    librdkafka reports the end too, hence `expected` to wait for an open transaction to end)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([TopicPartition(t, p, 0) for t, p in PARTITIONS])
        records: list[tuple[bytes, bytes]] = []
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(PARTITIONS) or len(records) < expected:
            assert time.monotonic() < deadline, (
                f"{isolation} reader stuck with {len(records)} records, at the end of {at_end}"
            )
            message = consumer.poll(0.1)
            if message is None:
                continue
            tp = (message.topic(), message.partition())
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(tp)
                continue
            at_end.discard(tp)
            records.append((message.key(), message.value()))
        return records
    finally:
        consumer.close()


def committed_source_offset(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",  # OffsetFetch require_stable
        }
    )
    try:
        offset: int = consumer.committed([TopicPartition("source", 0)], 20)[0].offset
        return offset
    finally:
        consumer.close()


def admin(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def wait_until_complete(bootstrap: str, txn_id: str, state: str, timeout: float = 5.0) -> Any:
    """What `exactly txn describe` / `list` / `find-hanging` check, through kafka-python's admin client:
    `txn_id` reaches `state` within `timeout`, no transactional id is Ongoing or Prepare*, and no
    partition of PARTITIONS has a producer with an open transaction."""
    from kafka import TopicPartition

    client = admin(bootstrap)
    try:
        deadline = time.monotonic() + timeout
        while True:
            described = client.describe_transactions([txn_id])[txn_id]
            if described.state.value == state:
                break
            assert time.monotonic() < deadline, f"{txn_id} is {described.state.value}, not {state}"
            time.sleep(0.05)
        listed = [t for listings in client.list_transactions().values() for t in listings]
        assert txn_id in {t.transactional_id for t in listed}
        assert [(t.transactional_id, t.state.value) for t in listed if t.state.value in ACTIVE] == []
        producers = client.describe_producers([TopicPartition(t, p) for t, p in PARTITIONS])
        open_txns = {
            (tp.topic, tp.partition, p.producer_id, p.current_transaction_start_offset)
            for tp, state_ in producers.items()
            for p in state_.active_producers
            if p.current_transaction_start_offset >= 0
        }
        assert open_txns == set(), f"partitions with an open transaction: {open_txns}"
        return described
    finally:
        client.close()


def assert_stable(bootstrap: str) -> None:
    for topic, partition in PARTITIONS:
        fetched = fetch_once(bootstrap, topic, partition)
        assert fetched.last_stable_offset == fetched.high_watermark, (topic, partition, fetched)


@pytest.mark.parametrize("step", ["prepare-written", "first-marker-written", "markers-written"])
def test_commit_survives_kill_at_each_step(proc: BrokerProcess, step: str) -> None:
    start_with_topics(proc, step)
    since = log_size(proc)
    records = run_transaction(
        proc.bootstrap, "survivor", commit=True, tag=step, source_offset=OFFSET_OF[step]
    )
    line = wait_for_pause(proc, step, since)
    assert "'survivor'" in line
    # the pause really is where it says: count the markers of the 5 partitions before the kill
    markers = sum(
        fetch_once(proc.bootstrap, t, p, isolation=READ_UNCOMMITTED).markers
        for t, p in [*PARTITIONS, OFFSETS_PARTITION]
    )
    assert markers == {"prepare-written": 0, "first-marker-written": 1, "markers-written": 5}[step], markers
    assert txn_state(proc.bootstrap, "survivor") == "PrepareCommit"

    kill_and_restart(proc)
    assert sorted(read_all(proc.bootstrap, "read_committed", len(records))) == sorted(records)
    described = wait_until_complete(proc.bootstrap, "survivor", "CompleteCommit")
    assert described.topic_partitions == set()
    assert committed_source_offset(proc.bootstrap) == OFFSET_OF[step]
    assert_stable(proc.bootstrap)
    for topic, partition in PARTITIONS:
        # each partition got its marker exactly once, or again after the restart (harmless)
        fetched = fetch_once(proc.bootstrap, topic, partition, isolation=READ_UNCOMMITTED)
        assert fetched.markers >= 1, (topic, partition)
        assert fetched.aborted in (None, []), (topic, partition, fetched.aborted)

    # the application starts again with the same transactional.id and carries on
    more = run_transaction(proc.bootstrap, "survivor", commit=True, tag="again", source_offset=99)
    expected = sorted(records + more)
    assert sorted(read_all(proc.bootstrap, "read_committed", len(expected))) == expected
    assert wait_until_complete(proc.bootstrap, "survivor", "CompleteCommit").producer_epoch >= 1
    assert committed_source_offset(proc.bootstrap) == 99
    assert "Traceback" not in proc.log_path.read_text(errors="replace")


def txn_state(bootstrap: str, txn_id: str) -> str:
    client = admin(bootstrap)
    try:
        state: str = client.describe_transactions([txn_id])[txn_id].state.value
        return state
    finally:
        client.close()


def test_abort_survives_kill_before_the_markers(proc: BrokerProcess) -> None:
    start_with_topics(proc, "prepare-written")
    since = log_size(proc)
    records = run_transaction(proc.bootstrap, "quitter", commit=False, tag="aborted", source_offset=7)
    wait_for_pause(proc, "prepare-written", since)
    assert txn_state(proc.bootstrap, "quitter") == "PrepareAbort"

    kill_and_restart(proc)
    wait_until_complete(proc.bootstrap, "quitter", "CompleteAbort")
    assert read_all(proc.bootstrap, "read_committed") == []
    assert sorted(read_all(proc.bootstrap, "read_uncommitted", len(records))) == sorted(records)
    for topic, partition in PARTITIONS:
        fetched = fetch_once(proc.bootstrap, topic, partition)
        assert fetched.visible == []
        assert len(fetched.values) == 3
        assert fetched.markers == 1  # the ABORT marker
        assert fetched.aborted is not None
        assert len(fetched.aborted) == 1
        assert fetched.last_stable_offset == fetched.high_watermark
    assert committed_source_offset(proc.bootstrap) < 0  # the aborted offsets were dropped

    more = run_transaction(proc.bootstrap, "quitter", commit=True, tag="later", source_offset=8)
    assert sorted(read_all(proc.bootstrap, "read_committed", len(more))) == sorted(more)
    assert committed_source_offset(proc.bootstrap) == 8


ORPHAN = """
import sys, time
from confluent_kafka import Producer
bootstrap, partitions = sys.argv[1], [p.split("/") for p in sys.argv[2:]]
config = {"bootstrap.servers": bootstrap, "transactional.id": "orphan", "transaction.timeout.ms": 3000}
producer = Producer(config)
producer.init_transactions(20)
producer.begin_transaction()
for topic, partition in partitions:
    producer.produce(topic, key=b"k", value=b"orphaned", partition=int(partition))
assert producer.flush(20) == 0
print("open", flush=True)
time.sleep(3600)
"""


def test_open_transaction_is_aborted_after_a_kill(proc: BrokerProcess) -> None:
    from confluent_kafka import Producer

    start_with_topics(proc, None)
    # an application opens a transaction, writes to every partition, and crashes with the broker
    app = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, proc.bootstrap, *(f"{t}/{p}" for t, p in PARTITIONS)],
        stdout=subprocess.PIPE,
    )
    try:
        assert app.stdout is not None
        assert app.stdout.readline() == b"open\n"
        opened = time.monotonic()
        assert txn_state(proc.bootstrap, "orphan") == "Ongoing"
    finally:
        app.kill()
        app.wait(10)
    restarted_at = log_size(proc)
    kill_and_restart(proc)

    # meanwhile other producers write after the open transaction: read_committed readers wait for it
    plain = Producer({"bootstrap.servers": proc.bootstrap, "enable.idempotence": True})
    for topic, partition in PARTITIONS:
        plain.produce(topic, key=b"k", value=b"later", partition=partition)
    assert plain.flush(20) == 0

    # the timeout (3 s) passes, the coordinator aborts: the readers are released
    later = [(b"k", b"later")] * len(PARTITIONS)
    assert read_all(proc.bootstrap, "read_committed", len(later), timeout=15) == later
    released = time.monotonic() - opened
    described = wait_until_complete(proc.bootstrap, "orphan", "CompleteAbort")
    assert described.producer_epoch == 1  # fenced by the timeout abort (init gave epoch 0)
    assert released >= 2.5, f"aborted after {released:.1f} s, before the 3 s transaction timeout"
    assert_stable(proc.bootstrap)
    uncommitted = read_all(proc.bootstrap, "read_uncommitted", 2 * len(PARTITIONS))
    assert sorted(uncommitted) == sorted([(b"k", b"orphaned"), (b"k", b"later")] * len(PARTITIONS))
    with open(proc.log_path, "rb") as f:
        f.seek(restarted_at)
        assert b"aborting transaction of 'orphan': older than its timeout" in f.read()  # after the restart

    # a new instance of the application takes over the transactional.id
    again = run_transaction(proc.bootstrap, "orphan", commit=True, tag="resumed")
    expected = sorted(later + again)
    assert sorted(read_all(proc.bootstrap, "read_committed", len(expected))) == expected


def raw_transaction(bootstrap: str, txn_id: str) -> tuple[Any, int, int]:
    """InitProducerId, AddPartitionsToTxn(left-0) and one transactional record on it, with the raw
    client; returns (client, producer id, epoch) with the transaction open."""
    from exactly.errors import ErrorCode
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.add_partitions_to_txn import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnTopic,
    )
    from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
    from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from exactly.records.builder import BatchBuilder
    from tests.interop.client import RawClient

    client = RawClient(bootstrap)
    init = client.request(ApiKey.INIT_PRODUCER_ID, 3, InitProducerIdRequest(txn_id, 60_000))
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    added = client.request(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic("left", [0])],
        ),
    )
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True)
    builder.append(int(time.time() * 1000), b"k", b"in-flight")
    produced = client.request(
        ApiKey.PRODUCE,
        9,
        ProduceRequest(
            txn_id,
            -1,
            10_000,
            [TopicProduceData("left", partition_data=[PartitionProduceData(0, builder.build())])],
        ),
    )
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    return client, pid, epoch


@pytest.mark.parametrize("request_", ["AddPartitionsToTxn", "EndTxn"])
def test_client_gone_mid_request_does_not_wedge_the_transactional_id(
    proc: BrokerProcess, request_: str
) -> None:
    """A client killed while its AddPartitionsToTxn/EndTxn waits for the fsync of the coordinator's
    record (the connection closes, the broker drops the in-flight request): the transition must still be
    applied, or the id answers CONCURRENT_TRANSACTIONS forever and its open transaction is never
    aborted, holding back read_committed readers of left-0."""
    from confluent_kafka import Producer

    from exactly.protocol.api import encode_request
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.add_partitions_to_txn import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnTopic,
    )
    from exactly.protocol.messages.end_txn import EndTxnRequest

    start_with_topics(proc, None)
    client, pid, epoch = raw_transaction(proc.bootstrap, "hasty")
    if request_ == "AddPartitionsToTxn":
        body: Any = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="hasty",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic("right", [1])],
        )
        client.send_raw(encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, 100, "hasty", body))
    else:
        body = EndTxnRequest("hasty", pid, epoch, True)
        client.send_raw(encode_request(ApiKey.END_TXN, 3, 100, "hasty", body))
    client.close()  # gone without reading the answer, as a killed process

    # a new instance of the application takes over the id within a few seconds
    producer = Producer({"bootstrap.servers": proc.bootstrap, "transactional.id": "hasty"})
    started = time.monotonic()
    producer.init_transactions(8)
    assert time.monotonic() - started < 5, "InitProducerId waited on a wedged transactional id"
    producer.begin_transaction()
    producer.produce("left", key=b"k", value=b"next", partition=0)
    producer.commit_transaction(15)
    expected = [(b"k", b"in-flight"), (b"k", b"next")] if request_ == "EndTxn" else [(b"k", b"next")]
    assert sorted(read_all(proc.bootstrap, "read_committed", len(expected))) == sorted(expected)
    wait_until_complete(proc.bootstrap, "hasty", "CompleteCommit")
    assert_stable(proc.bootstrap)
