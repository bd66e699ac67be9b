"""One consumer-group member of `exactly bench rebalance`, in a process of its own so that it can be
SIGKILLed: a confluent-kafka (librdkafka) `Consumer` that reports every change of the partitions it owns.

    python -m exactly.bench.rebalance_member --bootstrap HOST:PORT --group G --topic T
        --protocol classic|consumer [--strategy range|cooperative-sticky] [--session-ms 3000]
        [--heartbeat-ms 500]

Its conversation with the bench is line-based. On stdout, one JSON object a line, each stamped with
`t` = `time.monotonic()` (CLOCK_MONOTONIC, the same kernel clock in every process of the machine):

    {"event": "ready", "t": ...}                       the Consumer exists; waiting for "go"
    {"event": "subscribing", "t": ...}                 right before subscribe()
    {"event": "subscribed", "t": ...}                  after subscribe() returned
    {"event": "assigned", "t": ..., "partitions": [0, 3]}   the whole owned set after every change
    {"event": "closed", "t": ...}                      consumer.close() returned

On stdin: `go` (subscribe now) and `close` (close the consumer cleanly: revoke, LeaveGroup, exit).
"Owned" is what the rebalance callbacks say: an eager (classic `range`) member owns nothing between its
`on_revoke` and its `on_assign`; a cooperative or KIP-848 member gains and loses partitions one callback
at a time (librdkafka's incremental callbacks).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if args.protocol == "consumer":
        # KIP-848: the broker assigns and sets the session timeout and heartbeat interval
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = args.session_ms
        config["heartbeat.interval.ms"] = args.heartbeat_ms
        config["partition.assignment.strategy"] = args.strategy
    return config


def run(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(consumer_config(args))
    owned: set[int] = set()
    incremental = args.protocol == "consumer" or args.strategy == "cooperative-sticky"

    def on_assign(_: Any, partitions: list[Any]) -> None:
        if not incremental:
            owned.clear()
        owned.update(p.partition for p in partitions)
        emit("assigned", partitions=sorted(owned))

    def on_revoke(_: Any, partitions: list[Any]) -> None:
        owned.difference_update(p.partition for p in partitions)
        emit("assigned", partitions=sorted(owned))

    commands: dict[str, threading.Event] = {"go": threading.Event(), "close": threading.Event()}

    def read_commands() -> None:
        for line in sys.stdin:
            event = commands.get(line.strip())
            if event is not None:
                event.set()
        commands["close"].set()  # the bench went away

    threading.Thread(target=read_commands, daemon=True).start()
    emit("ready")
    commands["go"].wait()
    emit("subscribing")
    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    emit("subscribed")
    while not commands["close"].is_set():
        consumer.poll(0.05)
    consumer.close()
    emit("closed")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m exactly.bench.rebalance_member")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--protocol", choices=["classic", "consumer"], required=True)
    parser.add_argument("--strategy", default="range", choices=["range", "roundrobin", "cooperative-sticky"])
    parser.add_argument("--session-ms", type=int, default=3000)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--name", default="member")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
