"""`make screenshots`: PNGs of the web console's main pages in docs/console/, taken in headless Debian
chromium from a real broker with real traffic (confluent-kafka): a topic being written, a consumer group
behind, a committed, an open and a hanging transaction, an aborted one, and a Spark-style two-phase batch
prepared and waiting for its decision.

    python -m tools.console_screenshots [--out docs/console]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from exactly.client.twopc import TwoPhaseClient
from exactly.testing import browser
from exactly.testing.processes import BrokerProcess, free_port

PAGES = {
    "brokers": "/console/",
    "topics": "/console/topics",
    "groups": "/console/groups",
    "transactions": "/console/transactions",
    "two-phase": "/console/two-phase",
    "records": "/console/records?topic=payments&partition=0&offset=0&isolation=read_uncommitted",
}


def _traffic(bootstrap: str) -> list[Producer]:
    """Leaves producers with open transactions: they are returned so they stay alive."""
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(2000):
        plain.produce("clicks", f"click-{i}".encode(), key=f"user-{i % 50}".encode(), partition=i % 3)
    plain.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "dashboards",
            "client.id": "dashboards-1",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["clicks"])
    read = 0
    deadline = time.monotonic() + 30
    while read < 900 and time.monotonic() < deadline:
        read += len(consumer.consume(300, 0.5))
    consumer.commit(
        offsets=[TopicPartition("clicks", p, 300) for p in range(3)], asynchronous=False
    )  # behind on purpose; the consumer stays a member
    kept: list[Producer] = []

    def transactional(txn_id: str) -> Producer:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1})
        producer.init_transactions(10)
        producer.begin_transaction()
        return producer

    committed = transactional("payments-writer-1")
    for i in range(5):
        committed.produce(
            "payments", f'{{"payment": {i}, "amount": {10 * i}}}'.encode(), key=b"acct-1", partition=0
        )
    committed.commit_transaction(10)
    aborted = transactional("payments-writer-2")
    aborted.produce("payments", b'{"payment": 99, "amount": -1}', key=b"acct-2", partition=0)
    aborted.flush(10)
    aborted.abort_transaction(10)
    stuck = transactional("payments-writer-3")
    stuck.produce("payments", b'{"payment": 100, "amount": 25}', key=b"acct-3", partition=0)
    stuck.flush(10)
    kept.append(stuck)
    with TwoPhaseClient(bootstrap) as client:
        for task in range(2):
            txn_id = f"spark-query-7f3a-batch-12-task-{task}"
            producer = transactional(txn_id)
            producer.produce("enriched", f"row-{task}".encode(), partition=task % 3)
            producer.flush(10)
            client.prepare(txn_id, "7f3a", 12, task)
            kept.append(producer)
    kept.append(consumer)  # type: ignore[arg-type]
    return kept


def _keep_writing(bootstrap: str, stop: threading.Event) -> None:
    """Clicks at a steady rate while the pages are shot, so the topics page shows live rates."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    i = 0
    while not stop.wait(0.01):
        producer.produce("clicks", f"click-{i}".encode(), partition=i % 3)
        producer.poll(0)
        i += 1
    producer.flush(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/console"))
    args = parser.parse_args()
    why = browser.available()
    if why is not None:
        raise SystemExit(why)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(
            Path(tmp) / "data",
            f"metrics.listener=http://127.0.0.1:{port}",
            "console.enable=true",
            "console.hanging.transaction.ms=3000",
            "transaction.state.log.num.partitions=2",
            "offsets.topic.num.partitions=2",
            "group.initial.rebalance.delay.ms=0",
            "num.partitions=3",
        )
        broker.start()
        driver = browser.chromium(1360, 1000)
        stop = threading.Event()
        writer = threading.Thread(target=_keep_writing, args=(broker.bootstrap, stop), daemon=True)
        try:
            kept = _traffic(broker.bootstrap)
            writer.start()
            time.sleep(3.5)  # the open transaction passes the hanging threshold
            base = f"http://127.0.0.1:{port}"
            driver.get(f"{base}/console/topics")  # a first look starts the rates
            time.sleep(2.5)
            for name, path in PAGES.items():
                driver.get(base + path)
                browser.wait_for(driver, lambda d: d.find_element("id", "live").text.strip())
                height = driver.execute_script("return document.documentElement.scrollHeight")
                driver.set_window_size(1360, max(700, min(int(height) + 140, 2400)))
                time.sleep(0.3)
                target = out / f"{name}.png"
                driver.save_screenshot(str(target))
                print(f"wrote {target}")
            del kept
        finally:
            stop.set()
            if writer.is_alive():
                writer.join(10)
            driver.quit()
            broker.stop()


if __name__ == "__main__":
    main()
