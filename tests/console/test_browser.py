"""The console in a real browser (headless Debian chromium) against a real broker with real
confluent-kafka traffic: a transaction opened by a producer shows as open, then committed, without the
page being reloaded; a transaction left open shows as hanging with the command that aborts it; the record
browser marks open and aborted records; a consumer group's lag falls as its consumer catches up."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from exactly.testing.processes import BrokerProcess, free_port
from exactly.testing import browser
from tests.interop.support import running_broker

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(browser.available() is not None, reason=str(browser.available())),
]

HANGING_MS = 2000


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("console") / "data"
    settings = (
        f"metrics.listener=http://127.0.0.1:{port}",
        "console.enable=true",
        f"console.hanging.transaction.ms={HANGING_MS}",
        "transaction.state.log.num.partitions=2",
        "offsets.topic.num.partitions=2",
        "group.initial.rebalance.delay.ms=0",
    )
    with running_broker(data, *settings) as broker:
        yield broker, f"http://127.0.0.1:{port}/console"


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    chromium = browser.chromium()
    try:
        yield chromium
    finally:
        chromium.quit()


def _row_state(driver: Any, txn_id: str) -> str | None:
    rows = driver.find_elements("css selector", f'tr[data-txn="{txn_id}"]')
    return rows[0].get_attribute("data-state") if rows else None


def _live_updates(driver: Any) -> int:
    return int(driver.find_element("id", "live").get_attribute("data-updated") or 0)


def _producer(broker: BrokerProcess, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 1})
    producer.init_transactions(10)
    return producer


def test_a_transaction_shows_open_then_committed_without_a_reload(
    console: tuple[BrokerProcess, str], driver: Any
) -> None:
    broker, base = console
    driver.get(f"{base}/transactions")
    marker = driver.execute_script("window.notReloaded = true; return window.notReloaded;")
    assert marker is True
    producer = _producer(broker, "console-open")
    producer.begin_transaction()
    producer.produce("console-orders", b"one", key=b"k")
    producer.flush(10)
    browser.wait_for(driver, lambda d: _row_state(d, "console-open") == "Ongoing", message="not shown open")
    row = driver.find_element("css selector", 'tr[data-txn="console-open"]')
    assert "console-orders-0" in row.text
    producer.commit_transaction(10)
    browser.wait_for(
        driver, lambda d: _row_state(d, "console-open") == "CompleteCommit", message="not shown committed"
    )
    assert driver.execute_script("return window.notReloaded === true;"), "the page was reloaded"
    assert _live_updates(driver) > 0


def test_a_transaction_left_open_shows_as_hanging_with_its_abort_command(
    console: tuple[BrokerProcess, str], driver: Any
) -> None:
    broker, base = console
    stuck = _producer(broker, "console-stuck")
    stuck.begin_transaction()
    for i in range(3):
        stuck.produce("console-stuck", f"stuck-{i}".encode())
    stuck.flush(10)
    aborter = _producer(broker, "console-aborter")
    aborter.begin_transaction()
    aborter.produce("console-stuck", b"thrown-away")
    aborter.flush(10)
    aborter.abort_transaction(10)
    driver.get(f"{base}/transactions")

    def hanging(d: Any) -> bool:
        rows = d.find_elements("css selector", 'tr[data-txn="console-stuck"].hanging')
        return bool(rows) and "HANGING" in rows[0].text

    browser.wait_for(driver, hanging, seconds=HANGING_MS / 1000 + 15, message="not shown hanging")
    row = driver.find_element("css selector", 'tr[data-txn="console-stuck"]')
    assert "exactly txn abort --topic console-stuck --partition 0 --start-offset 0" in row.text
    in_log = driver.find_element("css selector", '#open-in-logs tr[data-partition="console-stuck-0"]')
    assert "HANGING" in in_log.text
    assert "console-stuck" in in_log.text
    assert "committed" not in driver.find_element("css selector", 'tr[data-txn="console-aborter"]').text.lower()

    driver.get(f"{base}/records?topic=console-stuck&partition=0&offset=0&isolation=read_uncommitted")
    rows = browser.wait_for(driver, lambda d: d.find_elements("css selector", "#records tbody tr"))
    status = {
        int(r.get_attribute("data-offset")): r.find_element("css selector", "td.status").text for r in rows
    }
    assert status[0] == status[1] == status[2] == "open transaction"
    assert status[3] == "aborted"
    assert status[4] == "marker"
    driver.get(f"{base}/records?topic=console-stuck&partition=0&offset=0&isolation=read_committed")
    summary = driver.find_element("css selector", "main .summary").text
    assert "read_committed" in summary
    assert "LSO 0" in summary
    assert not driver.find_elements("css selector", "#records tbody tr")
    stuck.abort_transaction(10)


def test_group_lag_falls_as_the_consumer_catches_up(console: tuple[BrokerProcess, str], driver: Any) -> None:
    broker, base = console
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(300):
        producer.produce("console-lag", f"r{i}".encode())
    producer.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "console-g",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "console-consumer",
        }
    )
    try:
        consumer.subscribe(["console-lag"])
        read = 0
        deadline = time.monotonic() + 20
        while read < 100:
            assert time.monotonic() < deadline, "the consumer got no records"
            read += len(consumer.consume(100 - read, 0.5))
        consumer.commit(offsets=[TopicPartition("console-lag", 0, 100)], asynchronous=False)
        driver.get(f"{base}/groups")

        def lag(d: Any) -> int | None:
            cells = d.find_elements(
                "css selector", 'section[data-group="console-g"] tr[data-partition="console-lag-0"] .lag-value'
            )
            text = cells[0].text if cells else ""
            return int(text) if text.isdigit() else None

        browser.wait_for(driver, lambda d: lag(d) == 200, message="lag 200 not shown")
        section = driver.find_element("css selector", 'section[data-group="console-g"]')
        assert "console-consumer" in section.text  # the member, holding the partition
        assert "console-lag-0" in section.find_element("css selector", "table.members").text
        while read < 300:
            assert time.monotonic() < deadline + 10, "the consumer did not catch up"
            read += len(consumer.consume(300 - read, 0.5))
        consumer.commit(asynchronous=False)
        browser.wait_for(driver, lambda d: lag(d) == 0, message="lag did not fall to 0")
    finally:
        consumer.close()


def test_static_files_and_unknown_pages(console: tuple[BrokerProcess, str], driver: Any) -> None:
    _, base = console
    driver.get(f"{base}/")
    assert "Brokers" in driver.title
    assert "One broker" in driver.find_element("id", "live").text
    assert Path(browser.CHROMEDRIVER).exists()
