"""The console in a real browser (headless Debian chromium) against a real broker with real
confluent-kafka traffic: a transaction opened by a producer shows as open, then committed, without the
page being reloaded; a transaction left open shows as hanging with the command that aborts it; the record
browser marks open and aborted records; a consumer group's lag falls as its consumer catches up."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from exactly.testing import browser
from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.support import running_broker

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(browser.available() is not None, reason=str(browser.available())),
]

HANGING_MS = 2000
LAG_CELL = 'section[data-group="console-g"] tr[data-partition="console-lag-0"] .lag-value'


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


def _found(driver: Any, selector: str, attribute: str = "class") -> list[tuple[str, str]]:
    """(text, attribute) of every element matching `selector`, read in one script: the page swaps its
    live part every 2 s, so elements found in one call may be gone by the next."""
    found: list[list[str]] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(e => [e.innerText, e.getAttribute(arguments[1]) || ''])",
        selector,
        attribute,
    )
    return [(text, value) for text, value in found]


def _text(driver: Any, selector: str) -> str:
    found = _found(driver, selector)
    return found[0][0] if found else ""


def _row_state(driver: Any, txn_id: str) -> str | None:
    rows = _found(driver, f'tr[data-txn="{txn_id}"]', "data-state")
    return rows[0][1] if rows else None


def _live_updates(driver: Any) -> int:
    return int(_found(driver, "#live", "data-updated")[0][1] or 0)


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
    assert "console-orders-0" in _text(driver, 'tr[data-txn="console-open"]')
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
        return "HANGING" in _text(d, 'tr[data-txn="console-stuck"].hanging')

    browser.wait_for(driver, hanging, seconds=HANGING_MS / 1000 + 15, message="not shown hanging")
    row = _text(driver, 'tr[data-txn="console-stuck"]')
    assert "exactly txn abort --topic console-stuck --partition 0 --start-offset 0" in row
    in_log = _text(driver, '#open-in-logs tr[data-partition="console-stuck-0"]')
    assert "HANGING" in in_log
    assert "console-stuck" in in_log
    assert _row_state(driver, "console-aborter") == "CompleteAbort"

    driver.get(f"{base}/records?topic=console-stuck&partition=0&offset=0&isolation=read_uncommitted")
    rows = browser.wait_for(driver, lambda d: _found(d, "#records tbody td.status", "data-offset"))
    offsets = [int(offset) for _, offset in _found(driver, "#records tbody tr", "data-offset")]
    status = dict(zip(offsets, [text for text, _ in rows], strict=True))
    assert status[0] == status[1] == status[2] == "open transaction"
    assert status[3] == "aborted"
    assert status[4] == "marker"
    driver.get(f"{base}/records?topic=console-stuck&partition=0&offset=0&isolation=read_committed")
    summary = _text(driver, "main .summary")
    assert "read_committed" in summary
    assert "LSO 0" in summary
    assert not _found(driver, "#records tbody tr")
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
            text = _text(d, LAG_CELL)
            return int(text) if text.isdigit() else None

        browser.wait_for(driver, lambda d: lag(d) == 200, message="lag 200 not shown")
        members = _text(driver, 'section[data-group="console-g"] table.members')
        assert "console-consumer" in members  # the member, holding the partition
        assert "console-lag-0" in members
        while read < 300:
            assert time.monotonic() < deadline + 10, "the consumer did not catch up"
            read += len(consumer.consume(300 - read, 0.5))
        consumer.commit(asynchronous=False)
        browser.wait_for(driver, lambda d: lag(d) == 0, message="lag did not fall to 0")
    finally:
        consumer.close()


def test_the_brokers_page_and_http_answers(console: tuple[BrokerProcess, str], driver: Any) -> None:
    _, base = console
    driver.get(f"{base}/")
    assert "Brokers" in driver.title
    assert "One broker" in _text(driver, "#live")
    assert "Console security: off" in _text(driver, "#live")
    with urllib.request.urlopen(f"{base}/static/console.js", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/javascript")
    for path, status in (("/nothing", 404), ("/static/../pages.py", 404)):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + path, timeout=10)
        assert refused.value.code == status
    fragment = urllib.request.Request(f"{base}/topics", headers={"X-Console-Fragment": "1"})
    with urllib.request.urlopen(fragment, timeout=10) as response:
        body = response.read().decode()
    assert body.lstrip().startswith("<h1>Topics</h1>")
