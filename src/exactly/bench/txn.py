"""Transactions benchmark (issue 6): what exactly-once costs, through the real broker.

    python -m exactly.bench.txn [--seconds S] [--rounds R] [--commits N] [--ids I] [--ids-seconds S]

In one run, with a broker started on a fresh directory (default durability: fsync before every ack):
- throughput, 1 KiB records, one producer process, 6 partitions, acks=all: idempotent producer vs
  transactional producer committing every 100 ms, R rounds of each, interleaved (so machine noise hits
  both alike); medians and the ratio of medians;
- commit latency of one-record transactions (confluent-kafka): `commit_transaction()` right after
  `produce()` (it flushes the record: AddPartitionsToTxn + Produce + EndTxn), and after an explicit
  `flush()` (EndTxn alone); p50/p99 over N transactions;
- visibility: a read_committed consumer process already polling; the producer process sends, for each
  one-record transaction, the wall-clock time at which `commit_transaction()` returned; the consumer
  notes when the record arrives (same machine, same clock); p50/p99 of the difference;
- I concurrent transactional ids (default 1,000) committing one-record transactions for S seconds,
  driven by our own protocol codecs over 8 asyncio connections (1,000 librdkafka instances would not fit
  on this machine): commits/s, EndTxn latency p50/p99, whole-transaction latency, CONCURRENT_TRANSACTIONS
  retries, and the broker's RSS (peak VmHWM and current VmRSS).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from exactly.bench.broker import _peak_rss_mb, percentile
from exactly.bench.groups import Broker

RECORD = b"x" * 1024
PARTITIONS = 6
TOPIC = "bench-txn"


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in (TOPIC, "bench-visibility", "bench-ids"):
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


# --- throughput -------------------------------------------------------------------------------------------


def _throughput_process(bootstrap: str, transactional: bool, seconds: float, queue: Any) -> None:
    from confluent_kafka import Producer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "batch.size": 256 * 1024,
        "enable.idempotence": True,
    }
    if transactional:
        config["transactional.id"] = f"bench-{time.monotonic_ns()}"
    producer = Producer(config)
    delivered = [0]

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            delivered[0] += 1

    if transactional:
        producer.init_transactions(30)
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        if transactional:
            producer.begin_transaction()
        window_end = min(end, time.perf_counter() + 0.1) if transactional else end
        while time.perf_counter() < window_end:
            try:
                producer.produce(TOPIC, RECORD, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.001)
        if transactional:
            producer.commit_transaction(30)
    producer.flush(30)
    elapsed = time.perf_counter() - start
    queue.put(delivered[0] / elapsed)


def throughput(bootstrap: str, transactional: bool, seconds: float) -> float:
    """Records/s of one producer process."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_throughput_process, args=(bootstrap, transactional, seconds, queue))
    proc.start()
    rate: float = queue.get(timeout=seconds + 120)
    proc.join(30)
    return rate


# --- commit latency ---------------------------------------------------------------------------------------


def commit_latency(bootstrap: str, commits: int) -> tuple[list[float], list[float]]:
    """(commit_transaction right after produce, commit_transaction after flush), in seconds."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-latency", "linger.ms": 0})
    producer.init_transactions(30)
    with_flush: list[float] = []
    alone: list[float] = []
    for i in range(2 * commits):
        producer.begin_transaction()
        producer.produce(TOPIC, RECORD, partition=i % PARTITIONS)
        if i % 2:
            producer.flush(30)
        start = time.perf_counter()
        producer.commit_transaction(30)
        (alone if i % 2 else with_flush).append(time.perf_counter() - start)
    return with_flush, alone


# --- visibility -------------------------------------------------------------------------------------------


def _visibility_consumer(bootstrap: str, expected: int, ready: Any, queue: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-visibility",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.error.backoff.ms": 1,
        }
    )
    consumer.assign([TopicPartition("bench-visibility", 0, 0)])
    consumer.poll(0.5)
    ready.set()
    arrivals: dict[int, float] = {}
    deadline = time.monotonic() + 120
    while len(arrivals) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            continue
        arrivals[int(message.value() or b"-1")] = time.time()
    consumer.close()
    queue.put(arrivals)


def visibility(bootstrap: str, commits: int) -> list[float]:
    """Seconds from commit_transaction() returning to the record reaching a read_committed consumer."""
    from confluent_kafka import Producer

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    ready = ctx.Event()
    consumer = ctx.Process(target=_visibility_consumer, args=(bootstrap, commits, ready, queue))
    consumer.start()
    ready.wait(60)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "bench-visibility", "linger.ms": 0}
    )
    producer.init_transactions(30)
    returned: dict[int, float] = {}
    for i in range(commits):
        producer.begin_transaction()
        producer.produce("bench-visibility", str(i).encode(), partition=0)
        producer.commit_transaction(30)
        returned[i] = time.time()
        time.sleep(0.005)
    arrivals: dict[int, float] = queue.get(timeout=180)
    consumer.join(30)
    return [arrivals[i] - returned[i] for i in returned if i in arrivals]


# --- many transactional ids (our own codecs) ----------------------------------------------------------------


class _Connection:
    """One socket carrying many requests at once, matched to responses by correlation id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.next_id = 0
        self.waiting: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        from exactly.protocol.api import decode_response

        while True:
            size = struct.unpack(">i", await self.reader.readexactly(4))[0]
            frame = await self.reader.readexactly(size)
            (correlation,) = struct.unpack_from(">i", frame)
            api_key, version, future = self.waiting.pop(correlation)
            future.set_result(decode_response(api_key, version, frame)[1])

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        from exactly.protocol.api import encode_request

        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = (api_key, version, future)
        self.writer.write(encode_request(api_key, version, self.next_id, "bench", body))
        return await future


async def _one_id(
    conn: _Connection, txn_id: str, partition: int, until: float, stats: dict[str, list[float]]
) -> None:
    from exactly.errors import ErrorCode
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.add_partitions_to_txn import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnTopic,
    )
    from exactly.protocol.messages.end_txn import EndTxnRequest
    from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
    from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from exactly.records.builder import BatchBuilder

    init = await conn.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(txn_id, 60_000, -1, -1))
    assert init.error_code == ErrorCode.NONE, init
    pid, epoch, sequence = init.producer_id, init.producer_epoch, 0
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic("bench-ids", [partition])],
    )
    while time.perf_counter() < until:
        start = time.perf_counter()
        while True:
            added = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
            code = added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            if code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            stats["retries"].append(1.0)
            await asyncio.sleep(0.005)
        assert code == ErrorCode.NONE, code
        builder = BatchBuilder(
            producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
        )
        builder.append(int(time.time() * 1000), None, RECORD)
        sequence += 1
        produce = ProduceRequest(
            txn_id,
            -1,
            30_000,
            [
                TopicProduceData(
                    "bench-ids", partition_data=[PartitionProduceData(partition, builder.build())]
                )
            ],
        )
        produced = await conn.request(ApiKey.PRODUCE, 9, produce)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        end_start = time.perf_counter()
        ended = await conn.request(ApiKey.END_TXN, 3, EndTxnRequest(txn_id, pid, epoch, True))
        assert ended.error_code == ErrorCode.NONE, ended
        now = time.perf_counter()
        stats["end_txn"].append(now - end_start)
        stats["transaction"].append(now - start)


async def _many_ids(port: int, ids: int, seconds: float, connections: int = 8) -> dict[str, list[float]]:
    conns = [_Connection(*await asyncio.open_connection("127.0.0.1", port)) for _ in range(connections)]
    stats: dict[str, list[float]] = {"end_txn": [], "transaction": [], "retries": []}
    until = time.perf_counter() + seconds
    await asyncio.gather(
        *(_one_id(conns[i % connections], f"bench-id-{i}", i % PARTITIONS, until, stats) for i in range(ids))
    )
    for conn in conns:
        conn.task.cancel()
        conn.writer.close()
    return stats


def _current_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- report -----------------------------------------------------------------------------------------------


def _ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1e3


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description="exactly transactions benchmark")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each throughput round")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds of each mode")
    parser.add_argument("--commits", type=int, default=500, help="transactions for the latency figures")
    parser.add_argument("--ids", type=int, default=1000, help="concurrent transactional ids")
    parser.add_argument("--ids-seconds", type=float, default=15.0)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="exactly-bench-txn-") as tmp:
        broker = Broker(Path(tmp) / "data")
        try:
            bootstrap = broker.bootstrap
            _create_topics(bootstrap)
            idempotent: list[float] = []
            transactional: list[float] = []
            for _ in range(args.rounds):
                idempotent.append(throughput(bootstrap, False, args.seconds))
                transactional.append(throughput(bootstrap, True, args.seconds))
            idem, txn = statistics.median(idempotent), statistics.median(transactional)
            print(
                f"throughput, idempotent      : {idem * 1024 / 1e6:7.1f} MB/s {idem:9.0f} records/s "
                f"(rounds: {', '.join(f'{r:.0f}' for r in idempotent)})"
            )
            print(
                f"throughput, txn every 100 ms: {txn * 1024 / 1e6:7.1f} MB/s {txn:9.0f} records/s "
                f"(rounds: {', '.join(f'{r:.0f}' for r in transactional)})"
            )
            print(f"transactional / idempotent  : {txn / idem:.3f} (target >= 0.97)")

            with_flush, alone = commit_latency(bootstrap, args.commits)
            print(
                f"commit_transaction() after produce(): p50 {_ms(with_flush, 0.5):.2f} ms  "
                f"p99 {_ms(with_flush, 0.99):.2f} ms (AddPartitions + Produce + EndTxn)"
            )
            print(
                f"commit_transaction() after flush()  : p50 {_ms(alone, 0.5):.2f} ms  "
                f"p99 {_ms(alone, 0.99):.2f} ms (EndTxn; target p50 <= 3, p99 <= 15)"
            )
            visible = visibility(
                bootstrap, max(300, args.commits // 2) if args.commits >= 300 else args.commits
            )
            print(
                f"commit returned -> read_committed consumer has it: p50 {_ms(visible, 0.5):.2f} ms  "
                f"p99 {_ms(visible, 0.99):.2f} ms ({len(visible)} transactions; target p99 <= 20)"
            )

            stats = asyncio.run(_many_ids(broker.port, args.ids, args.ids_seconds))
            commits = len(stats["end_txn"])
            end_txn, whole = stats["end_txn"], stats["transaction"]
            print(
                f"{args.ids} transactional ids: {commits / args.ids_seconds:.0f} commits/s, EndTxn p50 "
                f"{_ms(end_txn, 0.5):.1f} ms p99 {_ms(end_txn, 0.99):.1f} ms, transaction p50 "
                f"{_ms(whole, 0.5):.1f} ms p99 {_ms(whole, 0.99):.1f} ms, "
                f"{len(stats['retries'])} CONCURRENT_TRANSACTIONS retries"
            )
            peak, current = _peak_rss_mb(broker.proc.pid), _current_rss_mb(broker.proc.pid)
            print(f"broker RSS: peak {peak:.0f} MB, now {current:.0f} MB")
            report = {
                "idempotent_records_s": idem,
                "transactional_records_s": txn,
                "ratio": txn / idem,
                "commit_after_produce_p50_ms": _ms(with_flush, 0.5),
                "commit_after_produce_p99_ms": _ms(with_flush, 0.99),
                "commit_after_flush_p50_ms": _ms(alone, 0.5),
                "commit_after_flush_p99_ms": _ms(alone, 0.99),
                "visibility_p50_ms": _ms(visible, 0.5),
                "visibility_p99_ms": _ms(visible, 0.99),
                "ids": float(args.ids),
                "ids_commits_s": commits / args.ids_seconds,
                "ids_end_txn_p50_ms": _ms(stats["end_txn"], 0.5),
                "ids_end_txn_p99_ms": _ms(stats["end_txn"], 0.99),
                "ids_transaction_p50_ms": _ms(stats["transaction"], 0.5),
                "ids_transaction_p99_ms": _ms(stats["transaction"], 0.99),
                "broker_peak_rss_mb": peak,
                "broker_rss_mb": current,
            }
            print(json.dumps(report))
            return report
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
