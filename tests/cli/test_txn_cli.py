"""`exactly txn`: list, describe, describe-producers, find-hanging and abort against the real broker, with
transactions made by confluent-kafka; a hanging transaction is made the way they happen in production
(the coordinator lost its state while a partition still holds an open transaction) and then aborted."""

from __future__ import annotations

import shutil

import pytest

from exactly.testing.processes import BrokerProcess
from tests.cli.helpers import Result, assert_one_line_error, run_cli
from tests.interop.support import create_topic
from tests.interop.txn_support import READ_UNCOMMITTED, fetch_once, wait_for_state

pytestmark = pytest.mark.interop


def rows(result: Result) -> list[list[str]]:
    assert result.returncode == 0, result
    return [line.split() for line in result.out_lines[1:]]


def header(result: Result) -> list[str]:
    return result.out_lines[0].split()


def open_transaction(bootstrap: str, txn_id: str, topic: str, partition: int) -> object:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=partition)
    assert producer.flush(20) == 0
    return producer  # kept alive by the caller: the transaction stays open


def test_list_describe_and_describe_producers(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    bootstrap = broker.bootstrap
    create_topic(bootstrap, "ledger", 2)
    done = Producer({"bootstrap.servers": bootstrap, "transactional.id": "done-tx"})
    done.init_transactions(20)
    done.begin_transaction()
    done.produce("ledger", value=b"x", partition=0)
    done.commit_transaction(20)
    holder = open_transaction(bootstrap, "open-tx", "ledger", 1)
    wait_for_state(bootstrap, "done-tx", {"CompleteCommit"})

    listed = run_cli("txn", "list", bootstrap=bootstrap)
    assert header(listed) == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"]
    states = {row[0]: row[3] for row in rows(listed)}
    assert states == {"done-tx": "CompleteCommit", "open-tx": "Ongoing"}
    assert [row[0] for row in rows(run_cli("txn", "list", "--state", "Ongoing", bootstrap=bootstrap))] == [
        "open-tx"
    ]

    described = run_cli("txn", "describe", "open-tx", bootstrap=bootstrap)
    [row] = rows(described)
    fields = dict(zip(header(described), row, strict=True))
    assert fields["STATE"] == "Ongoing"
    assert fields["PARTITIONS"] == "ledger-1"
    assert fields["PRODUCER-EPOCH"] == "0"
    assert int(fields["DURATION-MS"]) >= 0
    assert_one_line_error(
        run_cli("txn", "describe", "nobody", bootstrap=bootstrap), "'nobody' does not exist"
    )

    producers = run_cli(
        "txn", "describe-producers", "--topic", "ledger", "--partition", "1", bootstrap=bootstrap
    )
    [producer] = rows(producers)
    fields = dict(zip(header(producers), producer, strict=True))
    assert fields["PRODUCER-ID"] == described.out_lines[1].split()[2]
    assert fields["CURRENT-TRANSACTION-START-OFFSET"] == "0"
    assert_one_line_error(
        run_cli("txn", "describe-producers", "--topic", "ledger", "--partition", "9", bootstrap=bootstrap),
        "ledger-9 does not exist",
    )
    # the coordinator knows the open transaction: it is not hanging, whatever its age
    assert run_cli("txn", "find-hanging", "--max-transaction-timeout-ms", "0", bootstrap=bootstrap).out == ""
    del holder


@pytest.mark.slow
def test_find_and_abort_a_hanging_transaction(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "stuck", 1)
    holder = open_transaction(bootstrap, "lost-tx", "stuck", 0)
    assert broker.stop() == 0
    # the coordinator's state is lost (a disk replaced, a bad restore): the partition still holds the
    # producer's open transaction, and nobody will ever end it
    for directory in broker.data_dir.glob("__transaction_state-*"):
        shutil.rmtree(directory)
    broker.start()
    assert_one_line_error(run_cli("txn", "describe", "lost-tx", bootstrap=bootstrap), "does not exist")
    held = fetch_once(bootstrap, "stuck", 0)
    assert (held.last_stable_offset, held.high_watermark) == (0, 1)

    found = run_cli("txn", "find-hanging", "--max-transaction-timeout-ms", "0", bootstrap=bootstrap)
    [row] = rows(found)
    fields = dict(zip(header(found), row, strict=True))
    assert (fields["TOPIC"], fields["PARTITION"], fields["START-OFFSET"]) == ("stuck", "0", "0")
    # with Kafka's default threshold it is too young to call hanging
    assert run_cli("txn", "find-hanging", bootstrap=bootstrap).out == ""

    wrong = run_cli(
        "txn", "abort", "--topic", "stuck", "--partition", "0", "--start-offset", "5", bootstrap=bootstrap
    )
    assert_one_line_error(wrong, "no open transaction starts at offset 5")
    aborted = run_cli(
        "txn", "abort", "--topic", "stuck", "--partition", "0", "--start-offset", "0", bootstrap=bootstrap
    )
    assert aborted.returncode == 0, aborted
    assert f"producer {fields['PRODUCER-ID']}" in aborted.out

    released = fetch_once(bootstrap, "stuck", 0)
    assert released.last_stable_offset == released.high_watermark == 2
    assert released.visible == []
    assert released.markers == 1
    assert fetch_once(bootstrap, "stuck", 0, isolation=READ_UNCOMMITTED).values == [b"open"]
    assert run_cli("txn", "find-hanging", "--max-transaction-timeout-ms", "0", bootstrap=bootstrap).out == ""
    del holder


def test_unreachable_broker_is_one_line() -> None:
    result = run_cli("txn", "list", bootstrap="127.0.0.1:1")
    assert_one_line_error(result, "cannot reach the broker at 127.0.0.1:1")


def test_partition_needs_topic() -> None:
    result = run_cli("txn", "find-hanging", "--partition", "0", bootstrap="127.0.0.1:1")
    assert result.returncode == 2
    assert_one_line_error(result, "--partition needs --topic")


def test_help_lists_the_commands() -> None:
    result = run_cli("txn", "--help")
    assert result.returncode == 0
    for command in ("list", "describe", "describe-producers", "find-hanging", "abort"):
        assert command in result.out
