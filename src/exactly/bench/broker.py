"""Broker benchmark (issue 4): produce and consume through the real broker with confluent-kafka.

    python -m exactly.bench.broker [--records N] [--producers P] [--seconds S]

In one run, on one machine:
- the machine's own bounds: a raw sequential file write with the broker's fsync pattern (one fsync per
  produce request's worth of bytes) and a raw loopback TCP copy;
- produce throughput: P producer processes, 1 KiB records, 6 partitions, acks=all, idempotent, default
  durability (fsync before ack); MB/s, records/s, and delivery latency percentiles;
- latency at a fixed offered load (20 MB/s): p50/p99 produce latency;
- consume throughput: one consumer reading everything back;
- the broker's peak RSS (VmHWM).
A broker is started in a temporary directory unless `--bootstrap-server` is given.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly.testing.processes import BrokerProcess

RECORD_SIZE = 1024
PARTITIONS = 6
TOPIC = "bench"
BROKER_START_TIMEOUT = 20.0


def throughput_producer_config(
    bootstrap: str, queue_kbytes: int, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The producer settings of every throughput benchmark: idempotent, acks=all, what throughput-minded
    users set (linger 5 ms, 1-MB batches), with a send queue of `queue_kbytes`."""
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": queue_kbytes,
        **(extra or {}),
    }


def raw_disk_write_mb_s(directory: Path, total: int, chunk: int) -> float:
    """Sequential write of `total` bytes in `chunk`-sized writes, fsync after each chunk."""
    path = directory / "raw-write.bin"
    data = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, data)
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return written / elapsed / 1e6


def raw_loopback_mb_s(total: int = 1 << 30, chunk: int = 1 << 20) -> float:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    received = 0

    def sink() -> None:
        nonlocal received
        conn, _ = server.accept()
        with conn:
            buf = bytearray(chunk)
            while True:
                n = conn.recv_into(buf)
                if not n:
                    return
                received += n

    thread = threading.Thread(target=sink)
    thread.start()
    data = b"x" * chunk
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as client:
        sent = 0
        while sent < total:
            client.sendall(data)
            sent += chunk
    thread.join()
    elapsed = time.perf_counter() - start
    server.close()
    return received / elapsed / 1e6


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProduceRun:
    """One produce run of `produce`: its figures and raw samples."""

    records: int  # delivered
    seconds: float  # first process started .. last producer flushed
    latencies: tuple[float, ...]  # delivery latency (s) of every 100th record of each producer
    windows: tuple[tuple[int, int], ...]  # (wall-clock second, bytes delivered in it), all producers

    @property
    def mb_s(self) -> float:
        return self.records * RECORD_SIZE / self.seconds / 1e6

    @property
    def records_s(self) -> float:
        return self.records / self.seconds


@dataclass(frozen=True, slots=True)
class ConsumeRun:
    records: int
    value_bytes: int
    seconds: float

    @property
    def mb_s(self) -> float:
        return self.value_bytes / self.seconds / 1e6


def _producer_process(
    bootstrap: str,
    records: int,
    index: int,
    queue: Any,
    topic: str = TOPIC,
    client_config: dict[str, str] | None = None,
) -> None:
    from confluent_kafka import Producer

    producer = Producer(throughput_producer_config(bootstrap, 1_048_576, client_config))
    value = os.urandom(RECORD_SIZE)
    latencies: list[float] = []
    windows: Counter[int] = Counter()  # wall-clock second -> bytes delivered in it

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            raise RuntimeError(str(err))
        windows[int(time.time())] += RECORD_SIZE

    def timed(sent: float) -> Callable[[Any, Any], None]:
        record = _record_latency(latencies, sent)

        def both(err: Any, msg: Any) -> None:
            record(err, msg)
            windows[int(time.time())] += RECORD_SIZE

        return both

    start = time.perf_counter()
    for i in range(records):
        sent = time.perf_counter()
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    partition=(i + index) % PARTITIONS,
                    on_delivery=timed(sent) if i % 100 == 0 else delivered,
                )
                break
            except BufferError:
                producer.poll(0.001)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    queue.put((records - remaining, elapsed, latencies, dict(windows)))


def produce(
    bootstrap: str,
    records: int,
    producers: int,
    topic: str = TOPIC,
    client_config: dict[str, str] | None = None,
) -> ProduceRun:
    """`client_config`: more producer settings (e.g. security.protocol=SSL and its ssl.* files)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    per = records // producers
    procs = [
        ctx.Process(target=_producer_process, args=(bootstrap, per, i, queue, topic, client_config))
        for i in range(producers)
    ]
    start = time.perf_counter()
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    windows: Counter[int] = Counter()
    for r in results:
        windows.update(r[3])
    return ProduceRun(
        records=sum(r[0] for r in results),
        seconds=elapsed,
        latencies=tuple(lat for r in results for lat in r[2]),
        windows=tuple(sorted(windows.items())),
    )


def paced_latency(bootstrap: str, mb_per_s: float, seconds: float, topic: str = TOPIC) -> list[float]:
    """Produce at a fixed offered load and return every record's delivery latency (seconds)."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 1}
    )
    value = os.urandom(RECORD_SIZE)
    # Warm up: the producer id and connections are acquired before the clock starts.
    producer.produce(topic, value, partition=0)
    producer.flush(30)
    rate = mb_per_s * 1e6 / RECORD_SIZE
    latencies: list[float] = []
    start = time.perf_counter()
    i = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + i / rate
        if now < due:
            producer.poll(min(due - now, 0.001))
            continue
        sent = time.perf_counter()
        producer.produce(
            topic,
            value,
            partition=i % PARTITIONS,
            on_delivery=_record_latency(latencies, sent),
        )
        i += 1
    producer.flush(60)
    return latencies


def _record_latency(latencies: list[float], sent: float) -> Callable[[Any, Any], None]:
    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            raise RuntimeError(str(err))
        latencies.append(time.perf_counter() - sent)

    return delivered


def _consumer_process(
    bootstrap: str, partitions: list[int], expected: int, queue: Any, topic: str = TOPIC
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = 0
    nbytes = 0
    start = time.perf_counter()
    while got < expected:
        batch = consumer.consume(10_000, timeout=5)
        if not batch:
            break
        for m in batch:
            if m.error() is None:
                got += 1
                nbytes += len(m.value() or b"")
    queue.put((got, nbytes, time.perf_counter() - start))
    consumer.close()


def consume(bootstrap: str, expected: int, consumers: int, topic: str = TOPIC) -> ConsumeRun:
    """MB/s reading everything back with `consumers` processes, each assigned its share of partitions."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    shares = [list(range(PARTITIONS))[i::consumers] for i in range(consumers)]
    per = [expected * len(share) // PARTITIONS for share in shares]
    procs = [
        ctx.Process(target=_consumer_process, args=(bootstrap, share, n, queue, topic))
        for share, n in zip(shares, per, strict=True)
    ]
    start = time.perf_counter()
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    return ConsumeRun(sum(r[0] for r in results), sum(r[1] for r in results), elapsed)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="exactly broker benchmark")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--paced-seconds", type=float, default=10.0)
    parser.add_argument("--bootstrap-server", default=None)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="exactly-bench-") as tmp:
        tmpdir = Path(tmp)
        disk = statistics.median(raw_disk_write_mb_s(tmpdir, 256 << 20, 6 * 64 * 1024) for _ in range(3))
        loop = statistics.median(raw_loopback_mb_s() for _ in range(3))
        print(f"machine: raw sequential write, fsync per 384 KiB : {disk:8.0f} MB/s")
        print(f"machine: raw loopback TCP copy                   : {loop:8.0f} MB/s")

        broker = None
        bootstrap = args.bootstrap_server
        if bootstrap is None:
            broker = BrokerProcess(tmpdir / "data").start(BROKER_START_TIMEOUT)
            bootstrap = broker.bootstrap
        try:
            from confluent_kafka.admin import AdminClient
            from confluent_kafka.cimpl import NewTopic

            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result()
            # Latency first, on a quiet disk: fsync latency right after a bulk write measures write-back.
            paced = paced_latency(bootstrap, 20.0, args.paced_seconds)
            print(
                f"produce at 20 MB/s offered: p50 {percentile(paced, 0.5) * 1e3:.2f} ms  "
                f"p99 {percentile(paced, 0.99) * 1e3:.2f} ms  ({len(paced)} records)"
            )
            run = produce(bootstrap, args.records, args.producers)
            lat = list(run.latencies)
            p50, p99 = percentile(lat, 0.5) * 1e3, percentile(lat, 0.99) * 1e3
            print(
                f"produce: {run.mb_s:8.1f} MB/s {run.records_s:10.0f} records/s "
                f"({args.producers} producers, 1 KiB,"
                f" acks=all, fsync before ack)  latency p50 {p50:.1f} ms p99 {p99:.1f} ms"
            )
            total = args.records // args.producers * args.producers + len(paced)
            consumed = consume(bootstrap, total, args.consumers)
            print(
                f"consume: {consumed.mb_s:8.1f} MB/s ({consumed.records} records, {args.consumers} consumers)"
            )
            if broker is not None:
                print(f"broker peak RSS: {_peak_rss_mb(broker.pid):.0f} MB")
        finally:
            if broker is not None:
                broker.stop(30)


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__":
    main()
