"""Broker CPU per small request (issue 25): what one request costs the broker however little it asks.

    python -m exactly.bench.requests [--rounds 3] [--requests 2000] [--kinds api_versions,metadata,...]
                                     [--client exactly|confluent|both] [--set key=value ...]
    exactly bench requests ...        (the same options)

A transaction is three or four requests, an offset commit one: below some size, what a request costs
the broker is the plumbing every request goes through (reading the frame, the header, dispatch, the
response's encoding, the write), not the work it asks for. This measures that cost, per kind of small
request, against one real `exactly serve` process started in a temporary directory:

- `api_versions`: ApiVersions v3 (no work at all: the floor);
- `metadata`: Metadata v12 of one topic (one partition);
- `offset_commit`: OffsetCommit v8 of one partition, a simple (generation -1) commit: an append to
  `__consumer_offsets` made durable before the answer;
- `produce`: Produce v9, acks=1, one batch of one 100-byte record to one partition (an append, no wait
  for the fsync).

Client `exactly`: exactly's own blocking client (`exactly.client.connection.KafkaConnection`), one
connection, requests sent one at a time (each waits for its answer). Client `confluent`: confluent-kafka
doing the same serially where its API allows it (`list_topics(topic)`, a synchronous `commit`, a produce
followed by `flush`); librdkafka sends requests of its own besides (ApiVersions and Metadata at start,
heartbeats are not involved: the consumer never joins the group), so its figures are an upper bound.
ApiVersions cannot be asked for on its own through confluent-kafka: not measured there.

Per round and kind: `--warm-up` requests not counted, then `--requests` timed ones; the broker's CPU is
utime and stime of `/proc/<pid>/stat` read before and after them. Reported per kind: broker CPU
microseconds per request (user + sys, and each), the client's requests per second; then the median over
`--rounds` rounds with the spread (min..max). CPU time, not wall time, is the figure that holds on a
loaded, shared machine; the clock tick is 10 ms, so a round should cost the broker a good part of a
second (2,000 requests at ~100 us: 20 ticks).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

__all__ = [
    "Kind",
    "Measurement",
    "Summary",
    "main",
    "measure",
    "summarize",
]

TOPIC = "requests"
GROUP = "requests-bench"
VALUE = b"v" * 100
BROKER_START_TIMEOUT = 30.0


class Kind(Enum):
    API_VERSIONS = "api_versions"
    METADATA = "metadata"
    OFFSET_COMMIT = "offset_commit"
    PRODUCE = "produce"


@dataclass(frozen=True, slots=True)
class Measurement:
    """One round of one kind: `requests` answered in `seconds` of wall time, the broker's user and system
    CPU seconds across them."""

    kind: Kind
    client: str
    requests: int
    seconds: float
    user: float
    system: float

    @property
    def us_per_request(self) -> float:
        return (self.user + self.system) / self.requests * 1e6 if self.requests else float("nan")

    @property
    def user_us(self) -> float:
        return self.user / self.requests * 1e6 if self.requests else float("nan")

    @property
    def system_us(self) -> float:
        return self.system / self.requests * 1e6 if self.requests else float("nan")

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else float("nan")


@dataclass(frozen=True, slots=True)
class Summary:
    """The median over rounds of one kind and client, with each figure's spread (min, max)."""

    kind: Kind
    client: str
    rounds: int
    us: float
    us_spread: tuple[float, float]
    user_us: float
    system_us: float
    per_second: float
    per_second_spread: tuple[float, float]

    def __str__(self) -> str:
        lo, hi = self.us_spread
        rlo, rhi = self.per_second_spread
        return (
            f"{self.client:9} {self.kind.value:13} broker CPU {self.us:7.1f} us/request"
            f" (spread {lo:.1f}..{hi:.1f}; user {self.user_us:.1f}, sys {self.system_us:.1f}),"
            f" {self.per_second:7.0f} requests/s ({rlo:.0f}..{rhi:.0f}), {self.rounds} rounds"
        )


def summarize(measurements: Sequence[Measurement]) -> list[Summary]:
    """One `Summary` per (client, kind), in the order each first appears."""
    groups: dict[tuple[str, Kind], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.client, m.kind), []).append(m)
    out = []
    for (client, kind), ms in groups.items():
        us = [m.us_per_request for m in ms]
        rate = [m.per_second for m in ms]
        out.append(
            Summary(
                kind,
                client,
                len(ms),
                statistics.median(us),
                (min(us), max(us)),
                statistics.median(m.user_us for m in ms),
                statistics.median(m.system_us for m in ms),
                statistics.median(rate),
                (min(rate), max(rate)),
            )
        )
    return out


CpuReader = Callable[[], tuple[float, float]]


def measure(
    kind: Kind,
    client: str,
    request: Callable[[], None],
    requests: int,
    warm_up: int,
    cpu: CpuReader,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Call `request` `warm_up` times, then `requests` times between two readings of the broker's
    (user, system) CPU seconds (`cpu`) and of the wall `clock`."""
    for _ in range(warm_up):
        request()
    user0, sys0 = cpu()
    start = clock()
    for _ in range(requests):
        request()
    seconds = clock() - start
    user1, sys1 = cpu()
    return Measurement(kind, client, requests, seconds, user1 - user0, sys1 - sys0)


# --- the clients ----------------------------------------------------------------------------------------


def _exactly_requests(host: str, port: int) -> tuple[dict[Kind, Callable[[], None]], Callable[[], None]]:
    """One exactly connection and a request function per kind (each checks its answer); and a close."""
    from exactly.client.connection import KafkaConnection
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.api_versions import ApiVersionsRequest
    from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
    from exactly.protocol.messages.offset_commit import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from exactly.records.builder import build_batch

    conn = KafkaConnection.open(host, port, client_id="requests-bench", timeout=30.0)
    versions = ApiVersionsRequest("exactly-bench", "1")
    metadata = MetadataRequest([MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
    batch = build_batch([(None, VALUE)], timestamp=int(time.time() * 1000))
    produce = ProduceRequest(
        None, 1, 30_000, [TopicProduceData(TOPIC, partition_data=[PartitionProduceData(0, batch)])]
    )
    offset = [0]

    def api_versions() -> None:
        answer = conn.request(ApiKey.API_VERSIONS, 3, versions)
        assert answer.error_code == 0, answer.error_code

    def metadata_one() -> None:
        answer = conn.request(ApiKey.METADATA, 12, metadata)
        assert answer.topics[0].error_code == 0, answer.topics[0].error_code

    def offset_commit() -> None:
        offset[0] += 1
        part = OffsetCommitRequestPartition(0, offset[0])
        body = OffsetCommitRequest(
            GROUP, -1, "", None, -1, [OffsetCommitRequestTopic(TOPIC, partitions=[part])]
        )
        answer = conn.request(ApiKey.OFFSET_COMMIT, 8, body)
        code = answer.topics[0].partitions[0].error_code
        assert code == 0, code

    def produce_one() -> None:
        answer = conn.request(ApiKey.PRODUCE, 9, produce)
        code = answer.responses[0].partition_responses[0].error_code
        assert code == 0, code

    kinds = {
        Kind.API_VERSIONS: api_versions,
        Kind.METADATA: metadata_one,
        Kind.OFFSET_COMMIT: offset_commit,
        Kind.PRODUCE: produce_one,
    }
    return kinds, conn.close


def _confluent_requests(bootstrap: str) -> tuple[dict[Kind, Callable[[], None]], Callable[[], None]]:
    """confluent-kafka's nearest equivalents (one producer, one consumer that never joins the group)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, "enable.idempotence": False}
    )
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP + "-confluent", "enable.auto.commit": False}
    )
    offset = [0]

    def metadata_one() -> None:
        answer = producer.list_topics(TOPIC, timeout=30)
        assert answer.topics[TOPIC].error is None, answer.topics[TOPIC].error

    def offset_commit() -> None:
        offset[0] += 1
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset[0])], asynchronous=False)

    failures: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    def produce_one() -> None:
        producer.produce(TOPIC, VALUE, partition=0, on_delivery=delivered)
        producer.flush(30)
        assert not failures, failures

    def close() -> None:
        consumer.close()
        producer.flush(30)

    return {Kind.METADATA: metadata_one, Kind.OFFSET_COMMIT: offset_commit, Kind.PRODUCE: produce_one}, close


def _create_topic(host: str, port: int) -> None:
    from exactly.client.connection import KafkaConnection
    from exactly.protocol.messages import ApiKey
    from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest

    conn = KafkaConnection.open(host, port, timeout=30.0)
    try:
        answer = conn.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic(TOPIC, 1, 1)]))
        assert answer.topics[0].error_code in (0, 36), answer.topics[0].error_code  # 36: exists
    finally:
        conn.close()


def _cpu_reader(pid: int) -> CpuReader:
    from exactly.bench.cpu import read_proc_stat

    tick = os.sysconf("SC_CLK_TCK")

    def read() -> tuple[float, float]:
        fields = read_proc_stat(pid).rsplit(")", 1)[1].split()
        return int(fields[11]) / tick, int(fields[12]) / tick

    return read


def run(
    pid: int,
    bootstrap: str,
    clients: Sequence[str],
    kinds: Sequence[Kind],
    rounds: int,
    requests: int,
    warm_up: int,
    report: Callable[[Measurement], None] = lambda m: None,
) -> list[Measurement]:
    """`rounds` rounds, each measuring every kind of every client once (kinds interleaved across rounds,
    so that a noisy moment hits them all)."""
    host, port = bootstrap.rsplit(":", 1)
    cpu = _cpu_reader(pid)
    out: list[Measurement] = []
    made: dict[str, tuple[dict[Kind, Callable[[], None]], Callable[[], None]]] = {}
    for client in clients:
        made[client] = (
            _exactly_requests(host, int(port)) if client == "exactly" else _confluent_requests(bootstrap)
        )
    try:
        for _ in range(rounds):
            for client in clients:
                calls = made[client][0]
                for kind in kinds:
                    if kind in calls:
                        m = measure(kind, client, calls[kind], requests, warm_up, cpu)
                        report(m)
                        out.append(m)
    finally:
        for _, close in made.values():
            close()
    return out


def _run_and_profile(
    args: argparse.Namespace,
    pid: int,
    bootstrap: str,
    clients: list[str],
    kinds: list[Kind],
    report: Callable[[Measurement], None],
) -> list[Measurement]:
    results = run(pid, bootstrap, clients, kinds, args.rounds, args.requests, args.warm_up, report)
    if args.profile is not None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        fmt = {".json": "speedscope", ".txt": "raw"}.get(args.profile.suffix, "flamegraph")
        command = [spy, "record", "--gil", "-r", "500", "--pid", str(pid), "-o", str(args.profile), "-f", fmt]
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
            time.sleep(1.0)  # py-spy attaches
            run(
                pid,
                bootstrap,
                clients,
                kinds,
                1,
                args.requests,
                0,
                lambda m: print(f"(profiled) {m.kind.value}"),
            )
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="exactly bench requests", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000, help="timed requests per kind and round")
    parser.add_argument("--warm-up", type=int, default=200)
    parser.add_argument("--kinds", default=",".join(k.value for k in Kind), help="comma-separated")
    parser.add_argument("--client", choices=["exactly", "confluent", "both"], default="exactly")
    parser.add_argument("--bootstrap-server", default=None, help="an existing broker (needs --pid)")
    parser.add_argument("--pid", type=int, default=None, help="the existing broker's process id")
    parser.add_argument("--set", action="append", default=[], help="a broker setting, key=value")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy --gil the broker in one more round (not counted): .txt raw, .json speedscope, else svg",
    )
    args = parser.parse_args(argv)
    kinds = [Kind(k) for k in args.kinds.split(",") if k]
    clients = ["exactly", "confluent"] if args.client == "both" else [args.client]

    def report(m: Measurement) -> None:
        print(
            f"{m.client:9} {m.kind.value:13} {m.us_per_request:7.1f} us/request"
            f" (user {m.user_us:.1f}, sys {m.system_us:.1f}), {m.per_second:7.0f} requests/s",
            flush=True,
        )

    if args.bootstrap_server is not None:
        if args.pid is None:
            parser.error("--bootstrap-server needs --pid (the broker's CPU is what is measured)")
        host, port = args.bootstrap_server.rsplit(":", 1)
        _create_topic(host, int(port))
        results = _run_and_profile(args, args.pid, args.bootstrap_server, clients, kinds, report)
    else:
        from exactly.testing.processes import BrokerProcess

        with tempfile.TemporaryDirectory(prefix="exactly-requests-") as tmp:
            broker = BrokerProcess(Path(tmp) / "data", *args.set).start(BROKER_START_TIMEOUT)
            try:
                print(f"broker pid {broker.pid} at {broker.bootstrap}", flush=True)
                _create_topic("127.0.0.1", broker.port)
                results = _run_and_profile(args, broker.pid, broker.bootstrap, clients, kinds, report)
            finally:
                broker.stop(30)
    print("medians:")
    for summary in summarize(results):
        print(summary)


if __name__ == "__main__":
    main()
