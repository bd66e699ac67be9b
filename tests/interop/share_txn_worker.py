"""A consume → transform → produce worker of a share group whose acknowledgements commit with its output
(exactly's transactional share acks), in its own process, for test_share_transactional_acks.

    python -m tests.interop.share_txn_worker --bootstrap HOST:PORT --group G --input IN --output OUT
        --txn-id ID [--seed 1]

Forever: `ShareConsumer.poll` (exactly's protocol-level share consumer; librdkafka's cannot hand its acks
to another API), begin, produce `value + b"!"` to OUT partition 0 (one batch), add ACCEPT for the polled
records to the transaction (`TransactionalShareAck`), commit. A refused ack (INVALID_RECORD_STATE: a lock
expired meanwhile) aborts the transaction. Short random sleeps between the steps widen the windows a
kill -9 can land in. Every line on stdout is one JSON object: {"event": "ready"}, {"event": "committed",
"records": n}, {"event": "aborted", "reason": ...}.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from exactly.client.share import ShareConsumer, TransactionalShareAck
from exactly.client.txn import TransactionalProducer, TransactionError
from exactly.errors import ErrorCode


def say(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--group", "--input", "--output", "--txn-id"):
        parser.add_argument(name, required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    producer = TransactionalProducer(
        args.bootstrap, args.txn_id, transaction_version=1, transaction_timeout_ms=3000, timeout_s=20
    )
    producer.init()  # fences and aborts a killed predecessor's transaction
    consumer = ShareConsumer(args.bootstrap, args.group, [args.input])
    acks = TransactionalShareAck(producer)
    say("ready", member=consumer.member_id)
    while True:
        records = consumer.poll(max_records=rng.randint(1, 8), max_wait_ms=200)
        if not records:
            continue
        time.sleep(rng.random() * 0.02)
        producer.send(args.output, 0, [(r.value or b"") + b"!" for r in records])
        time.sleep(rng.random() * 0.02)
        try:
            acks.acknowledge(consumer, records)
        except TransactionError as e:
            if e.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
                raise
            producer.abort()
            say("aborted", reason=str(e))
            continue
        time.sleep(rng.random() * 0.02)
        producer.commit()
        say("committed", records=len(records))


if __name__ == "__main__":
    main()
