"""The transactional soak of issue 10 item 8: confluent-kafka producers that abort without a flush.

N transactional producers (one process, a thread each; `linger.ms` 2) each run transactions of
RECORDS records of RECORD_BYTES bytes; every fifth transaction is aborted with `abort_transaction()`
right after its `produce()` calls, without a flush — librdkafka then purges the queued records and
sends EndTxn(abort) once it has sent an AddPartitionsToTxn for the transaction, even one still in
flight or answered with CONCURRENT_TRANSACTIONS. A read_committed consumer reads the topic meanwhile.

`run_soak` returns what happened: per producer the committed and aborted transaction numbers and the
fatal error that killed it, if any; the consumer's records. Each record value is
`<transactional id>:<transaction number>:<index>:` padded to RECORD_BYTES, so the consumer's view can
be compared with the set of committed transactions.

Standalone (for reproducing under load by hand):
    python -m tests.interop.txn_soak --bootstrap 127.0.0.1:9092 --seconds 150
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

TOPIC = "soak"
PARTITIONS = 3
RECORDS = 50
RECORD_BYTES = 512
ABORT_EVERY = 5


@dataclass
class ProducerOutcome:
    transactional_id: str
    committed: list[int] = field(default_factory=list)  # transaction numbers commit_transaction() ended
    aborted: list[int] = field(default_factory=list)
    fatal: str | None = None  # the fatal error that ended the producer
    errors: Counter[str] = field(default_factory=Counter)  # retriable / abortable errors seen


@dataclass
class SoakOutcome:
    producers: list[ProducerOutcome]
    consumed: Counter[bytes]  # record value -> times the read_committed consumer saw it
    consumer_errors: list[str]

    def expected(self) -> Counter[bytes]:
        """Every record of every committed transaction, once."""
        return Counter(
            record_value(p.transactional_id, txn, i)
            for p in self.producers
            for txn in p.committed
            for i in range(RECORDS)
        )

    def summary(self) -> dict[str, Any]:
        return {
            "producers": [
                {
                    "id": p.transactional_id,
                    "committed": len(p.committed),
                    "aborted": len(p.aborted),
                    "fatal": p.fatal,
                    "errors": dict(p.errors),
                }
                for p in self.producers
            ],
            "consumed": sum(self.consumed.values()),
            "expected": sum(self.expected().values()),
            "consumer_errors": self.consumer_errors[:10],
        }


def record_value(transactional_id: str, txn: int, index: int) -> bytes:
    return f"{transactional_id}:{txn}:{index}:".encode().ljust(RECORD_BYTES, b".")


def _produce_loop(
    bootstrap: str, outcome: ProducerOutcome, stop: threading.Event, extra: dict[str, Any]
) -> None:
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": outcome.transactional_id,
            "linger.ms": 2,
            **extra,
        }
    )
    try:
        producer.init_transactions(60)
        txn = 0
        while True:
            # Stop after a commit: an abort whose EndTxn librdkafka skips (the AddPartitionsToTxn answer
            # came after abort_transaction() began) leaves the coordinator's transaction open until the
            # producer's next EndTxn; the next transaction's commit ends it.
            if stop.is_set() and outcome.committed[-1:] == [txn]:
                break
            txn += 1
            abort = txn % ABORT_EVERY == 0
            producer.begin_transaction()
            try:
                for i in range(RECORDS):
                    producer.produce(TOPIC, record_value(outcome.transactional_id, txn, i), str(i).encode())
                producer.poll(0)
                if abort:
                    producer.abort_transaction(60)
                    outcome.aborted.append(txn)
                else:
                    _commit(producer, outcome, txn)
            except KafkaException as e:
                error = e.args[0]
                if error.fatal():
                    outcome.fatal = f"{error.name()}: {error.str()} (transaction {txn})"
                    return
                outcome.errors[error.name()] += 1
                if not error.txn_requires_abort():
                    raise
                producer.abort_transaction(60)
                outcome.aborted.append(txn)
    except KafkaException as e:
        outcome.fatal = f"{e.args[0].name()}: {e.args[0].str()}"
    finally:
        with contextlib.suppress(KafkaException):  # a fatal error raises here too
            producer.flush(10)


def _commit(producer: Any, outcome: ProducerOutcome, txn: int) -> None:
    from confluent_kafka import KafkaException

    while True:
        try:
            producer.commit_transaction(60)
        except KafkaException as e:
            if e.args[0].retriable():
                outcome.errors[e.args[0].name()] += 1
                continue
            raise
        outcome.committed.append(txn)
        return


def _consume_loop(
    bootstrap: str, consumed: Counter[bytes], errors: list[str], stop: threading.Event, idle_s: float
) -> None:
    """Read the topic read_committed until `stop` is set and nothing arrived for `idle_s`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-check-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        last = time.monotonic()
        while not (stop.is_set() and time.monotonic() - last > idle_s):
            for message in consumer.consume(500, 0.2):
                if message.error() is not None:
                    errors.append(str(message.error()))
                    continue
                value = message.value()
                assert value is not None
                consumed[value] += 1
                last = time.monotonic()
    finally:
        consumer.close()


def run_soak(
    bootstrap: str,
    seconds: float,
    producers: int = 3,
    producer_config: dict[str, Any] | None = None,
    consumer_idle_s: float = 5.0,
) -> SoakOutcome:
    """Create the topic, run the producers for `seconds` and the consumer until it has read everything."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    outcomes = [ProducerOutcome(f"soak-{n}") for n in range(producers)]
    stop_producers, stop_consumer = threading.Event(), threading.Event()
    consumed: Counter[bytes] = Counter()
    consumer_errors: list[str] = []
    threads = [
        threading.Thread(
            target=_produce_loop, args=(bootstrap, o, stop_producers, producer_config or {}), daemon=True
        )
        for o in outcomes
    ]
    consumer = threading.Thread(
        target=_consume_loop,
        args=(bootstrap, consumed, consumer_errors, stop_consumer, consumer_idle_s),
        daemon=True,
    )
    consumer.start()
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(t.is_alive() for t in threads):
        time.sleep(0.2)
    stop_producers.set()
    for thread in threads:
        thread.join(120)
    stop_consumer.set()
    consumer.join(120)
    return SoakOutcome(outcomes, consumed, consumer_errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--debug", default="", help="librdkafka debug contexts, e.g. eos,protocol")
    args = parser.parse_args()
    config = {"debug": args.debug} if args.debug else {}
    outcome = run_soak(args.bootstrap, args.seconds, args.producers, config)
    summary = outcome.summary()
    expected = outcome.expected()
    summary["missing"] = sum((expected - outcome.consumed).values())
    summary["unexpected"] = sum((outcome.consumed - expected).values())
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
