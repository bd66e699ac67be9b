"""Group coordinator benchmark: rebalance latency, OffsetCommit throughput, coordinator load time.

    python -m exactly.bench.groups [--members 3 30] [--rounds 5] [--heartbeat-ms 100]
                                   [--commit-seconds 10] [--committers 10] [--load-records 1000000]
                                   [--skip-clients]

1. Rebalance latency — the time from a new member's JoinGroup to every member (old and new) holding
   its assignment for the new generation, in a group of N members that heartbeat every `--heartbeat-ms`:
   * protocol level: N members written with exactly's own codecs over asyncio (one connection each,
     the leader assigns round robin), so the figure is the broker plus one heartbeat interval;
   * confluent-kafka: N `Consumer`s subscribed in one process (range assignor), timed from the new
     consumer's `subscribe()` to the last `on_assign` callback.
2. OffsetCommit requests/s — `--committers` connections commit one partition each of one group, one
   request in flight per connection, every commit fsynced before it is acknowledged (group commit);
   with the broker's CPU time (/proc/PID/stat utime + stime) per request. The committers are threads
   of this process sending back to back, so their latency at that saturation is committers divided by
   requests/s (Little's law) and tells the throughput again; the latency of a commit is measured a
   second time with the same committers paced to `--paced-rate` commits/s each (`PACED_RATE`), timed
   from when each commit was due, not when it was sent (a late send counts its wait).
3. Coordinator load time — `--load-records` OffsetCommit records (100 per batch) written to a
   `__consumer_offsets` partition, then replayed by a fresh `GroupCoordinator` as at broker start-up:
   once with every key distinct, once with each key committed 100 times.

A broker is started in a temporary directory (group.initial.rebalance.delay.ms=0) for 1 and 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly.bench.broker import cpu_seconds
from exactly.client.connection import ConnectionClosedError, KafkaConnection, RequestPipeline
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.heartbeat import HeartbeatRequest
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from exactly.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from exactly.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from exactly.testing.processes import BrokerProcess

TOPIC = "bench-groups"
PARTITIONS = 64
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)


# --- protocol-level members ---------------------------------------------------------------------------


def _subscription() -> bytes:
    raw = TOPIC.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", -1)


def _assignment(partitions: list[int]) -> bytes:
    raw = TOPIC.encode()
    out = struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", len(partitions))
    out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


class _Conn:
    """One connection, one request at a time (what a member does)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.pipeline = RequestPipeline("bench")

    @classmethod
    async def open(cls, port: int) -> _Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, key: ApiKey, version: int, body: Any) -> Any:
        _, frame = self.pipeline.encode(key, version, body)
        self.writer.write(frame)
        while (answer := self.pipeline.next_response()) is None:
            data = await self.reader.read(1 << 16)
            if not data:
                raise ConnectionClosedError("broker closed the connection")
            self.pipeline.feed(data)
        return answer[1]

    def close(self) -> None:
        self.writer.close()


@dataclass
class _Member:
    group: str
    port: int
    heartbeat_s: float
    member_id: str = ""
    generation: int = -1
    synced: dict[int, float] = field(default_factory=dict)  # generation -> when its assignment arrived
    stop: bool = False

    async def run(self) -> None:
        conn = await _Conn.open(self.port)
        try:
            while not self.stop:
                await self._join_and_sync(conn)
                while not self.stop:
                    await asyncio.sleep(self.heartbeat_s)
                    hb = await conn.request(
                        ApiKey.HEARTBEAT, 3, HeartbeatRequest(self.group, self.generation, self.member_id)
                    )
                    if hb.error_code == REBALANCE_IN_PROGRESS:
                        break
                    if hb.error_code:
                        self.member_id = ""
                        break
            if self.member_id:
                leave = LeaveGroupRequest(self.group, members=[MemberIdentity(self.member_id)])
                await conn.request(ApiKey.LEAVE_GROUP, 3, leave)
        finally:
            conn.close()

    async def _join_and_sync(self, conn: _Conn) -> None:
        protocols = [JoinGroupRequestProtocol("roundrobin", _subscription())]
        while True:
            request = JoinGroupRequest(
                self.group, 10_000, 30_000, self.member_id, None, "consumer", protocols
            )
            response = await conn.request(ApiKey.JOIN_GROUP, 5, request)
            if response.error_code == MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if response.error_code:
                self.member_id = ""
                continue
            break
        self.member_id, self.generation = response.member_id, response.generation_id
        assignments = []
        if response.leader == self.member_id:
            ids = sorted(m.member_id for m in response.members)
            for i, member_id in enumerate(ids):
                mine = [p for p in range(PARTITIONS) if p % len(ids) == i]
                assignments.append(SyncGroupRequestAssignment(member_id, _assignment(mine)))
        sync = await conn.request(
            ApiKey.SYNC_GROUP,
            3,
            SyncGroupRequest(self.group, self.generation, self.member_id, assignments=assignments),
        )
        if sync.error_code == 0:
            self.synced[self.generation] = time.perf_counter()


async def _protocol_rebalances(port: int, members: int, rounds: int, heartbeat_ms: int) -> list[float]:
    group = f"protocol-{members}"
    heartbeat = heartbeat_ms / 1000
    group_members = [_Member(group, port, heartbeat) for _ in range(members)]
    tasks = [asyncio.create_task(m.run()) for m in group_members]

    async def settled(ms: list[_Member]) -> int:
        """Wait until every member synced the same, latest generation; return it."""
        while True:
            gens = {m.generation for m in ms}
            if len(gens) == 1 and all(m.generation in m.synced for m in ms):
                generation = next(iter(gens))
                await asyncio.sleep(3 * heartbeat)  # no rebalance pending
                if {m.generation for m in ms} == {generation}:
                    return generation
            await asyncio.sleep(0.01)

    latencies = []
    try:
        await asyncio.wait_for(settled(group_members), 120)
        for _ in range(rounds):
            before = group_members[0].generation
            newcomer = _Member(group, port, heartbeat)
            start = time.perf_counter()
            task = asyncio.create_task(newcomer.run())
            everyone = [*group_members, newcomer]

            async def rebalanced(everyone: list[_Member] = everyone, before: int = before) -> float:
                while True:
                    gens = {m.generation for m in everyone}
                    if (
                        len(gens) == 1
                        and (g := next(iter(gens))) > before
                        and all(g in m.synced for m in everyone)
                    ):
                        return max(m.synced[g] for m in everyone)
                    await asyncio.sleep(0.001)

            done = await asyncio.wait_for(rebalanced(), 120)
            latencies.append(done - start)
            newcomer.stop = True
            await task
            await asyncio.wait_for(settled(group_members), 120)
    finally:
        for m in group_members:
            m.stop = True
        await asyncio.gather(*tasks, return_exceptions=True)
    return latencies


# --- confluent-kafka members --------------------------------------------------------------------------


def _client_rebalances(bootstrap: str, members: int, rounds: int, heartbeat_ms: int) -> list[float]:
    from confluent_kafka import Consumer

    group = f"clients-{members}"
    stop = threading.Event()
    assigned: dict[int, list[float]] = {}
    lock = threading.Lock()

    def consumer_thread(index: int, ready: threading.Event, started: list[float]) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": heartbeat_ms,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )

        def on_assign(_c: Any, partitions: list[Any]) -> None:
            with lock:
                assigned.setdefault(index, []).append(time.perf_counter())

        started.append(time.perf_counter())
        consumer.subscribe([TOPIC], on_assign=on_assign)
        ready.set()
        while not stop.is_set() and not (index in leaving and leaving[index].is_set()):
            consumer.poll(0.05)
        consumer.close()

    leaving: dict[int, threading.Event] = {}
    threads = []

    def start(index: int) -> float:
        ready = threading.Event()
        started: list[float] = []
        leaving[index] = threading.Event()
        thread = threading.Thread(target=consumer_thread, args=(index, ready, started), daemon=True)
        thread.start()
        threads.append(thread)
        ready.wait(30)
        return started[0]

    def wait_stable(indexes: list[int], since: float, timeout: float = 120) -> float:
        """Every consumer in `indexes` was assigned after `since`, and nothing moved for a while."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            with lock:
                last = [max((t for t in assigned.get(i, []) if t >= since), default=None) for i in indexes]
            if all(t is not None for t in last):
                latest = max(t for t in last if t is not None)
                if time.perf_counter() - latest > max(2.0, 5 * heartbeat_ms / 1000):
                    return latest
            time.sleep(0.02)
        raise TimeoutError("the consumer group did not settle")

    latencies = []
    try:
        t0 = time.perf_counter()
        for i in range(members):
            start(i)
        wait_stable(list(range(members)), t0)
        for r in range(rounds):
            index = members + r
            began = start(index)
            done = wait_stable([*range(members), index], began)
            latencies.append(done - began)
            leaving[index].set()
            left = time.perf_counter()
            wait_stable(list(range(members)), left)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    return latencies


# --- OffsetCommit throughput --------------------------------------------------------------------------


PACED_RATE = 100.0  # commits/s of each committer in the paced run


def _commit_throughput(
    port: int, committers: int, seconds: float, rate: float | None = None
) -> tuple[float, list[float], int]:
    """(requests/s, latencies, requests). `rate` None: back to back, the latency of every 10th request
    of each committer; else each committer's commits are due every 1/`rate` s and every one is timed
    from when it was due."""
    counts = [0] * committers
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    def committer(index: int) -> None:
        connection = KafkaConnection.open("127.0.0.1", port, client_id="bench", timeout=None)
        commits = 0
        # Spread the committers' schedules over one interval, so the paced commits do not arrive in bursts.
        due = time.perf_counter() + (index / committers / rate if rate else 0.0)
        try:
            while (now := time.perf_counter()) < stop_at:
                if rate is not None:
                    if now < due:
                        time.sleep(due - now)
                    now, due = due, due + 1.0 / rate
                commits += 1
                request = OffsetCommitRequest(
                    "bench-commits",
                    -1,
                    "",
                    None,
                    -1,
                    [
                        OffsetCommitRequestTopic(
                            TOPIC, partitions=[OffsetCommitRequestPartition(index, commits)]
                        )
                    ],
                )
                response = connection.request(ApiKey.OFFSET_COMMIT, 8, request)
                assert response.topics[0].partitions[0].error_code == 0
                counts[index] += 1
                if rate is not None or commits % 10 == 0:
                    latencies.append(time.perf_counter() - now)
        finally:
            connection.close()

    threads = [threading.Thread(target=committer, args=(i,)) for i in range(committers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start), latencies, sum(counts)


# --- load time ----------------------------------------------------------------------------------------


def _load_time(directory: Path, records: int, distinct_keys: int) -> tuple[float, int, float]:
    from exactly.broker.groups import load_partition
    from exactly.clock import SystemClock
    from exactly.group import GroupConfig, GroupCoordinator
    from exactly.group.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue, build_batch
    from exactly.replication.partition import Partition
    from exactly.storage.config import CleanupPolicy, LogConfig
    from exactly.storage.log_manager import LogManager
    from exactly.storage.producer_state import AppendOrigin

    clock = SystemClock()
    manager = LogManager(
        directory, LogConfig(cleanup_policy=CleanupPolicy.COMPACT, segment_bytes=100 << 20), clock
    )
    manager.startup()
    plog = manager.get_or_create_log("__consumer_offsets", 0)
    leader = Partition(plog)  # the high watermark follows each append, as on the broker
    now = clock.milliseconds()
    per_batch = 100
    for start in range(0, records, per_batch):
        batch = []
        for i in range(start, min(start + per_batch, records)):
            k = i % distinct_keys
            key = OffsetCommitKey(f"group-{k // 100}", f"topic-{k % 7}", k % 100)
            batch.append(CoordinatorRecord(key, OffsetCommitValue(i, 0, "", now)))
        leader.append_records_to_leader(build_batch(batch, now), origin=AppendOrigin.COORDINATOR)
    plog.flush()
    size_mb = plog.size_in_bytes / 1e6
    coordinator = GroupCoordinator(GroupConfig(), clock)
    began = time.perf_counter()
    loaded = load_partition(coordinator, plog)
    elapsed = time.perf_counter() - began
    assert loaded == records
    offsets = sum(len(coordinator.offsets.group_offsets(g)) for g in coordinator.groups)
    assert offsets == min(records, distinct_keys)
    manager.close()
    return elapsed, offsets, size_mb


# --- main ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadRun:
    label: str
    records: int
    seconds: float
    offsets: int  # offsets kept after the replay
    size_mb: float  # of the log replayed
    rss_grown_mb: float


@dataclass(frozen=True, slots=True)
class GroupsResult:
    """The raw samples of one run (seconds)."""

    heartbeat_ms: int
    protocol_rebalances: tuple[tuple[int, tuple[float, ...]], ...]  # (members, latencies)
    client_rebalances: tuple[tuple[int, tuple[float, ...]], ...]
    committers: int
    commit_requests_s: float
    commit_latencies: tuple[float, ...]  # every 10th request of each committer
    commit_broker_cpu_ms: float  # the broker's CPU time (utime + stime) per OffsetCommit request
    paced_rate: float  # commits/s of each committer in the paced run
    paced_latencies: tuple[float, ...]  # every commit of the paced run, from when it was due
    loads: tuple[LoadRun, ...]


def _summary(values: list[float] | tuple[float, ...]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"median {statistics.median(ms):.0f} ms, min {ms[0]:.0f}, max {ms[-1]:.0f} ({len(ms)} rebalances)"


def measure(
    members: list[int],
    rounds: int,
    heartbeat_ms: int,
    committers: int,
    commit_seconds: float,
    load_records: int,
    skip_clients: bool,
) -> GroupsResult:
    """Run the three measurements (prints nothing)."""
    protocol: list[tuple[int, tuple[float, ...]]] = []
    clients: list[tuple[int, tuple[float, ...]]] = []
    loads: list[LoadRun] = []
    with tempfile.TemporaryDirectory(prefix="exactly-bench-groups-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", "group.initial.rebalance.delay.ms=0").start(timeout=30)
        try:
            _create_topic(broker.bootstrap)
            for n in members:
                latencies = asyncio.run(_protocol_rebalances(broker.port, n, rounds, heartbeat_ms))
                protocol.append((n, tuple(latencies)))
            if not skip_clients:
                for n in members:
                    clients.append((n, tuple(_client_rebalances(broker.bootstrap, n, rounds, heartbeat_ms))))
            cpu = cpu_seconds(broker.pid)
            rate, commit_latencies, commits = _commit_throughput(broker.port, committers, commit_seconds)
            commit_cpu_ms = (cpu_seconds(broker.pid) - cpu) / max(1, commits) * 1e3
            _, paced, _ = _commit_throughput(broker.port, committers, commit_seconds, PACED_RATE)
        finally:
            broker.stop()
        for label, distinct in (
            ("distinct keys", load_records),
            ("each key 100x", max(1, load_records // 100)),
        ):
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            directory = Path(tmp) / f"load-{distinct}"
            elapsed, offsets, size_mb = _load_time(directory, load_records, distinct)
            grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
            loads.append(LoadRun(label, load_records, elapsed, offsets, size_mb, grown))
    return GroupsResult(
        heartbeat_ms=heartbeat_ms,
        protocol_rebalances=tuple(protocol),
        client_rebalances=tuple(clients),
        committers=committers,
        commit_requests_s=rate,
        commit_latencies=tuple(commit_latencies),
        commit_broker_cpu_ms=commit_cpu_ms,
        paced_rate=PACED_RATE,
        paced_latencies=tuple(paced),
        loads=tuple(loads),
    )


def main(argv: list[str] | None = None) -> GroupsResult:
    parser = argparse.ArgumentParser(
        prog="python -m exactly.bench.groups", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--members", type=int, nargs="+", default=[3, 30])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, default=100)
    parser.add_argument("--committers", type=int, default=10)
    parser.add_argument("--commit-seconds", type=float, default=10.0)
    parser.add_argument("--load-records", type=int, default=1_000_000)
    parser.add_argument("--skip-clients", action="store_true", help="no confluent-kafka rebalance runs")
    args = parser.parse_args(argv)

    print(f"exactly group coordinator benchmark (python {sys.version.split()[0]}, {os.cpu_count()} cpus)")
    result = measure(
        args.members,
        args.rounds,
        args.heartbeat_ms,
        args.committers,
        args.commit_seconds,
        args.load_records,
        args.skip_clients,
    )
    print(f"\n1. rebalance latency: a member joins a stable group (heartbeats: {args.heartbeat_ms} ms)")
    for n, latencies in result.protocol_rebalances:
        print(f"   protocol members, {n:>2} + 1: {_summary(latencies)}")
    for n, latencies in result.client_rebalances:
        print(f"   confluent-kafka,  {n:>2} + 1: {_summary(latencies)}")
    print(f"\n2. OffsetCommit: {args.committers} committers, one request in flight each, fsync, ack")
    ms = sorted(v * 1000 for v in result.commit_latencies)
    print(
        f"   {result.commit_requests_s:,.0f} requests/s; latency p50 {statistics.median(ms):.2f} ms, "
        f"p99 {ms[int(len(ms) * 0.99)]:.2f} ms; broker CPU {result.commit_broker_cpu_ms:.3f} ms per request"
    )
    paced = sorted(v * 1000 for v in result.paced_latencies)
    offered = result.paced_rate * args.committers
    print(
        f"   paced to {offered:,.0f} commits/s ({args.committers} x {result.paced_rate:.0f}/s): latency "
        f"p50 {statistics.median(paced):.2f} ms, p99 {paced[int(len(paced) * 0.99)]:.2f} ms (from when due)"
    )
    print(f"\n3. coordinator load time ({args.load_records:,} OffsetCommit records, 100 per batch)")
    for load in result.loads:
        print(
            f"   {load.label}: {load.seconds:.2f} s ({load.records / load.seconds:,.0f} records/s, "
            f"{load.size_mb:.0f} MB of log, {load.offsets:,} offsets kept, "
            f"peak RSS +{load.rss_grown_mb:.0f} MB)"
        )
    return result


if __name__ == "__main__":
    main()
