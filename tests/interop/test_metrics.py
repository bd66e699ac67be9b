"""The metrics listener of the real broker process (issue 26): real clients produce (plainly and in a
transaction), /metrics says what they did, /healthz and /readyz answer as Kubernetes probes expect, and an
invalid metrics.listener stops the broker with one line."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from exactly.testing.processes import BrokerProcess, child_env, free_port
from tests.interop.support import running_broker

pytestmark = pytest.mark.interop

Values = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("metrics") / "data"
    settings = (
        f"metrics.listener=http://127.0.0.1:{port}",
        "transaction.state.log.num.partitions=2",
        "offsets.topic.num.partitions=2",
    )
    with running_broker(data, *settings) as broker:
        yield broker, f"http://127.0.0.1:{port}"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(base: str) -> Values:
    status, text = get(f"{base}/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: Values, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def eventually(condition: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_probes_answer(metered: tuple[BrokerProcess, str]) -> None:
    _, base = metered
    assert get(f"{base}/healthz") == (200, "ok\n")
    eventually(lambda: get(f"{base}/readyz") == (200, "ready\n"))
    assert get(f"{base}/nothing")[0] == 404
    assert get(f"{base}/console/")[0] == 404  # console.enable is off by default


def test_messages_in_per_topic_is_what_was_sent(metered: tuple[BrokerProcess, str]) -> None:
    broker, base = metered
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(250):
        producer.produce("metered-a", f"a{i}".encode())
    for i in range(40):
        producer.produce("metered-b", f"b{i}".encode())
    assert producer.flush(20) == 0
    found = scrape(base)
    brokertopic = "kafka_server_brokertopicmetrics_"
    assert value(found, f"{brokertopic}messagesin_total", topic="metered-a") == 250
    assert value(found, f"{brokertopic}messagesin_total", topic="metered-b") == 40
    assert value(found, f"{brokertopic}messagesin_total") >= 290
    assert value(found, f"{brokertopic}bytesin_total", topic="metered-a") > 250 * 2
    assert value(found, "kafka_log_log_logendoffset", topic="metered-a", partition="0") == 250
    assert value(found, "kafka_log_log_size", topic="metered-b", partition="0") > 0
    produce_requests = sum(
        v
        for (name, labels), v in found.items()
        if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels
    )
    assert produce_requests >= 2
    assert (
        value(found, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    )
    assert (
        value(found, "kafka_server_socket_server_metrics_connection_creation_total", listener="PLAINTEXT")
        >= 1
    )


def test_an_open_transaction_shows_until_it_commits(metered: tuple[BrokerProcess, str]) -> None:
    broker, base = metered
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-tx"})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(7):
        producer.produce("metered-tx-data", f"t{i}".encode())
    assert producer.flush(20) == 0
    coordinator = "exactly_transaction_coordinator_"
    eventually(lambda: value(scrape(base), f"{coordinator}oldest_open_transaction_age_seconds") > 0)
    found = scrape(base)
    assert value(found, f"{coordinator}ongoing_transactions") == 1
    assert value(found, "exactly_log_lso_lag", topic="metered-tx-data", partition="0") == 7
    assert value(found, "exactly_log_lso_lag_max") >= 7
    producer.commit_transaction(20)

    def settled() -> bool:
        after = scrape(base)
        return (
            value(after, f"{coordinator}oldest_open_transaction_age_seconds") == 0
            and value(after, f"{coordinator}ongoing_transactions") == 0
            and value(after, f"{coordinator}commits_total") >= 1
        )

    eventually(settled)
    found = scrape(base)
    assert value(found, "exactly_log_lso_lag", topic="metered-tx-data", partition="0") == 0
    assert value(found, "exactly_transaction_markers_written_total") >= 1
    assert value(found, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered-tx-data") == 7


def test_serial_transactions_flush_on_the_event_loop(metered: tuple[BrokerProcess, str]) -> None:
    """One-record transactions one after another: each answer waits for one fsync (the Ongoing record, the
    data, PrepareCommit) and the markers' fsync follows EndTxn's answer. With nothing else to do, each of
    them runs on the event loop (exactly_storage_flushes_total{way="inline"}), not on a flush thread: the
    markers' fsync waits until EndTxn is answered instead of taking a thread so the loop can answer."""
    broker, base = metered
    topic, transactions = "metered-serial", 40
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic, "linger.ms": 0})
    producer.init_transactions(20)
    commits = "exactly_transaction_coordinator_commits_total"

    def commit(i: int) -> None:
        producer.begin_transaction()
        producer.produce(topic, f"s{i}".encode())
        producer.commit_transaction(20)

    commit(0)  # creates the topic
    eventually(lambda: value(scrape(base), "exactly_log_lso_lag", topic=topic, partition="0") == 0)
    before = scrape(base)
    for i in range(1, transactions + 1):
        commit(i)
    eventually(lambda: value(scrape(base), commits) >= value(before, commits) + transactions)
    after = scrape(base)

    def flushes(way: str) -> float:
        name = "exactly_storage_flushes_total"
        return value(after, name, way=way) - value(before, name, way=way)

    assert value(after, commits) == value(before, commits) + transactions
    assert flushes("inline") >= 4 * transactions
    assert flushes("thread") <= transactions // 4  # stray overlaps only (markers on threads: one each)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == transactions + 1


def test_an_invalid_metrics_listener_is_a_one_line_config_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exactly",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--set",
            "metrics.listener=9404",
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: invalid value for metrics.listener: expected http://<host>:<port> (or empty), got '9404'"
    ]
