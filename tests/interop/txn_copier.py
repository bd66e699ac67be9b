"""A consume-transform-produce application (confluent-kafka), run as a subprocess by the pipeline test.

    python -m tests.interop.txn_copier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID ABORT_PROBABILITY SEED IDLE_EXIT_S

Reads INPUT with a read_committed consumer in GROUP (static member, so a restarted copier takes its own
place without a rebalance), writes `value.upper()` to OUTPUT inside a transaction together with the
consumed offsets (send_offsets_to_transaction), and commits — or, with the given probability, aborts and
rewinds the consumer to the group's committed offsets, as a real application does after a failure.
Abortable errors (a broker restart in the middle of a transaction) are handled the same way; a fatal
error exits with 3 so that the test starts a new instance. Exits 0 after IDLE_EXIT_S without input.
"""

from __future__ import annotations

import random
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def main(argv: list[str]) -> int:
    bootstrap, source, sink, group, txn_id, abort_probability, seed, idle_exit = argv
    rng = random.Random(int(seed))
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": f"{group}-member",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2})
    producer.init_transactions(60)
    consumer.subscribe([source])
    last_input = time.monotonic()
    while time.monotonic() - last_input < float(idle_exit):
        messages = [m for m in consumer.consume(20, 0.5) if m.error() is None]
        if not messages:
            continue
        last_input = time.monotonic()
        try:
            producer.begin_transaction()
            for message in messages:
                value = message.value() or b""
                producer.produce(sink, key=message.key(), value=value.upper())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            if rng.random() < float(abort_probability):
                raise _Rewind
            producer.commit_transaction(30)
        except _Rewind:
            producer.abort_transaction(30)
            rewind(consumer)
        except KafkaException as e:
            error = e.args[0]
            if error.fatal():
                print(f"fatal: {error}", file=sys.stderr, flush=True)
                return 3
            if error.txn_requires_abort():
                producer.abort_transaction(60)
            elif not error.retriable():
                print(f"unexpected: {error}", file=sys.stderr, flush=True)
                return 3
            else:
                producer.abort_transaction(60)
            rewind(consumer)
    consumer.close()
    return 0


class _Rewind(Exception):
    pass


def rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets (the aborted transaction's input is read again)."""
    assignment = consumer.assignment()
    for tp in consumer.committed(assignment, 30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else -2))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
