"""A consume-transform-produce application in its own process, for the exactly-once pipeline tests.

    python -m tests.interop.txn_copier --client confluent|kafka-python|aiokafka --bootstrap HOST:PORT
        --input IN --output OUT --group G --txn-id ID [--abort-probability 0.2] [--seed 1]
        [--max-batch 40] [--idle-check 1.0]

It reads IN with a read_committed consumer of group G (manual commits; with confluent-kafka a static
member, so that a restarted copier takes its predecessor's place without waiting for a session timeout),
and for every batch it polls: begins a transaction, produces `transform(value)` with the same key to
OUT, sends the consumer's positions with the group metadata (`send_offsets_to_transaction`) and commits.
With `--abort-probability` it aborts instead — after a flush, so that the aborted records are in OUT's
log for read_committed consumers to skip — and rewinds the consumer to the group's committed offsets
(`committed` + `seek`), as an application does after a failed transaction; an abortable error (a broker
restart in the middle of a transaction) is handled the same way, a retriable one is retried. A fatal
error (e.g. fenced by a newer instance) exits with 3 so that the test starts a new instance.

It exits 0 once it has been idle for `--idle-check` seconds and the group's committed offsets reached
the end of every partition of IN. Every line on stdout is one JSON object:

    {"event": "started"}
    {"event": "ready"}                          init_transactions returned
    {"event": "committed", "records": 20}       a transaction with 20 input records committed
    {"event": "aborted", "records": 20, "reason": "..."}
    {"event": "fatal", "error": "..."}          then exit 3
    {"event": "done", "committed": {...}}       committed offsets == end offsets, exit 0

SIGUSR1 dumps the Python stacks to stderr (the test does so before failing on a stuck copier);
COPIER_DEBUG=<librdkafka debug contexts> turns on librdkafka's debug log.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import random
import signal
import sys
import time
from typing import Any

FATAL_EXIT = 3
OPERATION_TIMEOUT_S = 30.0


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def transform(value: bytes | None) -> bytes:
    return (value or b"").upper()


class Fatal(Exception):
    pass


# --- confluent-kafka --------------------------------------------------------------------------------------


def run_confluent(args: argparse.Namespace, rng: random.Random) -> int:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    common: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        # With one broker, its restart makes "all brokers down", and librdkafka's default re-bootstrap
        # then decommissions the broker that is cached as group coordinator: send_offsets_to_transaction
        # hangs for good, its timeout ignored (librdkafka issue #5511, fix PR #5512 not in 2.16).
        "metadata.recovery.strategy": "none",
        # back within a second of the broker's restart (the default backoff grows to 10 s)
        "reconnect.backoff.max.ms": 500,
    }
    if os.environ.get("COPIER_DEBUG"):
        common["debug"] = os.environ["COPIER_DEBUG"]
    consumer = Consumer(
        {
            **common,
            "group.id": args.group,
            "group.instance.id": f"{args.group}-member",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # a session must outlive the broker's restart: once librdkafka times a session out locally
            # it resets the member id, and its next Heartbeat gets FENCED_INSTANCE_ID (fatal) because
            # the static member is still registered under the old id
            "session.timeout.ms": 20000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            **common,
            "transactional.id": args.txn_id,
            "linger.ms": 2,
            "transaction.timeout.ms": 20000,
        }
    )

    def retrying(what: str, call: Any) -> Any:
        """librdkafka's documented pattern: retry a retriable error, raise the others."""
        deadline = time.monotonic() + 90
        while True:
            try:
                return call()
            except KafkaException as e:
                error = e.args[0]
                if error.fatal():
                    raise Fatal(f"{what}: {error}") from e
                if error.retriable() and not error.txn_requires_abort() and time.monotonic() < deadline:
                    emit("retry", what=what, error=str(error))
                    time.sleep(0.1)
                    continue
                raise

    def rewind() -> None:
        assignment = consumer.assignment()
        if not assignment:
            return
        committed = retrying("committed", lambda: consumer.committed(assignment, 10))
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else -2  # OFFSET_BEGINNING when nothing is committed
            retrying("seek", lambda tp=tp, o=offset: consumer.seek(TopicPartition(tp.topic, tp.partition, o)))

    def caught_up() -> bool:
        metadata = consumer.list_topics(args.input, 10).topics[args.input]
        tps = [TopicPartition(args.input, p) for p in sorted(metadata.partitions)]
        committed = consumer.committed(tps, 10)
        ends = [consumer.get_watermark_offsets(tp, 10, cached=False)[1] for tp in tps]
        done = all(c.offset >= end for c, end in zip(committed, ends, strict=True))
        if done:
            emit("done", committed={str(c.partition): c.offset for c in committed})
        return done

    def abort(reason: str, records: int) -> None:
        retrying("abort_transaction", lambda: producer.abort_transaction(OPERATION_TIMEOUT_S))
        emit("aborted", records=records, reason=reason)
        rewind()

    emit("started")
    try:
        retrying("init_transactions", lambda: producer.init_transactions(OPERATION_TIMEOUT_S))
        emit("ready")
        consumer.subscribe([args.input])
        idle_since = time.monotonic()
        while True:
            messages = consumer.consume(rng.randint(1, args.max_batch), 0.2)
            for m in messages:
                error = m.error()
                if error is not None and error.fatal():
                    raise Fatal(f"consumer: {error}")
            data = [m for m in messages if m.error() is None]
            if not data:
                if time.monotonic() - idle_since >= args.idle_check:
                    idle_since = time.monotonic()
                    try:
                        if caught_up():
                            break
                    except KafkaException as e:
                        emit("retry", what="caught_up", error=str(e.args[0]))
                continue
            idle_since = time.monotonic()
            try:
                producer.begin_transaction()
                for m in data:
                    producer.produce(args.output, key=m.key(), value=transform(m.value()))
                positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                metadata = consumer.consumer_group_metadata()
                retrying(
                    "send_offsets_to_transaction",
                    lambda p=positions, g=metadata: producer.send_offsets_to_transaction(
                        p, g, OPERATION_TIMEOUT_S
                    ),
                )
                if rng.random() < args.abort_probability:
                    producer.flush(OPERATION_TIMEOUT_S)  # the aborted records are in the log
                    abort("on purpose", len(data))
                    continue
                retrying("commit_transaction", lambda: producer.commit_transaction(OPERATION_TIMEOUT_S))
                emit("committed", records=len(data))
            except KafkaException as e:
                error = e.args[0]
                if error.fatal():
                    raise Fatal(str(error)) from e
                abort(f"error: {error}", len(data))
    except Fatal as e:
        emit("fatal", error=str(e))
        return FATAL_EXIT
    consumer.close()
    producer.flush(5)
    return 0


# --- kafka-python ------------------------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace, rng: random.Random) -> int:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError, ProducerFencedError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        args.input,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = KafkaProducer(bootstrap_servers=args.bootstrap, transactional_id=args.txn_id, linger_ms=2)

    def rewind(tps: list[Any]) -> None:
        for tp in tps:
            committed = consumer.committed(tp)  # kafka-python 3: the offset, or None
            if committed is None:
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, committed)

    def caught_up() -> bool:
        tps = [TopicPartition(args.input, p) for p in sorted(consumer.partitions_for_topic(args.input) or [])]
        ends = consumer.end_offsets(tps)
        committed = {tp: consumer.committed(tp) for tp in tps}
        done = bool(tps) and all((committed[tp] or 0) >= ends[tp] for tp in tps)
        if done:
            emit("done", committed={str(tp.partition): committed[tp] for tp in tps})
        return done

    emit("started")
    try:
        producer.init_transactions()
        emit("ready")
        idle_since = time.monotonic()
        while True:
            batches = consumer.poll(timeout_ms=200, max_records=rng.randint(1, args.max_batch))
            if not batches:
                if time.monotonic() - idle_since >= args.idle_check:
                    idle_since = time.monotonic()
                    if caught_up():
                        break
                continue
            idle_since = time.monotonic()
            records = sum(len(messages) for messages in batches.values())
            try:
                producer.begin_transaction()
                for messages in batches.values():
                    for m in messages:
                        producer.send(args.output, key=m.key, value=transform(m.value))
                offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in batches}
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                if rng.random() < args.abort_probability:
                    producer.flush()  # the aborted records are in the log
                    producer.abort_transaction()
                    emit("aborted", records=records, reason="on purpose")
                    rewind(list(batches))
                    continue
                producer.commit_transaction()
                emit("committed", records=records)
            except ProducerFencedError as e:
                raise Fatal(str(e)) from e
            except KafkaError as e:
                producer.abort_transaction()
                emit("aborted", records=records, reason=f"error: {e!r}")
                rewind(list(batches))
    except Fatal as e:
        emit("fatal", error=str(e))
        return FATAL_EXIT
    producer.close()
    consumer.close()
    return 0


# --- aiokafka ----------------------------------------------------------------------------------------------


async def run_aiokafka(args: argparse.Namespace, rng: random.Random) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.errors import KafkaError, ProducerFenced

    consumer = AIOKafkaConsumer(
        args.input,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, transactional_id=args.txn_id, linger_ms=2)

    async def rewind(tps: list[Any]) -> None:
        for tp in tps:
            committed = await consumer.committed(tp)
            if committed is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, committed)

    async def caught_up() -> bool:
        partitions = consumer.partitions_for_topic(args.input) or set()
        tps = [TopicPartition(args.input, p) for p in sorted(partitions)]
        ends = await consumer.end_offsets(tps)
        committed = {tp: await consumer.committed(tp) for tp in tps}
        done = bool(tps) and all((committed[tp] or 0) >= ends[tp] for tp in tps)
        if done:
            emit("done", committed={str(tp.partition): committed[tp] for tp in tps})
        return done

    emit("started")
    await producer.start()
    await consumer.start()
    try:
        emit("ready")
        idle_since = time.monotonic()
        while True:
            batches = await consumer.getmany(timeout_ms=200, max_records=rng.randint(1, args.max_batch))
            if not batches:
                if time.monotonic() - idle_since >= args.idle_check:
                    idle_since = time.monotonic()
                    if await caught_up():
                        break
                continue
            idle_since = time.monotonic()
            records = sum(len(messages) for messages in batches.values())
            try:
                await producer.begin_transaction()
                sent = [
                    await producer.send(args.output, key=m.key, value=transform(m.value))
                    for messages in batches.values()
                    for m in messages
                ]
                offsets = {tp: await consumer.position(tp) for tp in batches}
                await producer.send_offsets_to_transaction(offsets, args.group)
                if rng.random() < args.abort_probability:
                    await asyncio.gather(*sent)  # the aborted records are in the log
                    await producer.abort_transaction()
                    emit("aborted", records=records, reason="on purpose")
                    await rewind(list(batches))
                    continue
                await producer.commit_transaction()
                emit("committed", records=records)
            except ProducerFenced as e:
                raise Fatal(str(e)) from e
            except KafkaError as e:
                await producer.abort_transaction()
                emit("aborted", records=records, reason=f"error: {e!r}")
                await rewind(list(batches))
    except Fatal as e:
        emit("fatal", error=str(e))
        return FATAL_EXIT
    finally:
        await producer.stop()
        await consumer.stop()
    return 0


def main(argv: list[str]) -> int:
    faulthandler.register(signal.SIGUSR1)  # the test dumps a stuck copier's stacks to stderr
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=["confluent", "kafka-python", "aiokafka"], default="confluent")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--txn-id", required=True)
    parser.add_argument("--abort-probability", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-batch", type=int, default=40)
    parser.add_argument("--idle-check", type=float, default=1.0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    if args.client == "confluent":
        return run_confluent(args, rng)
    if args.client == "kafka-python":
        return run_kafka_python(args, rng)
    return asyncio.run(run_aiokafka(args, rng))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
