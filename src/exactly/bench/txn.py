"""Transactions benchmark (issue 6): what exactly-once costs, through the real broker.

    python -m exactly.bench.txn [--seconds S] [--rounds R] [--producers P] [--warmup-seconds W0]
                                [--commits N] [--runs K]
                                [--visibility-commits V] [--fetch-wait-ms W]
                                [--ids I] [--ids-processes Q] [--ids-seconds T]
                                [--versions-commits M]

One broker is started as a subprocess on a fresh data directory (default durability: fsync before every
ack). Every client runs in its own process (spawned, like `exactly.bench.broker`), the main process only
orchestrates and samples the broker's memory. 1 KiB records, 6 partitions. The machine is small and
noisy, so every figure is a median over repeated short runs.

1. Throughput (after one unmeasured idempotent warm-up round: the first round on a fresh broker was
   consistently the fastest): P producer processes (default 1: on a 2-core machine a second Python
   producer only competes with the broker for CPU) with confluent-kafka, acks=all,
   enable.idempotence=true, linger.ms=5 (the settings of `bench broker`), records spread round robin over
   the partitions, for S seconds: idempotent (no transactions) vs transactional (begin, produce for 100
   ms, commit_transaction, repeat; otherwise the same settings). R rounds of each, interleaved and
   alternating which goes first, so machine noise hits both alike; each round is timed from a common start
   (after every producer has its producer id and metadata) to the last producer's final flush/commit.
   Reported: the median MB/s and records/s of each mode, the ratio of the medians (and the median of the
   rounds' paired ratios), the broker's CPU use (cores) in each mode, and where the transactional
   producers' time went: commit_transaction() is flush() + EndTxn, so the bench calls flush() first and
   times the two apart (draining what was queued in the window vs the commit itself).
2. Commit latency, one-record transactions, one producer process (linger.ms=0), N transactions per run
   after 20 unmeasured ones: `begin; produce 1 record; commit_transaction` timing the commit call (which
   also flushes the record: AddPartitionsToTxn + Produce + EndTxn) and the whole begin..commit; then
   the same with `flush()` before the commit, which leaves EndTxn alone in the timed call.
   p50/p99 per run; K runs; medians of the runs' percentiles. Beside them the broker's CPU time
   (/proc/PID/stat utime + stime) over each run divided by its transactions.
3. Visibility: a read_committed consumer process (fetch.wait.max.ms=W) is assigned to an idle partition
   and already polling; a producer process runs V one-record transactions 10 ms apart and notes
   `time.time()` right after each `commit_transaction()` returns; the consumer notes `time.time()` when
   `poll()` hands it the record (the record's value is its index). Both are CLOCK_REALTIME of the same
   kernel, so the two notes are directly comparable (no clock offset between processes on one machine).
   The difference: the broker writing the COMMIT marker (it starts as soon as PrepareCommit is durable,
   while the EndTxn response travels back, so a delay can be slightly negative), the consumer's pending
   fetch being woken by it, and librdkafka handing the record to poll(). K runs; medians.
4. I transactional ids at once (default 1,000). 1,000 librdkafka instances (each with its threads and
   buffers) do not fit on this machine, so the ids are driven by our own protocol codecs
   (`exactly.protocol.api.encode_request`/`decode_response`) over asyncio, in Q processes, one TCP
   connection per id (as every real producer has its own): InitProducerId once, then as fast as each id
   can: AddPartitionsToTxn (one partition), Produce (one 1 KiB record, acks=all), EndTxn(commit). Timed
   from a common start after every id has its producer id, for T seconds; K runs (each run re-initialises
   the same ids, bumping their epochs). Reported: commits/s, EndTxn latency and whole-transaction
   latency p50/p99 while all are active, the broker's CPU time per commit, and its peak RSS during the
   runs (VmHWM, reset through /proc/PID/clear_refs before the first run, so the throughput phase's
   buffers do not count), next to its RSS before the phase and its lifetime peak.
5. Transaction version 2 vs 1 (`exactly.bench.txn_versions`): M one-record transactions per run of each,
   alternating, with exactly's protocol-level client: requests per transaction and latency (whole
   transaction, EndTxn alone). `--versions-commits 0` skips it.

The table is followed by one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from queue import Empty
from typing import Any

from exactly.bench import txn_versions
from exactly.bench.broker import (
    BROKER_START_TIMEOUT,
    PARTITIONS,
    RECORD_SIZE,
    _peak_rss_mb,
    cpu_seconds,
    percentile,
)
from exactly.client.connection import AsyncKafkaConnection
from exactly.testing.processes import BrokerProcess

TOPIC = "bench-txn"
VISIBILITY_TOPIC = "bench-txn-visibility"
IDS_TOPIC = "bench-txn-ids"
COMMIT_INTERVAL_S = 0.1
WARMUP_TRANSACTIONS = 20
VISIBILITY_GAP_S = 0.01
RESULT_TIMEOUT_S = 300.0


# --- the broker -------------------------------------------------------------------------------------------


def start_broker(directory: Path) -> BrokerProcess:
    """`exactly serve` on a fresh data directory; its log goes to `broker.log` next to it."""
    broker = BrokerProcess(directory / "data", log_path=directory / "broker.log")
    return broker.start(BROKER_START_TIMEOUT)


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (`echo 5 > /proc/PID/clear_refs`, Linux >= 4.0)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in (TOPIC, VISIBILITY_TOPIC, IDS_TOPIC, txn_versions.TOPIC):
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def _spawn() -> Any:
    return mp.get_context("spawn")


def _wait_ready(ready: Any, procs: list[Any]) -> None:
    """Wait until every process has said it is ready (or one of them died)."""
    count = 0
    deadline = time.monotonic() + 120
    while count < len(procs):
        try:
            ready.get(timeout=1.0)
            count += 1
        except Empty:
            if any(p.exitcode is not None for p in procs) or time.monotonic() > deadline:
                for p in procs:
                    if p.is_alive():
                        p.terminate()
                raise RuntimeError(
                    f"bench process failed: exit codes {[p.exitcode for p in procs]}"
                ) from None


def _collect(queue: Any, procs: list[Any]) -> list[Any]:
    """One result per process; a process that died without one is an error, not a hang."""
    results: list[Any] = []
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while len(results) < len(procs):
        try:
            results.append(queue.get(timeout=1.0))
        except Empty:
            if all(not p.is_alive() for p in procs) or time.monotonic() > deadline:
                for p in procs:
                    if p.is_alive():
                        p.terminate()
                raise RuntimeError(
                    f"bench process failed: exit codes {[p.exitcode for p in procs]}"
                ) from None
    for p in procs:
        p.join(30)
    for result in results:
        if isinstance(result, str):
            raise RuntimeError(f"bench process failed: {result}")
    return results


def _ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1e3


# --- 1. throughput ----------------------------------------------------------------------------------------


def _throughput_process(
    bootstrap: str,
    transactional_id: str | None,
    index: int,
    seconds: float,
    ready: Any,
    start: Any,
    queue: Any,
) -> None:
    try:
        queue.put(_throughput_run(bootstrap, transactional_id, index, seconds, ready, start))
    except Exception as e:
        queue.put(f"{type(e).__name__}: {e}")
        ready.put(index)  # do not leave the parent waiting for this process to be ready
        raise


def _throughput_run(
    bootstrap: str, transactional_id: str | None, index: int, seconds: float, ready: Any, start: Any
) -> tuple[int, float, float, float, float, int]:
    """(records delivered, wall-clock start, wall-clock end, seconds spent draining the queue before
    each commit, seconds spent in commit_transaction() after that, transactions) of one producer."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    value = os.urandom(RECORD_SIZE)
    # Warm up outside the clock: producer id, metadata, connections (and one transaction).
    if transactional_id is not None:
        producer.init_transactions(30)
        producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(TOPIC, value, partition=p)
    if transactional_id is not None:
        producer.commit_transaction(30)
    producer.flush(30)
    ready.put(index)
    start.wait(60)

    produced = 0
    draining = 0.0
    committing = 0.0
    transactions = 0
    begin = time.time()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if transactional_id is not None:
            producer.begin_transaction()
            window_end = min(end, time.perf_counter() + COMMIT_INTERVAL_S)
        else:
            window_end = end
        while time.perf_counter() < window_end:
            try:
                producer.produce(TOPIC, value, partition=(produced + index) % PARTITIONS)
            except BufferError:
                producer.poll(0.001)
                continue
            produced += 1
            if produced % 1000 == 0:
                producer.poll(0)
        if transactional_id is not None:
            # commit_transaction() is flush() + EndTxn; split so the report tells the two apart.
            before = time.perf_counter()
            producer.flush(60)
            flushed = time.perf_counter()
            producer.commit_transaction(60)
            committing += time.perf_counter() - flushed
            draining += flushed - before
            transactions += 1
    remaining = producer.flush(120)
    finished = time.time()
    if errors or remaining:
        raise RuntimeError(f"{len(errors)} delivery errors ({errors[:1]}), {remaining} undelivered")
    return produced, begin, finished, draining, committing, transactions


@dataclass(frozen=True, slots=True)
class Round:
    records_s: float
    broker_cores: float  # CPU seconds the broker used per second of the round
    transactions: int
    drain_share: float  # share of the producers' time in flush() before each commit
    commit_share: float  # share of the producers' time in commit_transaction() after that flush
    drain_mean: float  # seconds per transaction
    commit_mean: float
    broker_cpu_s: float = math.nan  # the broker's utime+stime over the round
    records: int = 0  # delivered in the round

    @property
    def cpu_s_per_gb(self) -> float:
        return self.broker_cpu_s / (self.records * RECORD_SIZE / 1e9) if self.records else math.nan

    @property
    def cpu_ms_per_commit(self) -> float:
        return self.broker_cpu_s * 1e3 / self.transactions if self.transactions else math.nan


def throughput_round(
    broker: BrokerProcess, transactional: bool, producers: int, seconds: float, tag: str
) -> Round:
    bootstrap = broker.bootstrap
    ctx = _spawn()
    queue, ready, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(
            target=_throughput_process,
            args=(
                bootstrap,
                f"bench-txn-{tag}-{i}" if transactional else None,
                i,
                seconds,
                ready,
                start,
                queue,
            ),
        )
        for i in range(producers)
    ]
    for p in procs:
        p.start()
    _wait_ready(ready, procs)
    cpu, wall = cpu_seconds(broker.pid), time.monotonic()
    start.set()
    results = _collect(queue, procs)
    used = cpu_seconds(broker.pid) - cpu
    cores = used / (time.monotonic() - wall)
    delivered: int = sum(r[0] for r in results)
    elapsed: float = max(r[2] for r in results) - min(r[1] for r in results)
    draining: float = sum(r[3] for r in results)
    committing: float = sum(r[4] for r in results)
    transactions: int = sum(r[5] for r in results)
    return Round(
        records_s=delivered / elapsed,
        broker_cores=cores,
        transactions=transactions,
        drain_share=draining / (elapsed * producers),
        commit_share=committing / (elapsed * producers),
        drain_mean=draining / transactions if transactions else 0.0,
        commit_mean=committing / transactions if transactions else 0.0,
        broker_cpu_s=used,
        records=delivered,
    )


# --- 2. commit latency ------------------------------------------------------------------------------------


def _latency_process(bootstrap: str, commits: int, tag: str, queue: Any) -> None:
    try:
        queue.put(_latency_run(bootstrap, commits, tag))
    except Exception as e:
        queue.put(f"{type(e).__name__}: {e}")
        raise


def _latency_run(bootstrap: str, commits: int, tag: str) -> dict[str, list[float]]:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-latency-{tag}", "linger.ms": 0}
    )
    producer.init_transactions(30)
    value = os.urandom(RECORD_SIZE)
    out: dict[str, list[float]] = {"commit": [], "transaction": [], "end_txn": []}
    for i in range(WARMUP_TRANSACTIONS + commits):
        begin = time.perf_counter()
        producer.begin_transaction()
        producer.produce(TOPIC, value, partition=0)
        before = time.perf_counter()
        producer.commit_transaction(30)
        done = time.perf_counter()
        if i >= WARMUP_TRANSACTIONS:
            out["commit"].append(done - before)
            out["transaction"].append(done - begin)
    for _ in range(commits):
        producer.begin_transaction()
        producer.produce(TOPIC, value, partition=0)
        producer.flush(30)
        before = time.perf_counter()
        producer.commit_transaction(30)
        out["end_txn"].append(time.perf_counter() - before)
    return out


def commit_latency(broker: BrokerProcess, commits: int, tag: str) -> tuple[dict[str, list[float]], float]:
    """The run's latencies, and the broker's CPU seconds per transaction over the whole run (its
    2 x `commits` + 20 one-record, one-partition transactions, and the producer's start-up)."""
    ctx = _spawn()
    queue = ctx.Queue()
    proc = ctx.Process(target=_latency_process, args=(broker.bootstrap, commits, tag, queue))
    cpu = cpu_seconds(broker.pid)
    proc.start()
    result: dict[str, list[float]] = _collect(queue, [proc])[0]
    cpu = cpu_seconds(broker.pid) - cpu
    return result, cpu / (2 * commits + WARMUP_TRANSACTIONS)


# --- 3. visibility ----------------------------------------------------------------------------------------


def _visibility_consumer(bootstrap: str, expected: int, fetch_wait_ms: int, ready: Any, queue: Any) -> None:
    try:
        queue.put(("consumer", _visibility_consume(bootstrap, expected, fetch_wait_ms, ready)))
    except Exception as e:
        queue.put(f"{type(e).__name__}: {e}")
        raise


def _visibility_consume(bootstrap: str, expected: int, fetch_wait_ms: int, ready: Any) -> dict[int, float]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-txn-visibility",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": fetch_wait_ms,
            "fetch.error.backoff.ms": 1,
        }
    )
    _low, high = consumer.get_watermark_offsets(TopicPartition(VISIBILITY_TOPIC, 0), timeout=30)
    consumer.assign([TopicPartition(VISIBILITY_TOPIC, 0, high)])
    consumer.poll(0.5)  # the first fetch is out: from here on the consumer is waiting for data
    ready.set()
    arrivals: dict[int, float] = {}
    deadline = time.monotonic() + 120
    while len(arrivals) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            continue
        arrivals[int(message.value() or b"-1")] = time.time()
    consumer.close()
    return arrivals


def _visibility_producer(bootstrap: str, commits: int, tag: str, ready: Any, queue: Any) -> None:
    try:
        queue.put(("producer", _visibility_produce(bootstrap, commits, tag, ready)))
    except Exception as e:
        queue.put(f"{type(e).__name__}: {e}")
        raise


def _visibility_produce(bootstrap: str, commits: int, tag: str, ready: Any) -> dict[int, float]:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-visibility-{tag}", "linger.ms": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()  # warm up on another partition: metadata and connections
    producer.produce(VISIBILITY_TOPIC, b"-1", partition=1)
    producer.commit_transaction(30)
    ready.wait(60)
    returned: dict[int, float] = {}
    for i in range(commits):
        producer.begin_transaction()
        producer.produce(VISIBILITY_TOPIC, str(i).encode(), partition=0)
        producer.commit_transaction(30)
        returned[i] = time.time()
        time.sleep(VISIBILITY_GAP_S)
    return returned


def visibility(bootstrap: str, commits: int, fetch_wait_ms: int, tag: str) -> tuple[list[float], int]:
    """Seconds from commit_transaction() returning to the record reaching the consumer, and how many
    records never arrived."""
    ctx = _spawn()
    queue, ready = ctx.Queue(), ctx.Event()
    consumer = ctx.Process(
        target=_visibility_consumer, args=(bootstrap, commits, fetch_wait_ms, ready, queue)
    )
    producer = ctx.Process(target=_visibility_producer, args=(bootstrap, commits, tag, ready, queue))
    consumer.start()
    producer.start()
    results = dict(_collect(queue, [consumer, producer]))
    arrivals, returned = results["consumer"], results["producer"]
    delays = [arrivals[i] - t for i, t in returned.items() if i in arrivals]
    return delays, len(returned) - len(delays)


# --- 4. many transactional ids (our own codecs) -----------------------------------------------------------


class _IdStats:
    def __init__(self) -> None:
        self.end_txn: list[float] = []
        self.transaction: list[float] = []
        self.retries = 0
        self.errors: Counter[str] = Counter()


async def _init_id(conn: AsyncKafkaConnection, txn_id: str) -> tuple[int, int]:
    from exactly.errors import ErrorCode
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.init_producer_id import InitProducerIdRequest

    while True:
        init = await conn.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(txn_id, 60_000, -1, -1))
        if init.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            break
        await asyncio.sleep(0.01)
    if init.error_code != ErrorCode.NONE:
        raise RuntimeError(f"InitProducerId({txn_id}): {ErrorCode(init.error_code).name}")
    return init.producer_id, init.producer_epoch


async def _run_id(
    conn: AsyncKafkaConnection,
    txn_id: str,
    pid: int,
    epoch: int,
    partition: int,
    until: float,
    stats: _IdStats,
) -> None:
    from exactly.errors import ErrorCode
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.add_partitions_to_txn import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnTopic,
    )
    from exactly.protocol.messages.end_txn import EndTxnRequest
    from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from exactly.records.builder import BatchBuilder

    value = os.urandom(RECORD_SIZE)
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(IDS_TOPIC, [partition])],
    )
    end = EndTxnRequest(txn_id, pid, epoch, True)
    sequence = 0
    while time.perf_counter() < until:
        start = time.perf_counter()
        while True:
            added = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
            code = added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            if code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            stats.retries += 1
            await asyncio.sleep(0.005)
        if code != ErrorCode.NONE:
            stats.errors[f"AddPartitionsToTxn {ErrorCode(code).name}"] += 1
            return
        builder = BatchBuilder(
            producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
        )
        builder.append(int(time.time() * 1000), None, value)
        sequence += 1
        batch = builder.build()
        produce = ProduceRequest(
            txn_id,
            -1,
            30_000,
            [TopicProduceData(IDS_TOPIC, partition_data=[PartitionProduceData(partition, batch)])],
        )
        produced = await conn.request(ApiKey.PRODUCE, 9, produce)
        code = produced.responses[0].partition_responses[0].error_code
        if code != ErrorCode.NONE:
            stats.errors[f"Produce {ErrorCode(code).name}"] += 1
            return
        end_start = time.perf_counter()
        ended = await conn.request(ApiKey.END_TXN, 3, end)
        if ended.error_code != ErrorCode.NONE:
            stats.errors[f"EndTxn {ErrorCode(ended.error_code).name}"] += 1
            return
        now = time.perf_counter()
        stats.end_txn.append(now - end_start)
        stats.transaction.append(now - start)


async def _ids_async(
    port: int, first: int, count: int, seconds: float, ready: Any, start: Any
) -> tuple[int, float, float, dict[str, Any]]:
    loop = asyncio.get_running_loop()
    conns = [
        await AsyncKafkaConnection.open("127.0.0.1", port, client_id="bench-txn-ids") for _ in range(count)
    ]
    ids = [f"bench-id-{first + i}" for i in range(count)]
    inits = await asyncio.gather(*(_init_id(c, txn_id) for c, txn_id in zip(conns, ids, strict=True)))
    ready.put(first)
    await loop.run_in_executor(None, start.wait, 120)
    stats = _IdStats()
    begin = time.time()
    until = time.perf_counter() + seconds
    await asyncio.gather(
        *(
            _run_id(c, txn_id, pid, epoch, (first + i) % PARTITIONS, until, stats)
            for i, (c, txn_id, (pid, epoch)) in enumerate(zip(conns, ids, inits, strict=True))
        )
    )
    finished = time.time()
    for c in conns:
        c.close()
    figures = {
        "end_txn": stats.end_txn,
        "transaction": stats.transaction,
        "retries": stats.retries,
        "errors": dict(stats.errors),
    }
    return len(stats.end_txn), begin, finished, figures


def _ids_process(
    port: int, first: int, count: int, seconds: float, ready: Any, start: Any, queue: Any
) -> None:
    try:
        queue.put(asyncio.run(_ids_async(port, first, count, seconds, ready, start)))
    except Exception as e:
        queue.put(f"{type(e).__name__}: {e}")
        ready.put(first)  # do not leave the parent waiting for this process to be ready
        raise


def many_ids(
    broker: BrokerProcess, ids: int, processes: int, seconds: float
) -> tuple[float, dict[str, Any], float]:
    """(commits/s, latencies and counts, highest VmRSS sampled while the ids were committing); the
    counts include the broker's CPU seconds per commit."""
    ctx = _spawn()
    queue, ready, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    shares = [ids // processes + (1 if i < ids % processes else 0) for i in range(processes)]
    firsts = [sum(shares[:i]) for i in range(processes)]
    procs = [
        ctx.Process(target=_ids_process, args=(broker.port, first, n, seconds, ready, start, queue))
        for first, n in zip(firsts, shares, strict=True)
        if n
    ]
    for p in procs:
        p.start()
    _wait_ready(ready, procs)
    cpu = cpu_seconds(broker.pid)
    start.set()
    sampled = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sampled = max(sampled, _status_mb(broker.pid, "VmRSS"))
        time.sleep(0.2)
    results = _collect(queue, procs)
    cpu = cpu_seconds(broker.pid) - cpu
    commits: int = sum(r[0] for r in results)
    elapsed: float = max(r[2] for r in results) - min(r[1] for r in results)
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r[3]["errors"])
    figures: dict[str, Any] = {
        "end_txn": [x for r in results for x in r[3]["end_txn"]],
        "transaction": [x for r in results for x in r[3]["transaction"]],
        "retries": sum(r[3]["retries"] for r in results),
        "errors": dict(errors),
        "cpu_per_commit": cpu / commits if commits else float("nan"),
    }
    return commits / elapsed, figures, sampled


# --- report -----------------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _runs(values: list[float], unit: str = "") -> str:
    return "runs " + ", ".join(f"{v:.2f}{unit}" for v in values)


@dataclass(frozen=True, slots=True)
class TxnSamples:
    """The raw samples behind the figures of one `exactly bench txn` run (seconds unless named)."""

    idempotent_rounds_records_s: tuple[float, ...]
    transactional_rounds_records_s: tuple[float, ...]
    commit: tuple[tuple[float, ...], ...]  # per latency run: commit_transaction() of each transaction
    transaction: tuple[tuple[float, ...], ...]  # per latency run: begin .. commit returned
    end_txn: tuple[tuple[float, ...], ...]  # per latency run: commit_transaction() after flush()
    visibility: tuple[tuple[float, ...], ...]  # per visibility run
    ids_commits_s: tuple[float, ...]  # per ids run
    ids_end_txn: tuple[tuple[float, ...], ...]  # per ids run
    ids_transaction: tuple[tuple[float, ...], ...]  # per ids run
    # The broker's CPU (utime+stime of its process) per workload, one value per round or run:
    idempotent_cpu_s_per_gb: tuple[float, ...] = ()
    transactional_cpu_s_per_gb: tuple[float, ...] = ()
    transactional_cpu_ms_per_commit: tuple[float, ...] = ()
    latency_cpu_ms_per_commit: tuple[float, ...] = ()  # every transaction of a latency run (warm-up too)
    visibility_cpu_ms_per_commit: tuple[float, ...] = ()
    ids_cpu_ms_per_commit: tuple[float, ...] = ()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    report, _samples = measure(argv)
    print(json.dumps(report))
    return report


def _at_least_one(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def measure(argv: list[str] | None = None) -> tuple[dict[str, Any], TxnSamples]:
    """Run the benchmark (prints its table); returns every figure and the raw samples."""
    parser = argparse.ArgumentParser(description="exactly transactions benchmark")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each throughput round")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds of each mode")
    parser.add_argument("--producers", type=int, default=1, help="producer processes for throughput")
    parser.add_argument(
        "--warmup-seconds", type=float, default=5.0, help="unmeasured idempotent round first (0: none)"
    )
    parser.add_argument(
        "--commits", type=_at_least_one, default=500, help="one-record transactions per latency run"
    )
    parser.add_argument(
        "--visibility-commits", type=_at_least_one, default=300, help="transactions per visibility run"
    )
    parser.add_argument("--fetch-wait-ms", type=int, default=5, help="fetch.wait.max.ms of the consumer")
    parser.add_argument("--runs", type=int, default=3, help="runs of the latency, visibility and ids phases")
    parser.add_argument("--ids", type=int, default=1000, help="concurrent transactional ids")
    parser.add_argument("--ids-processes", type=int, default=4, help="processes driving the ids")
    parser.add_argument("--ids-seconds", type=float, default=10.0, help="length of each ids run")
    parser.add_argument(
        "--versions-commits", type=int, default=300, help="transactions per TV2-vs-TV1 run (0: skip)"
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="exactly-bench-txn-") as tmp:
        broker = start_broker(Path(tmp))
        try:
            return _bench(broker, args)
        except BaseException:
            sys.stderr.write(broker.log_path.read_text(errors="replace")[-4000:])
            raise
        finally:
            broker.stop()


def _bench(broker: BrokerProcess, args: argparse.Namespace) -> tuple[dict[str, Any], TxnSamples]:
    bootstrap = broker.bootstrap
    _create_topics(bootstrap)
    print(
        f"exactly bench txn: broker pid {broker.pid}, {RECORD_SIZE} B records, {PARTITIONS} partitions, "
        "fsync before ack; medians of repeated runs"
    )

    # 1. throughput, interleaved: round r runs (idem, txn) when r is even and (txn, idem) when odd.
    idem_rounds: list[float] = []
    txn_rounds: list[float] = []
    idem_cores: list[float] = []
    txn_cores: list[float] = []
    txn_details: list[Round] = []
    idem_details: list[Round] = []
    warmup = float("nan")
    if args.warmup_seconds > 0:  # the first round on a fresh broker runs fast; do not let it count
        warmup = throughput_round(broker, False, args.producers, args.warmup_seconds, "warmup").records_s
    for r in range(args.rounds):
        for transactional in (False, True) if r % 2 == 0 else (True, False):
            result = throughput_round(broker, transactional, args.producers, args.seconds, str(r))
            (txn_rounds if transactional else idem_rounds).append(result.records_s)
            (txn_cores if transactional else idem_cores).append(result.broker_cores)
            (txn_details if transactional else idem_details).append(result)
    commit_share = _median([d.commit_share for d in txn_details])
    commit_mean = _median([d.commit_mean for d in txn_details])
    drain_share = _median([d.drain_share for d in txn_details])
    drain_mean = _median([d.drain_mean for d in txn_details])
    per_round = _median([d.transactions / args.seconds / args.producers for d in txn_details])
    idem, txn = _median(idem_rounds), _median(txn_rounds)
    paired = _median([t / i for i, t in zip(idem_rounds, txn_rounds, strict=True)])
    mb = RECORD_SIZE / 1e6
    print(
        f"\n1. throughput, {args.producers} producer process(es), {args.seconds:g} s rounds, acks=all "
        f"(after a {args.warmup_seconds:g} s warm-up round: {warmup:.0f} records/s)"
    )
    print(f"   {'mode':<34}{'MB/s':>8}{'records/s':>12}{'broker CPU':>12}   rounds (records/s)")
    for label, value, used, rounds in (
        ("idempotent", idem, idem_cores, idem_rounds),
        ("transactional, commit every 100 ms", txn, txn_cores, txn_rounds),
    ):
        print(
            f"   {label:<34}{value * mb:8.1f}{value:12.0f}{_median(used):11.2f}c   "
            + ", ".join(f"{v:.0f}" for v in rounds)
        )
    print(
        f"   transactional / idempotent: ratio of medians {txn / idem:.3f} (target >= 0.97), "
        f"median of the rounds' ratios {paired:.3f}"
    )
    print(
        f"   each transactional producer committed {per_round:.1f} times/s; of its time it spent "
        f"{drain_share * 100:.1f}% in flush() before the commit (draining what it queued in the 100 ms, "
        f"mean {drain_mean * 1e3:.1f} ms) and {commit_share * 100:.1f}% in commit_transaction() after it "
        f"(EndTxn, mean {commit_mean * 1e3:.2f} ms)"
    )

    # 2. commit latency
    lat_measured = [commit_latency(broker, args.commits, str(k)) for k in range(args.runs)]
    lat_runs = [run for run, _cpu in lat_measured]
    lat_cpu_ms = [cpu * 1e3 for _run, cpu in lat_measured]
    lat: dict[str, tuple[list[float], list[float]]] = {
        name: ([_ms(run[name], 0.5) for run in lat_runs], [_ms(run[name], 0.99) for run in lat_runs])
        for name in ("commit", "transaction", "end_txn")
    }
    print(f"\n2. one-record transactions, {args.commits} per run, {args.runs} runs (ms, median of runs)")
    print(f"   {'timed':<52}{'p50':>8}{'p99':>8}   per run p50 / p99")
    labels = {
        "commit": "commit_transaction() (AddPartitions+Produce+EndTxn)",
        "transaction": "begin .. commit_transaction() returned",
        "end_txn": "commit_transaction() after flush() (EndTxn)",
    }
    for name, label in labels.items():
        p50s, p99s = lat[name]
        print(
            f"   {label:<52}{_median(p50s):8.2f}{_median(p99s):8.2f}   "
            + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(p50s, p99s, strict=True))
        )
    print(
        f"   broker CPU per transaction {_median(lat_cpu_ms):.3f} ms ({_runs(lat_cpu_ms, ' ms')}; "
        "target <= 0.3 ms)"
    )
    print("   targets: commit_transaction() p50 <= 1.5 ms, EndTxn alone p50 <= 0.5 ms")

    # 3. visibility
    vis_p50: list[float] = []
    vis_p99: list[float] = []
    vis_runs: list[tuple[float, ...]] = []
    missing = 0
    vis_cpu: list[float] = []
    for k in range(args.runs):
        cpu = cpu_seconds(broker.pid)
        delays, lost = visibility(bootstrap, args.visibility_commits, args.fetch_wait_ms, str(k))
        vis_cpu.append((cpu_seconds(broker.pid) - cpu) * 1e3 / args.visibility_commits)
        vis_runs.append(tuple(delays))
        vis_p50.append(_ms(delays, 0.5))
        vis_p99.append(_ms(delays, 0.99))
        missing += lost
    print(
        f"\n3. commit_transaction() returned -> read_committed consumer (fetch.wait.max.ms="
        f"{args.fetch_wait_ms}) has the record, {args.visibility_commits} per run (ms, median of runs)"
    )
    print(
        f"   p50 {_median(vis_p50):.2f}  p99 {_median(vis_p99):.2f}   per run p50 / p99 "
        + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(vis_p50, vis_p99, strict=True))
        + f"   (target p99 <= 20; {missing} records not seen)"
    )

    # 4. many ids
    rss_before = _status_mb(broker.pid, "VmRSS")
    lifetime_peak = _peak_rss_mb(broker.pid)
    reset = _reset_peak_rss(broker.pid)
    ids_rates: list[float] = []
    ids_runs: list[dict[str, Any]] = []
    sampled_peak = 0.0
    for _ in range(args.runs):
        rate, figures, sampled = many_ids(broker, args.ids, args.ids_processes, args.ids_seconds)
        ids_rates.append(rate)
        ids_runs.append(figures)
        sampled_peak = max(sampled_peak, sampled)
    ids_peak = _peak_rss_mb(broker.pid) if reset else sampled_peak
    end_p50 = [_ms(f["end_txn"], 0.5) for f in ids_runs]
    end_p99 = [_ms(f["end_txn"], 0.99) for f in ids_runs]
    whole_p50 = [_ms(f["transaction"], 0.5) for f in ids_runs]
    whole_p99 = [_ms(f["transaction"], 0.99) for f in ids_runs]
    retries = sum(f["retries"] for f in ids_runs)
    cpu_ms = [f["cpu_per_commit"] * 1e3 for f in ids_runs]
    errors: Counter[str] = Counter()
    for f in ids_runs:
        errors.update(f["errors"])
    print(
        f"\n4. {args.ids} transactional ids committing at once ({args.ids_processes} processes, our codecs, "
        f"one connection per id), {args.ids_seconds:g} s runs, {args.runs} runs (median of runs)"
    )
    print(
        f"   commits/s {_median(ids_rates):.0f}   {_runs(ids_rates)}   broker CPU per commit "
        f"{_median(cpu_ms):.2f} ms"
    )
    print(
        f"   EndTxn        p50 {_median(end_p50):7.2f} ms  p99 {_median(end_p99):7.2f} ms   "
        "per run p50 / p99 " + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(end_p50, end_p99, strict=True))
    )
    print(
        f"   transaction   p50 {_median(whole_p50):7.2f} ms  p99 {_median(whole_p99):7.2f} ms   "
        "(AddPartitions + Produce + EndTxn) per run p50 / p99 "
        + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(whole_p50, whole_p99, strict=True))
    )
    print(f"   CONCURRENT_TRANSACTIONS retries {retries}, errors {dict(errors) or 'none'}")
    print(
        f"   broker RSS: before {rss_before:.0f} MB, peak during the ids runs {ids_peak:.0f} MB "
        f"({'VmHWM after reset' if reset else 'sampled VmRSS'}), lifetime peak before them "
        f"{lifetime_peak:.0f} MB"
    )

    samples = TxnSamples(
        idempotent_rounds_records_s=tuple(idem_rounds),
        transactional_rounds_records_s=tuple(txn_rounds),
        commit=tuple(tuple(run["commit"]) for run in lat_runs),
        transaction=tuple(tuple(run["transaction"]) for run in lat_runs),
        end_txn=tuple(tuple(run["end_txn"]) for run in lat_runs),
        visibility=tuple(vis_runs),
        ids_commits_s=tuple(ids_rates),
        ids_end_txn=tuple(tuple(f["end_txn"]) for f in ids_runs),
        ids_transaction=tuple(tuple(f["transaction"]) for f in ids_runs),
        idempotent_cpu_s_per_gb=tuple(d.cpu_s_per_gb for d in idem_details),
        transactional_cpu_s_per_gb=tuple(d.cpu_s_per_gb for d in txn_details),
        transactional_cpu_ms_per_commit=tuple(d.cpu_ms_per_commit for d in txn_details),
        latency_cpu_ms_per_commit=tuple(lat_cpu_ms),
        visibility_cpu_ms_per_commit=tuple(vis_cpu),
        ids_cpu_ms_per_commit=tuple(cpu_ms),
    )
    report = {
        "producers": args.producers,
        "round_seconds": args.seconds,
        "idempotent_mb_s": idem * mb,
        "idempotent_records_s": idem,
        "transactional_mb_s": txn * mb,
        "transactional_records_s": txn,
        "txn_over_idempotent": txn / idem,
        "idempotent_rounds_records_s": idem_rounds,
        "transactional_rounds_records_s": txn_rounds,
        "txn_over_idempotent_paired": paired,
        "txn_commits_s_per_producer": per_round,
        "txn_drain_share": drain_share,
        "txn_drain_mean_ms": drain_mean * 1e3,
        "txn_end_txn_share": commit_share,
        "txn_end_txn_mean_ms": commit_mean * 1e3,
        "idempotent_broker_cpu_cores": _median(idem_cores),
        "transactional_broker_cpu_cores": _median(txn_cores),
        "commit_p50_ms": _median(lat["commit"][0]),
        "commit_p99_ms": _median(lat["commit"][1]),
        "transaction_p50_ms": _median(lat["transaction"][0]),
        "transaction_p99_ms": _median(lat["transaction"][1]),
        "commit_after_flush_p50_ms": _median(lat["end_txn"][0]),
        "commit_after_flush_p99_ms": _median(lat["end_txn"][1]),
        "commits_per_run": args.commits,
        "serial_broker_cpu_ms_per_txn": _median(lat_cpu_ms),
        "serial_broker_cpu_ms_per_txn_runs": lat_cpu_ms,
        "visibility_p50_ms": _median(vis_p50),
        "visibility_p99_ms": _median(vis_p99),
        "visibility_per_run": args.visibility_commits,
        "visibility_missing": missing,
        "fetch_wait_max_ms": args.fetch_wait_ms,
        "ids": args.ids,
        "ids_commits_s": _median(ids_rates),
        "ids_end_txn_p50_ms": _median(end_p50),
        "ids_end_txn_p99_ms": _median(end_p99),
        "ids_transaction_p50_ms": _median(whole_p50),
        "ids_transaction_p99_ms": _median(whole_p99),
        "ids_broker_cpu_ms_per_commit": _median(cpu_ms),
        "ids_commits_s_runs": ids_rates,
        "ids_retries": retries,
        "ids_errors": sum(errors.values()),
        "broker_rss_before_ids_mb": rss_before,
        "broker_peak_rss_ids_mb": ids_peak,
        "broker_peak_rss_lifetime_mb": max(lifetime_peak, ids_peak),
        "runs": args.runs,
    }
    # 5. transaction version 2 vs 1
    if args.versions_commits > 0:
        versions = txn_versions.compare(bootstrap, args.versions_commits, args.runs)
        txn_versions.report(versions, args.versions_commits, args.runs, 1, heading="5. ")
        report.update(versions)
    return report, samples


if __name__ == "__main__":
    main()
