"""One consumer-group member in its own process, for the group interop tests.

    python -m tests.interop.group_member --client confluent|kafka-python|aiokafka --bootstrap HOST:PORT
        --group G --topic T [--strategy range|roundrobin|cooperative-sticky] [--instance-id ID]
        [--session-ms 6000] [--name NAME] [--protocol classic|consumer]

It subscribes to the topic, and for every record: commits offset+1 synchronously, then prints the
record. Every line on stdout is one JSON object:

    {"event": "started"}
    {"event": "assigned", "partitions": [0, 2]}        the whole assignment after every change
    {"event": "record", "partition": 0, "offset": 5, "value": "..."}
    {"event": "commit-failed", "partition": 0, "offset": 5, "error": "..."}
    {"event": "closed"}                                  after SIGTERM: a clean close (LeaveGroup)

SIGTERM closes the consumer cleanly; SIGKILL is what the tests use for a crash.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

HEARTBEAT_MS = 500
MAX_POLL_INTERVAL_MS = 20_000

stop = threading.Event()


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def run_confluent(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaException

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "max.poll.interval.ms": max(MAX_POLL_INTERVAL_MS, args.session_ms),
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.protocol == "consumer":
        # KIP-848: the broker assigns and sets the session and heartbeat interval
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = args.session_ms
        config["heartbeat.interval.ms"] = HEARTBEAT_MS
        config["partition.assignment.strategy"] = args.strategy
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    owned: set[int] = set()
    cooperative = args.strategy == "cooperative-sticky" or args.protocol == "consumer"

    def on_assign(c: Any, partitions: list[Any]) -> None:
        if cooperative:
            owned.update(p.partition for p in partitions)
        else:
            owned.clear()
            owned.update(p.partition for p in partitions)
        emit("assigned", partitions=sorted(owned))

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        owned.difference_update(p.partition for p in partitions)
        emit("assigned", partitions=sorted(owned))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    emit("started")
    while not stop.is_set():
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            continue
        try:
            consumer.commit(message=msg, asynchronous=False)
        except KafkaException as e:
            emit("commit-failed", partition=msg.partition(), offset=msg.offset(), error=str(e))
            continue
        emit("record", partition=msg.partition(), offset=msg.offset(), value=(msg.value() or b"").decode())
    consumer.close()
    emit("closed")


def _kafka_python_strategy(name: str) -> Any:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    return {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }[name]


def _resume_pending_join(consumer: Any) -> None:
    """Work around a kafka-python bug (3.0.12, and dpkp/kafka-python master of 2026-08) that strands a
    group leader mid-rebalance, which two interop tests hit under CPU load (issue 10 item 7).

    `KafkaConsumer.poll(timeout_ms=200)` gives up waiting for a JoinGroup/SyncGroup round when its
    timer expires and leaves that round running (`ConsumerCoordinator._join_task`), to be awaited by
    the next poll — but the next poll only looks at it when `need_rejoin()` is true. A leader that
    rejoins because its topic metadata changed (typically: its first assignment was computed before it
    knew the new topic's partitions) has `rejoin_needed` False, and computing the new assignment makes
    its metadata snapshots equal again, so once the timer expires between its JoinGroup and SyncGroup
    responses `need_rejoin()` stays False forever: the answered round is never completed, no
    assignment callback runs and heartbeats stay disabled, while the other members own their shares.
    Our broker answers that round exactly as Kafka does (tests/group/test_coordinator.py
    test_leader_rejoining_last_after_new_members_gets_every_member_its_share), so Kafka would strand it
    too. The Java client's rule is `rejoinNeededOrPending()`: rejoin needed *or a round in flight*;
    this applies it. A round that finished between two polls is then not reused but replaced by a fresh
    JoinGroup (kafka-python's own `join_group_async` does that whenever it finds a finished round; for a
    leader it is one more rebalance), so this needs polls back to back, as the member's loop does."""
    coordinator = consumer._coordinator
    if not hasattr(coordinator, "_join_task"):
        raise RuntimeError("kafka-python changed: re-check the pending-join workaround")
    need_rejoin = coordinator.need_rejoin

    def need_rejoin_or_pending() -> bool:
        return bool(need_rejoin()) or coordinator._join_task is not None

    coordinator.need_rejoin = need_rejoin_or_pending


def run_kafka_python(args: argparse.Namespace) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=max(MAX_POLL_INTERVAL_MS, args.session_ms),
        partition_assignment_strategy=[_kafka_python_strategy(args.strategy)],
        group_instance_id=args.instance_id or None,
        metadata_max_age_ms=1000,
    )
    _resume_pending_join(consumer)
    owned: set[int] = set()

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            owned.difference_update(tp.partition for tp in revoked)
            emit("assigned", partitions=sorted(owned))

        def on_partitions_assigned(self, assigned: Any) -> None:
            owned.update(tp.partition for tp in assigned)
            emit("assigned", partitions=sorted(owned))

    consumer.subscribe([args.topic], listener=Listener())
    emit("started")
    while not stop.is_set():
        try:
            batches = consumer.poll(timeout_ms=200)
        except KafkaError as e:  # kafka-python raises while the broker restarts; an application retries
            emit("poll-failed", error=repr(e))
            time.sleep(0.2)
            continue
        for tp, messages in batches.items():
            for m in messages:
                try:
                    consumer.commit({tp: OffsetAndMetadata(m.offset + 1, "", -1)})
                except KafkaError as e:
                    emit("commit-failed", partition=tp.partition, offset=m.offset, error=repr(e))
                    break
                emit("record", partition=tp.partition, offset=m.offset, value=m.value.decode())
    consumer.close()
    emit("closed")


async def _aiokafka_main(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    strategies = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=max(MAX_POLL_INTERVAL_MS, args.session_ms),
        partition_assignment_strategy=(strategies[args.strategy],),
        group_instance_id=args.instance_id or None,
        metadata_max_age_ms=1000,
    )
    owned: set[int] = set()

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            owned.difference_update(tp.partition for tp in revoked)
            emit("assigned", partitions=sorted(owned))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            owned.clear()
            owned.update(tp.partition for tp in assigned)
            emit("assigned", partitions=sorted(owned))

    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    emit("started")
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200)
            for tp, messages in batches.items():
                for m in messages:
                    try:
                        await consumer.commit({tp: m.offset + 1})
                    except KafkaError as e:
                        emit("commit-failed", partition=tp.partition, offset=m.offset, error=repr(e))
                        break
                    emit("record", partition=tp.partition, offset=m.offset, value=m.value.decode())
    finally:
        await consumer.stop()
    emit("closed")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True, choices=["confluent", "kafka-python", "aiokafka"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--strategy", default="range")
    parser.add_argument("--instance-id", default="")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--name", default="member")
    parser.add_argument("--protocol", default="classic", choices=["classic", "consumer"])
    args = parser.parse_args()
    debug = os.environ.get("GROUP_MEMBER_DEBUG", "")
    if debug:  # e.g. "kafka.coordinator,kafka.conn": those loggers of the client library at DEBUG, to stderr
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
        for name in debug.split(","):
            logging.getLogger(name.strip()).setLevel(logging.DEBUG)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if args.client == "confluent":
        run_confluent(args)
    elif args.client == "kafka-python":
        run_kafka_python(args)
    else:
        asyncio.run(_aiokafka_main(args))


if __name__ == "__main__":
    main()
