"""Timed produce and consume rounds against any Kafka broker, with its CPU sampled every second.

The benchmark report's throughput rounds (`exactly bench report`, broker and peer sections): a round is
a `Timeline` (`exactly.bench.timeline`): client processes (spawned; confluent-kafka) connect, report
ready, then all start at the same epoch second and run for `warmup + seconds`; the first `warmup`
seconds are not measured. Meanwhile this process samples the broker process's CPU seconds
(`exactly.bench.cpu`, `/proc/<pid>/stat`) at every epoch second, so the round also yields the broker's
cores used per second and its CPU seconds per GB over exactly the measured seconds.

- produce: P producers, 1 KiB records round-robin over the topic's 6 partitions, idempotent, acks=all,
  linger.ms=5, at most 128 MiB queued per producer (so the backlog at the end, flushed unmeasured, is
  bounded); one record in `SAMPLE_EVERY` has a delivery report: its latency, and those records' bytes for
  the per-second series (against exactly, the topic's growth checks that none of the others failed);
- consume: C consumers, each assigned its share of the partitions from offset 0, reading whole batches;
  a consumer that reaches the end of its partitions (their high watermarks when it started) starts over
  from offset 0, so a round reads for its full time, from the page cache after the first pass.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import queue as queues
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from exactly.bench.broker import throughput_producer_config
from exactly.bench.cpu import CpuMeter, CpuSample, per_gb, per_second, window_cpu
from exactly.bench.timeline import Timeline

RECORD_SIZE = 1024
PARTITIONS = 6
START_DELAY_S = 1.0  # from the last client ready to the common start (whole epoch seconds)
READY_TIMEOUT_S = 120.0
QUEUE_KBYTES = 131_072
# produce: one record in 101 has a delivery report (its latency; the bytes of the 101 records); 101 is prime
# to the 6 partitions, so every partition is sampled
SAMPLE_EVERY = 101


@dataclass(frozen=True, slots=True)
class TimedRound:
    """One timed round: bytes per second, the broker's CPU per second, latencies (produce only)."""

    timeline: Timeline
    cpu: tuple[CpuSample, ...]  # the broker's, one per epoch second (empty: no pid to read)
    latencies_ms: tuple[float, ...]  # produce: sampled delivery latencies in the measured seconds
    records: int  # records moved in the whole round (warm-up and flush included)

    @property
    def mb_s(self) -> float:
        return self.timeline.mb_s

    @property
    def broker_cpu_s(self) -> float:
        """The broker's CPU seconds over the measured seconds (NaN when not sampled)."""
        return window_cpu(self.cpu, self.timeline.measured_from, self.timeline.measured_to)

    @property
    def cpu_s_per_gb(self) -> float:
        return per_gb(self.broker_cpu_s, self.timeline.measured_bytes)

    def cores_per_second(self) -> list[tuple[int, float]]:
        """(second since start, broker cores used in that second) for the round's warm-up and measured
        seconds: a sample taken just after epoch second t closes second t - 1."""
        length = self.timeline.warmup + self.timeline.seconds
        out = []
        for at, cores in per_second(self.cpu):
            second = round(at) - 1 - self.timeline.start
            if 0 <= second < length:
                out.append((second, cores))
        return out


def _wait_until(epoch: float) -> None:
    while (left := epoch - time.time()) > 0:
        time.sleep(min(left, 0.05))


def _producer(
    bootstrap: str, topic: str, index: int, ready: Any, go: Any, start_at: Any, stop: float, queue: Any
) -> None:
    try:
        from confluent_kafka import Producer

        producer = Producer(throughput_producer_config(bootstrap, QUEUE_KBYTES))
        producer.list_topics(topic, 30)
        value = os.urandom(RECORD_SIZE)
        windows: Counter[int] = Counter()
        latencies: list[tuple[float, float]] = []  # (epoch second delivered, ms)

        def timed(sent: float) -> Any:
            def report(err: Any, _msg: Any) -> None:
                if err is not None:
                    raise RuntimeError(str(err))
                now = time.time()
                windows[int(now)] += RECORD_SIZE * SAMPLE_EVERY
                latencies.append((now, (time.perf_counter() - sent) * 1e3))

            return report

        ready.put(index)
        go.wait(READY_TIMEOUT_S)
        begin = start_at.value
        _wait_until(begin)
        end = begin + stop
        i = 0
        while True:
            if i % 1000 == 0 and time.time() >= end:
                break
            partition = (i + index) % PARTITIONS
            try:
                if i % SAMPLE_EVERY != SAMPLE_EVERY - 1:
                    producer.produce(topic, value, partition=partition)
                else:
                    producer.produce(
                        topic, value, partition=partition, on_delivery=timed(time.perf_counter())
                    )
            except BufferError:
                producer.poll(0.001)
                continue
            i += 1
            if i % 1000 == 0:
                producer.poll(0)
        remaining = producer.flush(120)
        queue.put((index, i - remaining, dict(windows), latencies))
    except Exception as e:
        queue.put((index, f"{type(e).__name__}: {e}", {}, []))
        raise


def _consumer(
    bootstrap: str,
    topic: str,
    partitions: list[int],
    index: int,
    ready: Any,
    go: Any,
    start_at: Any,
    stop: float,
    queue: Any,
) -> None:
    try:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-timed-{index}",
                "enable.auto.commit": False,
                "fetch.max.bytes": 52_428_800,
                "max.partition.fetch.bytes": 10_485_760,
            }
        )
        highs = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in partitions}
        live = [p for p in partitions if highs[p] > 0]
        ready.put(index)
        go.wait(READY_TIMEOUT_S)
        begin = start_at.value
        _wait_until(begin)
        end = begin + stop
        windows: Counter[int] = Counter()
        records = 0
        while live and time.time() < end:
            consumer.assign([TopicPartition(topic, p, 0) for p in live])
            left = set(live)
            while left and time.time() < end:
                for m in consumer.consume(10_000, timeout=0.2):
                    if m.error() is not None:
                        continue
                    windows[int(time.time())] += len(m.value() or b"")
                    records += 1
                    partition, offset = m.partition(), m.offset()
                    if partition is not None and offset is not None and offset >= highs[partition] - 1:
                        left.discard(partition)
        consumer.close()
        queue.put((index, records, dict(windows), []))
    except Exception as e:
        queue.put((index, f"{type(e).__name__}: {e}", {}, []))
        raise


def _run(
    targets: list[tuple[Any, tuple[Any, ...]]], broker_pid: int | None, warmup: int, seconds: int
) -> TimedRound:
    """Start the client processes, start them together, sample the broker's CPU, collect."""
    ctx = mp.get_context("spawn")
    ready, queue, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    start_at = ctx.Value("d", 0.0)
    length = float(warmup + seconds)
    procs = [
        ctx.Process(target=target, args=(*args, p, ready, go, start_at, length, queue))
        for p, (target, args) in enumerate(targets)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=READY_TIMEOUT_S)
        start = math.ceil(time.time() + START_DELAY_S)
        start_at.value = float(start)
        go.set()
        meter = CpuMeter(broker_pid) if broker_pid is not None else None
        samples: list[CpuSample] = []
        # One CPU sample per epoch second, from the start until every client has reported.
        results: list[tuple[int, Any, dict[int, int], list[tuple[float, float]]]] = []
        tick = start
        while len(results) < len(procs):
            if meter is not None and time.time() >= tick:
                samples.append(meter.sample())
                tick = math.floor(time.time()) + 1
            try:
                results.append(queue.get(timeout=max(0.01, min(0.2, tick - time.time()))))
            except queues.Empty:
                if not any(p.is_alive() for p in procs) and queue.empty():
                    raise RuntimeError("a benchmark client died without reporting") from None
        failed = [r[1] for r in results if isinstance(r[1], str)]
        if failed:
            raise RuntimeError(f"benchmark client failed: {failed[0]}")
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    timeline = Timeline.of(start, warmup, seconds, (r[2] for r in results))
    measured = [ms for r in results for at, ms in r[3] if timeline.measured_from <= at < timeline.measured_to]
    return TimedRound(timeline, tuple(samples), tuple(measured), sum(int(r[1]) for r in results))


def produce_round(
    bootstrap: str,
    topic: str,
    producers: int,
    warmup: int,
    seconds: int,
    broker_pid: int | None,
    *,
    check_growth: bool = True,
) -> TimedRound:
    """`producers` processes producing as fast as they can for `warmup + seconds`. Only one record in
    `SAMPLE_EVERY` has a delivery report: a Python call per record costs the producers, which share the
    broker's two cores, ~10 % of the round's throughput (bench/cpu-profile.md). A failed record without
    one is caught by `check_growth`: the topic must have grown by exactly the records delivered. Not for
    Tansu, whose latest offsets lag what it acknowledged (see `exactly.bench.peers`)."""
    before = _records_in(bootstrap, topic) if check_growth else 0
    timed = _run([(_producer, (bootstrap, topic)) for _ in range(producers)], broker_pid, warmup, seconds)
    if check_growth:
        grown = _records_in(bootstrap, topic) - before
        if grown != timed.records:
            raise RuntimeError(f"the producers had {timed.records} records delivered, the topic took {grown}")
    return timed


def _records_in(bootstrap: str, topic: str) -> int:
    """The sum of the topic's partitions' high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(PARTITIONS))
    finally:
        consumer.close()


def consume_round(
    bootstrap: str, topic: str, consumers: int, warmup: int, seconds: int, broker_pid: int | None
) -> TimedRound:
    """`consumers` processes, each reading its share of the partitions over and over for the round."""
    shares = [list(range(PARTITIONS))[i::consumers] for i in range(consumers)]
    return _run(
        [(_consumer, (bootstrap, topic, share)) for share in shares if share], broker_pid, warmup, seconds
    )
