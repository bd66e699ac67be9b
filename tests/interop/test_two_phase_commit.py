"""exactly's two-phase commit extension end to end (docs/two-phase-commit.md): the real broker,
confluent-kafka transactional producers as Spark tasks use them (unique transactional.id per attempt,
produce, flush, PrepareTxn, then dropped without commit or abort) and `exactly.client.twopc` as the driver.

Visibility is checked with raw read_committed fetches: the records a read_committed client keeps, and the
last stable offset.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exactly.client.twopc import TwoPhaseClient, TwoPhaseCommitError
from exactly.errors import ErrorCode
from exactly.testing.processes import BrokerProcess
from tests.interop.support import create_topic
from tests.interop.txn_support import READ_UNCOMMITTED, fetch_once

pytestmark = pytest.mark.interop

CLEANUP = "transaction.abort.timed.out.transaction.cleanup.interval.ms=300"
PAUSE = "exactly.debug.end.txn.pause"
TOPIC = "out"
DEADLINE_S = 60.0


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", CLEANUP)
    try:
        yield broker
    finally:
        broker.kill()


def start(proc: BrokerProcess, *extra: str) -> None:
    proc.settings = [CLEANUP, *extra]
    proc.start()


def task(
    bootstrap: str,
    query: str,
    batch: int,
    partition: int,
    values: list[str],
    *,
    prepare: bool = True,
    timeout_ms: int = 60_000,
) -> str:
    """What a Spark task does: a transactional producer unique to this attempt writes `values` to
    TOPIC-`partition`, flushes, prepares (unless told not to) and is dropped without commit/abort."""
    from confluent_kafka import Producer

    tid = f"exactly-spark.{query}.{batch}.{partition}.{uuid.uuid4().hex}"
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": timeout_ms,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(TOPIC, value=value.encode(), partition=partition)
    assert producer.flush(30) == 0
    if prepare:
        with TwoPhaseClient(bootstrap) as client:
            client.prepare(tid, query, batch, partition)
    del producer
    return tid


def visible(bootstrap: str, partition: int) -> list[str]:
    return [v.decode() for v in fetch_once(bootstrap, TOPIC, partition).visible if v is not None]


def stable(bootstrap: str, partition: int) -> bool:
    """No open (or prepared) transaction holds the partition: LSO = high watermark."""
    fetched = fetch_once(bootstrap, TOPIC, partition)
    return fetched.last_stable_offset == fetched.high_watermark


def wait_for(what: str, check: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def values(tag: str, n: int = 3) -> list[str]:
    return [f"{tag}-{i}" for i in range(n)]


def test_batch_is_invisible_until_decided_then_winners_commit_and_losers_abort(
    proc: BrokerProcess,
) -> None:
    start(proc)
    create_topic(proc.bootstrap, TOPIC, 2)
    b = proc.bootstrap
    w0 = task(b, "q1", 0, 0, values("w0"))
    w1 = task(b, "q1", 0, 1, values("w1"))
    loser = task(b, "q1", 0, 1, values("loser"))  # a failed or speculative attempt of partition 1

    # Everything is written (read_uncommitted sees it) but nothing is visible, and the LSO is pinned.
    raw = fetch_once(b, TOPIC, 1, isolation=READ_UNCOMMITTED).visible
    assert sorted(v.decode() for v in raw if v is not None) == sorted(values("w1") + values("loser"))
    assert visible(b, 0) == []
    assert visible(b, 1) == []
    assert fetch_once(b, TOPIC, 0).last_stable_offset == 0
    with TwoPhaseClient(b) as client:
        assert client.supported()
        prepared, decisions = client.list_prepared("q1")
        assert sorted(t.transactional_id for t in prepared) == sorted([w0, w1, loser])
        assert {(t.batch_id, t.partition) for t in prepared} == {(0, 0), (0, 1)}
        assert decisions == []

        decision = client.commit_batch("q1", 0, [w0, w1])
        assert (decision.winners, decision.already_decided) == ((w0, w1), False)

        wait_for("winners visible", lambda: visible(b, 0) == values("w0") and visible(b, 1) == values("w1"))
        wait_for("LSO released", lambda: stable(b, 0) and stable(b, 1))
        assert "loser-0" not in visible(b, 1)

        again = client.commit_batch("q1", 0, ["some-other-attempt"])  # a replayed driver commit
        assert (again.winners, again.already_decided) == ((w0, w1), True)
        rolled = client.abort_batch("q1", 0)  # Spark's abort after a commit: roll forward
        assert rolled is not None
        assert rolled.winners == (w0, w1)
        assert rolled.already_decided
        prepared, decisions = client.list_prepared("q1")
        assert prepared == []
        assert [(d.batch_id, d.winners) for d in decisions] == [(0, (w0, w1))]
    assert visible(b, 0) == values("w0")
    assert visible(b, 1) == values("w1")


def test_abort_batch_before_decision_aborts_everything_prepared(proc: BrokerProcess) -> None:
    start(proc)
    create_topic(proc.bootstrap, TOPIC, 2)
    b = proc.bootstrap
    t0 = task(b, "q2", 3, 0, values("a0"))
    t1 = task(b, "q2", 3, 1, values("a1"))
    other = task(b, "q2", 4, 0, values("next"))  # another batch: not touched
    with TwoPhaseClient(b) as client:
        assert client.abort_batch("q2", 3) is None
        wait_for("aborted batch released partition 1", lambda: stable(b, 1))
        prepared, _ = client.list_prepared("q2")
        assert [t.transactional_id for t in prepared] == [other]
        assert t0 not in {t.transactional_id for t in prepared}
        assert t1 not in {t.transactional_id for t in prepared}
        assert client.commit_batch("q2", 4, [other]).winners == (other,)
    wait_for("batch 4 visible", lambda: visible(b, 0) == values("next"))
    assert visible(b, 1) == []


def test_a_winner_that_is_not_prepared_for_the_batch_gets_no_decision(proc: BrokerProcess) -> None:
    start(proc)
    create_topic(proc.bootstrap, TOPIC, 1)
    b = proc.bootstrap
    good = task(b, "q3", 0, 0, values("good"))
    open_txn = task(b, "q3", 0, 0, values("open"), prepare=False)
    elsewhere = task(b, "q3", 1, 0, values("elsewhere"))
    with TwoPhaseClient(b) as client:
        for bad in (open_txn, elsewhere, "never-seen"):
            with pytest.raises(TwoPhaseCommitError) as refused:
                client.commit_batch("q3", 0, [good, bad])
            assert refused.value.code == ErrorCode.INVALID_TXN_STATE
            assert repr(bad) in refused.value.message
        prepared, decisions = client.list_prepared("q3")
        assert decisions == []
        assert {t.transactional_id for t in prepared} == {good, elsewhere}
        assert client.commit_batch("q3", 0, [good]).already_decided is False
    wait_for("decided batch visible", lambda: visible(b, 0) == values("good"))


def test_a_prepared_transaction_takes_no_more_records(proc: BrokerProcess) -> None:
    from confluent_kafka import KafkaException, Producer

    start(proc)
    create_topic(proc.bootstrap, TOPIC, 2)
    b = proc.bootstrap
    tid = f"exactly-spark.q9.0.0.{uuid.uuid4().hex}"
    producer = Producer({"bootstrap.servers": b, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values("in"):
        producer.produce(TOPIC, value=value.encode(), partition=0)
    assert producer.flush(30) == 0
    with TwoPhaseClient(b) as client:
        client.prepare(tid, "q9", 0, 0)
        errors: list[object] = []
        for partition in (0, 1):  # a partition already in the transaction, and a new one
            try:
                producer.produce(
                    TOPIC, value=b"late", partition=partition, on_delivery=lambda err, msg: errors.append(err)
                )
            except KafkaException as e:  # librdkafka already knows the transaction failed
                errors.append(e)
            producer.flush(30)
        assert len(errors) == 2
        assert all(err is not None for err in errors), errors
        client.commit_batch("q9", 0, [tid])
    wait_for("the prepared records visible", lambda: visible(b, 0) == values("in"))
    raw = fetch_once(b, TOPIC, 0, isolation=READ_UNCOMMITTED).visible
    assert b"late" not in raw
    assert fetch_once(b, TOPIC, 1, isolation=READ_UNCOMMITTED).visible == []


def test_zombie_prepare_after_the_decision_is_refused_and_aborted(proc: BrokerProcess) -> None:
    start(proc)
    create_topic(proc.bootstrap, TOPIC, 1)
    b = proc.bootstrap
    winner = task(b, "q4", 5, 0, values("winner"))
    zombie = task(b, "q4", 5, 0, values("zombie"), prepare=False)  # still writing when the driver decides
    older = task(b, "q4", 2, 0, values("older"), prepare=False)  # a zombie of an earlier batch
    with TwoPhaseClient(b) as client:
        client.commit_batch("q4", 5, [winner])
        for tid, batch in ((zombie, 5), (older, 2)):
            with pytest.raises(TwoPhaseCommitError) as refused:
                client.prepare(tid, "q4", batch, 0)
            assert refused.value.code == ErrorCode.PRODUCER_FENCED
        assert client.list_prepared("q4")[0] == []
    wait_for("only the winner visible and the LSO free", lambda: stable(b, 0))
    assert visible(b, 0) == values("winner")


@pytest.mark.slow
@pytest.mark.parametrize("step", ["decision-written", "prepare-written", "first-marker-written"])
def test_kill_9_after_the_decision_commits_the_winners_after_restart(proc: BrokerProcess, step: str) -> None:
    start(proc, f"{PAUSE}={step}")
    create_topic(proc.bootstrap, TOPIC, 2)
    b = proc.bootstrap
    w0 = task(b, "q5", 7, 0, values("w0"))
    w1 = task(b, "q5", 7, 1, values("w1"))
    loser = task(b, "q5", 7, 0, values("loser"))
    since = proc.log_path.stat().st_size
    outcome: list[object] = []

    def decide() -> None:
        try:
            with TwoPhaseClient(b, timeout=DEADLINE_S) as client:
                outcome.append(client.commit_batch("q5", 7, [w0, w1]))
        except TwoPhaseCommitError as e:
            outcome.append(e)

    driver = threading.Thread(target=decide, daemon=True)
    driver.start()

    def parked() -> bool:
        with open(proc.log_path, "rb") as f:
            f.seek(since)
            return "parked" in f.read().decode(errors="replace")

    wait_for(f"the broker parked at {step}", parked)
    proc.kill()
    if step != "decision-written":
        driver.join(DEADLINE_S)  # answered before the markers (PrepareCommit durable)
        assert len(outcome) == 1, outcome
        assert not isinstance(outcome[0], Exception), outcome
    proc.settings = [CLEANUP]  # restart without the pause: recovery finishes the decision
    proc.start()
    driver.join(DEADLINE_S)
    wait_for(
        "winners visible after restart",
        lambda: visible(b, 0) == values("w0") and visible(b, 1) == values("w1"),
    )
    wait_for("LSO released after restart", lambda: stable(b, 0) and stable(b, 1))
    with TwoPhaseClient(b) as client:
        again = client.commit_batch("q5", 7, [loser])  # the replayed driver's commit
        assert (again.winners, again.already_decided) == ((w0, w1), True)
        assert client.list_prepared("q5")[0] == []
    assert visible(b, 0) == values("w0")


@pytest.mark.slow
def test_prepared_transactions_survive_kill_9_and_are_not_timed_out(proc: BrokerProcess) -> None:
    start(proc)
    create_topic(proc.bootstrap, TOPIC, 1)
    b = proc.bootstrap
    tids = [task(b, "q6", 1, 0, values(f"t{i}"), timeout_ms=1000) for i in range(2)]
    driver = TwoPhaseClient(b)  # connected before the crash: its next request reconnects
    assert driver.supported()
    proc.kill()
    proc.start()
    # An ordinary open transaction with the same 1 s timeout, started after the restart: once the scan
    # has aborted it, the prepared ones (older, same timeout) have been passed over by the scan.
    witness = task(b, "q6", 1, 0, values("ongoing"), prepare=False, timeout_ms=1000)
    wait_for(
        "the open transaction timed out", lambda: f"{witness!r}: older than its timeout" in proc.full_log()
    )
    with driver:
        prepared, _ = driver.list_prepared("q6")
        assert sorted(t.transactional_id for t in prepared) == sorted(tids)
        assert fetch_once(b, TOPIC, 0).last_stable_offset == 0  # still pinned by the prepared ones
        assert driver.commit_batch("q6", 1, tids).winners == tuple(tids)
    wait_for(
        "prepared output committed", lambda: sorted(visible(b, 0)) == sorted(values("t0") + values("t1"))
    )


def test_prepared_transactions_are_aborted_by_the_safety_timeout(proc: BrokerProcess) -> None:
    start(proc, "transaction.prepared.max.age.ms=1500")
    create_topic(proc.bootstrap, TOPIC, 1)
    b = proc.bootstrap
    task(b, "q7", 0, 0, values("abandoned"))
    wait_for("safety timeout released the LSO", lambda: stable(b, 0))
    assert visible(b, 0) == []
    with TwoPhaseClient(b) as client:
        assert client.list_prepared("q7") == ([], [])


def test_switched_off_the_extension_is_not_advertised_and_refused(proc: BrokerProcess) -> None:
    start(proc, "transaction.two.phase.commit.enable=false")
    create_topic(proc.bootstrap, TOPIC, 1)
    b = proc.bootstrap
    tid = task(b, "q8", 0, 0, values("x"), prepare=False)
    with TwoPhaseClient(b, timeout=5) as client:
        assert client.supported() is False
        with pytest.raises(TwoPhaseCommitError) as refused:
            client.prepare(tid, "q8", 0, 0)
        assert refused.value.code == ErrorCode.UNSUPPORTED_VERSION
        assert "transaction.two.phase.commit.enable" in refused.value.message
        with pytest.raises(TwoPhaseCommitError):
            client.commit_batch("q8", 0, [tid])


def test_unreachable_broker_names_the_address() -> None:
    with TwoPhaseClient("127.0.0.1:1", timeout=0.5) as client, pytest.raises(TwoPhaseCommitError) as failed:
        client.supported()
    assert failed.value.code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)
    assert "127.0.0.1:1" in failed.value.message


def test_cli_lists_and_aborts_an_abandoned_querys_prepared_work(proc: BrokerProcess) -> None:
    from tests.cli.helpers import run_cli

    start(proc)
    create_topic(proc.bootstrap, TOPIC, 2)
    b = proc.bootstrap
    decided = task(b, "abandoned", 0, 0, values("kept"))
    with TwoPhaseClient(b) as client:
        client.commit_batch("abandoned", 0, [decided])
    wait_for("batch 0 visible", lambda: visible(b, 0) == values("kept"))
    open_work = {task(b, "abandoned", 1, 0, values("b1p0")), task(b, "abandoned", 1, 1, values("b1p1"))}
    open_work.add(task(b, "abandoned", 2, 1, values("b2p1")))
    other = task(b, "alive", 9, 0, values("alive"))
    assert not stable(b, 0)
    assert not stable(b, 1)

    listed = run_cli("txn", "list", bootstrap=b)
    assert listed.returncode == 0, listed
    states = {line.split()[0]: line.split()[-1] for line in listed.out_lines[1:]}
    assert {states[t] for t in open_work | {other}} == {"Prepared"}
    assert states[decided] == "CompleteCommit"
    # Kafka's view (DescribeTransactions says Ongoing, with the partitions): prepared work is never hanging;
    # `exactly txn` marks it Prepared.
    hanging = run_cli(
        "txn", "find-hanging", "--topic", TOPIC, "--max-transaction-timeout-ms", "1", bootstrap=b
    )
    assert hanging.returncode == 0, hanging
    assert hanging.out == ""
    described = run_cli("txn", "describe", other, bootstrap=b)
    assert described.returncode == 0, described
    assert described.out_lines[1].split()[4] == "Prepared"  # the STATE column

    prepared = run_cli("txn", "list-prepared", "--query", "abandoned", bootstrap=b)
    assert prepared.returncode == 0, prepared
    assert prepared.out_lines[0].split() == [
        "TRANSACTIONAL-ID",
        "QUERY",
        "BATCH",
        "PARTITION",
        "PRODUCER-ID",
        "AGE-MS",
        "PARTITIONS",
    ]
    rows = [line.split() for line in prepared.out_lines[1:]]
    assert {r[0] for r in rows} == open_work
    assert sorted((r[1], r[2], r[3], r[6]) for r in rows) == [
        ("abandoned", "1", "0", "out-0"),
        ("abandoned", "1", "1", "out-1"),
        ("abandoned", "2", "1", "out-1"),
    ]
    decisions = run_cli("txn", "list-prepared", "--decisions", bootstrap=b)
    assert [line.split() for line in decisions.out_lines] == [
        ["QUERY", "BATCH", "WINNERS"],
        ["abandoned", "0", decided],
    ]

    noop = run_cli("txn", "abort-batch", "--query", "abandoned", "--batch", "0", bootstrap=b)
    assert noop.returncode == 0, noop
    assert "is decided (1 transactions commit): nothing aborted" in noop.out
    one = run_cli("txn", "abort-batch", "--query", "abandoned", "--batch", "2", bootstrap=b)
    assert one.returncode == 0, one
    assert one.out_lines[0] == "aborted 1 prepared transactions of batch 2 of query abandoned"
    rest = run_cli("txn", "abort-query", "--query", "abandoned", bootstrap=b)
    assert rest.returncode == 0, rest
    assert rest.out_lines[0] == "aborted 2 prepared transactions of query abandoned"
    assert set(one.out_lines[1:] + rest.out_lines[1:]) == open_work

    wait_for("partition 1 released", lambda: stable(b, 1))
    assert visible(b, 1) == []
    assert not stable(b, 0)  # the live query's prepared work still holds partition 0
    after = run_cli("txn", "list-prepared", bootstrap=b)
    assert [line.split()[0] for line in after.out_lines[1:]] == [other]
    assert visible(b, 0) == values("kept")


def test_cli_refuses_a_broker_without_the_extension(proc: BrokerProcess) -> None:
    from tests.cli.helpers import assert_one_line_error, run_cli

    start(proc, "transaction.two.phase.commit.enable=false")
    result = run_cli("txn", "abort-query", "--query", "q", bootstrap=proc.bootstrap)
    assert_one_line_error(result, "no two-phase commit extension")
