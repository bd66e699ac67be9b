"""`exactly produce TOPIC`: send stdin lines (or generated records) with an idempotent acks=all producer,
showing a live rate on stderr and a one-line summary at the end."""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from exactly.cli.common import (
    BootstrapOption,
    KafkaSession,
    fail,
    kafka_error_text,
    reported_errors,
    session_for,
)

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer
    from rich.console import RenderableType

MB = 1024 * 1024


class Codec(StrEnum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class Stats:
    """Counters shared by the producing thread, the delivery callbacks and the live display."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.started = time.monotonic()
        self.finished: float | None = None
        self.sent = 0
        self.sent_bytes = 0
        self.acked = 0
        self.acked_bytes = 0
        self.failed = 0
        self.first_error: str | None = None
        self._samples: deque[tuple[float, int, int]] = deque()

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = kafka_error_text(err)
        else:
            self.acked += 1
            self.acked_bytes += len(msg) + len(msg.key() or b"")

    @property
    def elapsed(self) -> float:
        return max((self.finished or time.monotonic()) - self.started, 1e-9)

    def current_rate(self) -> tuple[float, float]:
        """(records/s, bytes/s) of acknowledged records over the last two seconds."""
        now = time.monotonic()
        samples = self._samples
        samples.append((now, self.acked, self.acked_bytes))
        while len(samples) > 2 and now - samples[0][0] > 2.0:
            samples.popleft()
        t0, n0, b0 = samples[0]
        span = now - t0
        if span < 0.2:  # too early for a window: the average so far
            return self.acked / self.elapsed, self.acked_bytes / self.elapsed
        return (self.acked - n0) / span, (self.acked_bytes - b0) / span

    def render(self) -> RenderableType:
        from rich.text import Text

        rate, byte_rate = self.current_rate()
        sent = f"{self.sent:,}" + (f"/{self.total:,}" if self.total is not None else "")
        text = Text()
        text.append("producing ", style="bold")
        text.append(f"{sent} sent  {self.acked:,} acked  ")
        text.append(f"{rate:,.0f} rec/s  {byte_rate / MB:,.2f} MB/s", style="cyan")
        if self.failed:
            text.append(f"  {self.failed:,} failed", style="bold red")
        text.append(f"  {self.elapsed:,.1f} s", style="dim")
        return text

    def summary(self, topic: str) -> str:
        seconds = self.elapsed
        noun = "record" if self.acked == 1 else "records"
        return (
            f"produced {self.acked:,} {noun} ({_size(self.acked_bytes)}) to {topic!r} in {seconds:,.2f} s: "
            f"{self.acked / seconds:,.0f} records/s, {self.acked_bytes / MB / seconds:,.2f} MB/s"
        )


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < MB:
        return f"{n / 1024:,.1f} KB"
    return f"{n / MB:,.2f} MB"


def _stdin_records(stream: BinaryIO, separator: bytes | None) -> Iterator[tuple[bytes | None, bytes]]:
    for number, line in enumerate(stream, 1):
        if line.endswith(b"\n"):
            line = line[:-1]
        if separator is None:
            yield None, line
            continue
        key, sep, value = line.partition(separator)
        if not sep:
            fail(f"line {number} has no key separator {separator.decode(errors='replace')!r}")
        yield key, value


def _generated_records(count: int, size: int) -> Iterator[tuple[bytes | None, bytes]]:
    filler = b"x" * size
    for i in range(count):
        head = b"%d " % i
        yield None, (head + filler[len(head) :]) if size >= len(head) else head[:size]


def _unescape(separator: str) -> str:
    return separator.replace("\\t", "\t").replace("\\n", "\n")


def produce(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="topic to write to")],
    generate: Annotated[
        int | None,
        typer.Option("--generate", "-g", help="send N generated records instead of reading stdin"),
    ] = None,
    size: Annotated[int, typer.Option("--size", "-s", help="value size of generated records (bytes)")] = 100,
    key_separator: Annotated[
        str | None,
        typer.Option("--key-separator", "-k", help="split each line into KEY<sep>VALUE ('\\t' allowed)"),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", help="write every record to this partition")
    ] = None,
    idempotent: Annotated[
        bool, typer.Option("--idempotent/--no-idempotent", help="idempotent producer (enable.idempotence)")
    ] = True,
    compression: Annotated[Codec, typer.Option("--compression", help="compression codec")] = Codec.none,
    linger_ms: Annotated[int, typer.Option("--linger-ms", help="batching delay (linger.ms)")] = 5,
    delivery_timeout: Annotated[
        float, typer.Option("--delivery-timeout", help="seconds before an unacknowledged record fails")
    ] = 30.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no live rate and no summary")] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Produce stdin lines (or --generate N records) to TOPIC with acks=all; shows a live rate."""
    with reported_errors():
        from confluent_kafka import Producer

        if generate is not None and generate < 0:
            fail("--generate must not be negative", 2)
        if size < 0:
            fail("--size must not be negative", 2)
        if generate is not None and key_separator is not None:
            fail("--key-separator applies to stdin lines, not to --generate", 2)
        if key_separator == "":
            fail("--key-separator must not be empty", 2)
        session = session_for(ctx, bootstrap)
        producer = Producer(
            session.config(
                **{
                    "acks": "all",
                    "enable.idempotence": idempotent,
                    "compression.type": compression.value,
                    "linger.ms": linger_ms,
                    "message.timeout.ms": max(1, int(delivery_timeout * 1000)),
                }
            )
        )
        _check_topic(session, producer, topic, partition)

        if generate is not None:
            records: Iterable[tuple[bytes | None, bytes]] = _generated_records(generate, size)
        else:
            separator = _unescape(key_separator).encode() if key_separator is not None else None
            records = _stdin_records(sys.stdin.buffer, separator)

        stats = Stats(generate)
        interrupted = _run(
            producer, topic, partition, records, stats, session, quiet, generate is not None, delivery_timeout
        )
        if stats.failed:
            fail(
                f"{stats.failed:,} of {stats.sent:,} records were not delivered to {topic!r}: "
                f"{stats.first_error}"
            )
        if not quiet:
            typer.echo(stats.summary(topic), err=True)
        if interrupted:
            raise typer.Exit(130)


def _check_topic(session: KafkaSession, producer: Producer, topic: str, partition: int | None) -> None:
    """Fail early (and readably) when the broker is unreachable or the topic/partition is unusable."""
    from confluent_kafka import KafkaError

    metadata = session.call(lambda t: producer.list_topics(topic, timeout=t), producer.poll, "topic metadata")
    info = metadata.topics.get(topic)
    err = info.error if info is not None else None
    if err is not None:
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            fail(f"topic {topic!r} does not exist")
        if not err.retriable():
            fail(f"cannot produce to topic {topic!r}: {kafka_error_text(err)}")
    if partition is not None and info is not None and info.partitions and partition not in info.partitions:
        fail(f"topic {topic!r} has no partition {partition} (it has {len(info.partitions)})")


def _run(
    producer: Producer,
    topic: str,
    partition: int | None,
    records: Iterable[tuple[bytes | None, bytes]],
    stats: Stats,
    session: KafkaSession,
    quiet: bool,
    generated: bool,
    delivery_timeout: float,
) -> bool:
    """Send everything, then flush. Returns True when interrupted with Ctrl-C."""
    from rich.console import Console
    from rich.live import Live

    console = Console(stderr=True)
    # A live line would fight with the user's own typing when stdin is an interactive terminal.
    show_live = not quiet and console.is_terminal and (generated or not sys.stdin.isatty())
    stop = threading.Event()

    def poll_loop() -> None:
        while not stop.is_set():
            producer.poll(0.1)

    poller = threading.Thread(target=poll_loop, name="exactly-produce-poll", daemon=True)
    poller.start()
    live = Live(get_renderable=stats.render, console=console, refresh_per_second=4, transient=True)
    interrupted = False
    if show_live:
        live.start()
    try:
        target = -1 if partition is None else partition
        callback = stats.on_delivery
        produce_one = producer.produce
        for key, value in records:
            while True:
                try:
                    produce_one(topic, value, key, partition=target, on_delivery=callback)
                    break
                except BufferError:  # the local queue is full: wait for the poller to drain it
                    time.sleep(0.002)
            stats.sent += 1
            stats.sent_bytes += len(value) + (len(key) if key is not None else 0)
            if stats.acked == 0 and stats.sent % 1000 == 0:
                session.check()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        stop.set()
        poller.join()
        try:
            deadline = time.monotonic() + delivery_timeout + 5
            while len(producer) > 0 and time.monotonic() < deadline:
                producer.flush(0.1)
                if stats.acked == 0 and stats.failed == 0:
                    session.check()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            stats.finished = time.monotonic()
            if show_live:
                live.stop()
    unsent = len(producer)
    if unsent:
        stats.failed += unsent
        reason = "interrupted before they were acknowledged" if interrupted else "not acknowledged in time"
        stats.first_error = stats.first_error or reason
        producer.purge()
    return interrupted
