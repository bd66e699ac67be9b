"""`exactly consume TOPIC`: print a topic's records. Like kafka-console-consumer without --group, the
consumer assign()s every partition (or the chosen ones) from the beginning or the end and commits nothing."""

from __future__ import annotations

import sys
import time
from enum import StrEnum
from typing import Annotated

import typer

from exactly.cli.common import (
    BootstrapOption,
    fail,
    kafka_error_text,
    reported_errors,
    session_for,
)

_BATCH = 500


class Isolation(StrEnum):
    read_committed = "read_committed"
    read_uncommitted = "read_uncommitted"


def consume(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="topic to read")],
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="start at the log start instead of the end")
    ] = False,
    partitions: Annotated[
        list[int] | None, typer.Option("--partition", "-p", help="read only this partition; repeatable")
    ] = None,
    isolation: Annotated[
        Isolation,
        typer.Option("--isolation", help="read_committed skips aborted and still-open transactions"),
    ] = Isolation.read_committed,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-n", help="stop after N records")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", "-t", help="stop after this many seconds without a record"),
    ] = None,
    exit_at_end: Annotated[
        bool, typer.Option("--exit-at-end", "-e", help="stop once every partition is read to its end")
    ] = False,
    print_key: Annotated[bool, typer.Option("--print-key", help="print KEY<TAB>VALUE")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no summary line on stderr")] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Print TOPIC's record values, one per line (null for a null value)."""
    with reported_errors():
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

        if max_messages is not None and max_messages < 0:
            fail("--max-messages must not be negative", 2)
        if timeout is not None and timeout < 0:
            fail("--timeout must not be negative", 2)
        session = session_for(ctx, bootstrap)
        consumer = Consumer(
            session.config(
                **{
                    # Required by librdkafka even for assign(); nothing is ever committed to it.
                    "group.id": "exactly-cli",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "isolation.level": isolation.value,
                    "enable.partition.eof": exit_at_end,
                    "auto.offset.reset": "earliest" if from_beginning else "latest",
                }
            )
        )
        count = 0
        try:
            metadata = session.call(
                lambda t: consumer.list_topics(topic, timeout=t), consumer.poll, "topic metadata"
            )
            info = metadata.topics.get(topic)
            err = info.error if info is not None else None
            if err is not None:
                if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    fail(f"topic {topic!r} does not exist")
                fail(f"cannot consume topic {topic!r}: {kafka_error_text(err)}")
            existing = sorted(info.partitions) if info is not None else []
            chosen = sorted(set(partitions)) if partitions else existing
            missing = [p for p in chosen if p not in existing]
            if missing:
                fail(f"topic {topic!r} has no partition {missing[0]} (it has {len(existing)})")
            start = OFFSET_BEGINNING if from_beginning else OFFSET_END
            consumer.assign([TopicPartition(topic, p, start) for p in chosen])

            out = sys.stdout.buffer
            at_end: set[int] = set()
            last_activity = time.monotonic()
            try:
                while max_messages is None or count < max_messages:
                    want = _BATCH if max_messages is None else min(_BATCH, max_messages - count)
                    messages = consumer.consume(want, 0.1)
                    for msg in messages:
                        error = msg.error()
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                at_end.add(msg.partition() or 0)
                            elif not error.retriable():
                                fail(
                                    f"cannot consume topic {topic!r} partition {msg.partition()}: "
                                    f"{kafka_error_text(error)}"
                                )
                            continue
                        at_end.discard(msg.partition() or 0)
                        value = msg.value()
                        line = b"null" if value is None else _as_bytes(value)
                        if print_key:
                            key = msg.key()
                            line = (b"null" if key is None else _as_bytes(key)) + b"\t" + line
                        out.write(line + b"\n")
                        count += 1
                    now = time.monotonic()
                    if messages:
                        out.flush()
                        last_activity = now
                    if exit_at_end and at_end.issuperset(chosen):
                        break
                    if timeout is not None and now - last_activity >= timeout:
                        break
            except KeyboardInterrupt:
                pass
            out.flush()
        finally:
            consumer.close()
        if not quiet:
            typer.echo(f"consumed {count:,} message{'s' if count != 1 else ''} from {topic!r}", err=True)


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode() if isinstance(data, str) else data
