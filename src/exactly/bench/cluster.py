"""Cluster benchmark: what replication costs and how fast leadership moves, on a real 3-broker cluster.

    python -m exactly.bench.cluster [--quick] [--out DIR] [--records N] [--rounds R] [--kills K]
                                    [--shutdowns S]
    exactly bench cluster [--quick] ...

In ONE run on this machine: a ZooKeeper (`exactly.testing.zookeeper.ZooKeeperProcess`) and three brokers
(`exactly.testing.cluster.ClusterProcesses`, ids 1..3, zookeeper.session.timeout.ms=6000), every client a
confluent-kafka process of its own.

1. Produce throughput to a topic of replication factor 3 (min.insync.replicas=2) against one of
   replication factor 1 (min.insync.replicas=1), same cluster: `exactly.bench.broker.produce` (1 KiB
   records, 6 partitions, acks=all, idempotent, linger.ms=5), R rounds of each, interleaved and
   alternating which goes first; figures are medians and the ratio of the medians. Both topics are
   created with an explicit assignment that makes broker 1 the leader of every partition (RF 3: replicas
   [1, 2, 3]; RF 1: [1]), so the CPU time sampled from /proc/<pid>/stat (utime + stime) of each broker
   before and after each run splits cleanly into the leader's (broker 1) and the followers' (2 and 3).
2. Failover after `kill -9` of a partition's leader: one partition (RF 3, min.insync.replicas=2), a
   producer process writing continuously (one 64-byte record every 2 ms, acks=all, idempotent,
   linger.ms=0, message.timeout.ms=120000, librdkafka's default backoffs). Measured, per kill:
   t0 = time.time() just before the signal; the figure is the delivery-report time (time.time() in the
   producer's callback, same kernel clock) of the first record that was *produced after t0* and that was
   *acknowledged by the new leader* (its offset lies in a leader epoch newer than the one before t0: the
   epochs come from consuming the partition afterwards, Message.leader_epoch()), minus t0. A ZooKeeper
   watch in the benchmark process splits it: t0 -> the killed broker's /brokers/ids/<id> is deleted
   (session expiry), -> the partition's state znode names the new leader (controller election), ->
   first acknowledged record (the new leader applying the state + the producer finding it: metadata
   refresh, reconnect, retries). Between kills the killed broker is restarted and the partition's ISR
   (in its state znode) waits to be full again. K kills; p50 and max; target <= 8 s.
3. The same after a controlled shutdown (SIGTERM of the leader: it asks the controller to move its
   leaderships away before it exits). S rounds; target <= 1 s.
4. Replica lag while producing at full speed to RF 3 (during phase 1's RF-3 runs): every 20 ms, for each
   partition and follower, the size of the follower's segment files (stat of `*.log` in its partition
   directory) and then the leader's; lag = leader bytes - follower bytes (replicas are byte-identical, so
   this is the byte distance of the follower's log end behind the leader's log end at that moment,
   slightly high by what the leader appends between the two stats). Converted to records with the RF-3
   topic's mean bytes per record on the leader at the end (record batch overhead included). p50/p99/max.

Where kill -9 failover time goes (first full run, 10 kills, 2 shared cores under load): the session
expiry is most of it (registration deleted 5.9-6.4 s after the kill: the 6 s session, from the broker's
last heartbeat, rounded up to ZooKeeper's 500 ms tick), the controller then writes the new leader within
0.03-0.19 s (the most when the killed broker was the controller), and the rest, 0.5-1.8 s, is the
producer finding the new leader: until the election the metadata still names the dead broker, so
librdkafka only learns of the change at its next metadata refresh (its backoffs after the failed
reconnects). A controlled shutdown moves the leadership in about 0.08 s; the ~0.5 s after it is the same
client-side rediscovery (NOT_LEADER_OR_FOLLOWER, retry.backoff.ms, metadata refresh).

Prints a table (rich), writes `raw/cluster.csv` (format: exactly.bench.figures) and `cluster.md` (the
section of the report) under --out; `exactly bench report` runs the same and puts the section in REPORT.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import multiprocessing as mp
import signal
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from queue import Empty
from typing import Any

from exactly.bench.broker import PARTITIONS, RECORD_SIZE, cpu_seconds, produce
from exactly.bench.figures import Figure, Sheet, nan_max, nan_median, percentile, section_markdown
from exactly.cluster import znodes
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.processes import BrokerProcess
from exactly.testing.zookeeper import ZooKeeperProcess

__all__ = [
    "FULL",
    "QUICK",
    "ClusterBenchResult",
    "Failover",
    "FailoverKind",
    "Options",
    "ThroughputRun",
    "figures",
    "fill_sheet",
    "main",
    "markdown",
    "measure",
    "notes",
    "parse_options",
    "print_table",
]

BROKERS = (1, 2, 3)
LEADER = 1  # every throughput partition is led by broker 1
FOLLOWERS = (2, 3)
SESSION_TIMEOUT_MS = 6000
RF3_TOPIC = "bench-cluster-rf3"
RF1_TOPIC = "bench-cluster-rf1"
FAILOVER_TOPIC = "bench-cluster-failover"
FAILOVER_RECORD = 64
FAILOVER_GAP_S = 0.002
KILL_TARGET_S = 8.0
CONTROLLED_TARGET_S = 1.0
LAG_INTERVAL_S = 0.02
WAIT_S = 120.0
STOP_TIMEOUT_S = 30.0
MB = 1e6


@dataclass(frozen=True, slots=True)
class Options:
    records: int  # per throughput run
    producers: int  # producer processes per throughput run
    rounds: int  # throughput rounds of each replication factor
    kills: int  # kill -9 failovers
    shutdowns: int  # controlled-shutdown failovers
    quick: bool = False
    client: tuple[tuple[str, str], ...] = ()  # more settings of the failover producer (librdkafka)

    @property
    def argv(self) -> list[str]:
        """The command-line options that reproduce these."""
        out = [
            "--records",
            str(self.records),
            "--producers",
            str(self.producers),
            "--rounds",
            str(self.rounds),
        ]
        out += ["--kills", str(self.kills), "--shutdowns", str(self.shutdowns)]
        out += [item for k, v in self.client for item in ("--client-set", f"{k}={v}")]
        return ["--quick", *out] if self.quick else out


FULL = Options(records=100_000, producers=1, rounds=3, kills=10, shutdowns=5)
QUICK = Options(records=20_000, producers=1, rounds=1, kills=2, shutdowns=2, quick=True)


@dataclass(frozen=True, slots=True)
class ThroughputRun:
    replication_factor: int
    round: int
    records: int
    seconds: float
    cpu_s: tuple[float, ...]  # CPU seconds of brokers 1, 2, 3 during the run
    zookeeper_cpu_s: float

    @property
    def mb(self) -> float:
        return self.records * RECORD_SIZE / MB

    @property
    def mb_s(self) -> float:
        return self.mb / self.seconds

    @property
    def records_s(self) -> float:
        return self.records / self.seconds


class FailoverKind(Enum):
    KILL = "kill"  # SIGKILL of the leader
    CONTROLLED = "controlled"  # SIGTERM: controlled shutdown


@dataclass(frozen=True, slots=True)
class Failover:
    """One failover; times in seconds after the signal (NaN when not observed)."""

    kind: FailoverKind
    round: int
    old_leader: int
    new_leader: int
    old_epoch: int
    new_epoch: int
    session_gone_s: float  # the old leader's /brokers/ids/<id> deleted
    elected_s: float  # the state znode names a new leader
    acked_s: float  # first record produced after the signal, acknowledged in a newer leader epoch
    shutdown_hung: bool = False  # SIGTERM: the broker had not exited after STOP_TIMEOUT_S (then killed)


@dataclass(frozen=True, slots=True)
class ClusterBenchResult:
    options: Options
    throughput: tuple[ThroughputRun, ...]
    failovers: tuple[Failover, ...]
    lag_bytes: tuple[int, ...]  # every (sample, partition, follower)
    bytes_per_record: float  # RF-3 topic, on the leader
    failover_records: int  # produced by the failover producer
    failover_errors: int  # delivery reports with an error
    seconds: float

    def runs(self, rf: int) -> list[ThroughputRun]:
        return [r for r in self.throughput if r.replication_factor == rf]

    def failover_times(self, kind: FailoverKind) -> list[float]:
        return [f.acked_s for f in self.failovers if f.kind is kind]

    @property
    def lag_records(self) -> list[float]:
        return [b / self.bytes_per_record for b in self.lag_bytes]


# --- the cluster ------------------------------------------------------------------------------------------


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.cimpl import NewTopic

    admin = _admin(bootstrap)
    layout = (  # (topic, replicas of each partition, min.insync.replicas)
        (RF3_TOPIC, [list(BROKERS)] * PARTITIONS, 2),
        (RF1_TOPIC, [[LEADER]] * PARTITIONS, 1),
        (FAILOVER_TOPIC, [list(BROKERS)], 2),
    )
    topics = [
        NewTopic(name, len(replicas), replica_assignment=replicas, config={"min.insync.replicas": str(isr)})
        for name, replicas, isr in layout
    ]
    for future in admin.create_topics(topics).values():
        future.result(60)


def _log_bytes(broker: BrokerProcess, topic: str, partition: int) -> int:
    total = 0
    for path in (broker.data_dir / f"{topic}-{partition}").glob("*.log"):
        with contextlib.suppress(FileNotFoundError):  # a segment deleted between listing and stat
            total += path.stat().st_size
    return total


def until(condition: Any, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


# --- 1 and 4: throughput, CPU, replica lag ----------------------------------------------------------------


class _LagSampler:
    """A thread sampling the followers' byte lag behind the leader on every RF-3 partition."""

    def __init__(self, cluster: ClusterProcesses) -> None:
        self._cluster = cluster
        self._stop = threading.Event()
        self.samples: list[int] = []
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def __enter__(self) -> _LagSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        brokers = self._cluster.brokers
        while not self._stop.wait(LAG_INTERVAL_S):
            for p in range(PARTITIONS):
                followers = [_log_bytes(brokers[f], RF3_TOPIC, p) for f in FOLLOWERS]
                leader = _log_bytes(brokers[LEADER], RF3_TOPIC, p)  # after the followers': never behind them
                self.samples.extend(max(0, leader - f) for f in followers)


def _throughput_run(
    cluster: ClusterProcesses, zookeeper: ZooKeeperProcess, options: Options, rf: int, index: int
) -> ThroughputRun:
    pids = [cluster.brokers[b].pid for b in BROKERS]
    before = [cpu_seconds(pid) for pid in pids]
    zk_before = cpu_seconds(zookeeper.pid)
    run = produce(cluster.bootstrap, options.records, options.producers, RF3_TOPIC if rf == 3 else RF1_TOPIC)
    cpu = tuple(cpu_seconds(pid) - b for pid, b in zip(pids, before, strict=True))
    expected = options.records // options.producers * options.producers
    if run.records != expected:
        raise RuntimeError(f"RF {rf}: {run.records} of {expected} records delivered")
    return ThroughputRun(rf, index, run.records, run.seconds, cpu, cpu_seconds(zookeeper.pid) - zk_before)


# --- 2 and 3: failover --------------------------------------------------------------------------------------


def _failover_producer(
    bootstrap: str,
    client: tuple[tuple[str, str], ...],
    ready: Any,
    stop: Any,
    signalled: Any,
    acked_since: Any,
    queue: Any,
) -> None:
    try:
        queue.put(_failover_produce(bootstrap, client, ready, stop, signalled, acked_since))
    except Exception as e:
        queue.put(f"{type(e).__name__}: {e}")
        ready.set()
        raise


def _failover_produce(
    bootstrap: str,
    client: tuple[tuple[str, str], ...],
    ready: Any,
    stop: Any,
    signalled: Any,
    acked_since: Any,
) -> tuple[list[float], list[tuple[int, float, int]], list[str]]:
    """(produce time of each record, (index, delivery time, offset) of each acknowledged record, errors).
    `signalled` (a shared double) is the time of the parent's last signal; `acked_since` is set to the
    delivery time of each record produced after it, so the parent knows when a round has its answer."""
    from confluent_kafka import Producer

    produced: list[float] = []
    acked: list[tuple[int, float, int]] = []
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        now = time.time()
        if err is not None:
            errors.append(str(err))
            return
        (index,) = struct.unpack_from(">q", msg.value())
        acked.append((index, now, msg.offset()))
        if index >= 0 and produced[index] > signalled.value:
            acked_since.value = now

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": 120_000,
            "on_delivery": delivered,
            **dict(client),
        }
    )
    padding = b"\0" * (FAILOVER_RECORD - 8)
    warm = 0
    while not acked:  # producer id, metadata and connections before the parent starts signalling
        producer.produce(FAILOVER_TOPIC, struct.pack(">q", -1 - warm) + padding, partition=0)
        warm += 1
        producer.flush(10)
    acked.clear()
    ready.set()
    next_due = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if now < next_due:
            producer.poll(next_due - now)
            continue
        next_due += FAILOVER_GAP_S
        if now - next_due > 1.0:  # do not burst to catch up after a stall
            next_due = now
        produced.append(time.time())
        try:
            producer.produce(FAILOVER_TOPIC, struct.pack(">q", len(produced) - 1) + padding, partition=0)
        except BufferError:
            produced.pop()
        producer.poll(0)
    remaining = producer.flush(150)
    if remaining:
        errors.append(f"{remaining} records undelivered at the end")
    return produced, acked, errors


class _Watches:
    """ZooKeeper watches (in the benchmark process) recording when each broker's registration and the
    failover partition's state change, as (time.time(), value)."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient
        from kazoo.recipe.watchers import DataWatch

        self.zk = KazooClient(hosts=connect)
        self.zk.start(15)
        self.registered: dict[int, list[tuple[float, bool]]] = {b: [] for b in BROKERS}
        self.states: list[tuple[float, znodes.PartitionState]] = []
        self._lock = threading.Lock()
        for broker_id in BROKERS:
            DataWatch(self.zk, znodes.broker_path(broker_id), self._broker_watch(broker_id))
        DataWatch(self.zk, znodes.partition_state_path(FAILOVER_TOPIC, 0), self._on_state)

    def _broker_watch(self, broker_id: int) -> Any:
        def watch(data: bytes | None, _stat: object, _event: object) -> None:
            with self._lock:
                self.registered[broker_id].append((time.time(), data is not None))

        return watch

    def _on_state(self, data: bytes | None, _stat: object, _event: object) -> None:
        if data is not None:
            state = znodes.PartitionState.decode(data)
            with self._lock:
                self.states.append((time.time(), state))

    def state(self) -> znodes.PartitionState:
        data, _ = self.zk.get(znodes.partition_state_path(FAILOVER_TOPIC, 0))
        return znodes.PartitionState.decode(data)

    def every_isr_full(self) -> bool:
        """Whether every partition of the RF-3 topics has all three replicas in its ISR."""
        for topic, partitions in ((FAILOVER_TOPIC, 1), (RF3_TOPIC, PARTITIONS)):
            for p in range(partitions):
                data, _ = self.zk.get(znodes.partition_state_path(topic, p))
                if len(znodes.PartitionState.decode(data).isr) < len(BROKERS):
                    return False
        return True

    def registered_now(self, broker_id: int) -> bool:
        return self.zk.exists(znodes.broker_path(broker_id)) is not None

    def gone_after(self, broker_id: int, t0: float) -> float:
        with self._lock:
            times = [t for t, present in self.registered[broker_id] if t >= t0 and not present]
        return times[0] - t0 if times else math.nan

    def elected_after(self, old_leader: int, t0: float) -> tuple[float, znodes.PartitionState | None]:
        with self._lock:
            for t, state in self.states:
                if t >= t0 and state.leader not in (old_leader, -1):
                    return t - t0, state
        return math.nan, None

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


@dataclass(slots=True)
class _Event:
    kind: FailoverKind
    round: int
    t0: float
    old: znodes.PartitionState
    hung: bool
    session_gone_s: float = math.nan
    elected_s: float = math.nan
    new_leader: int = -1
    new_epoch: int = -1
    t_next: float = math.inf


def _failover_round(
    cluster: ClusterProcesses,
    watches: _Watches,
    kind: FailoverKind,
    index: int,
    signalled: Any,
    acked_since: Any,
) -> _Event:
    """Signal the failover partition's leader, wait for a new leader, for the producer to have a record
    produced after the signal acknowledged, then restart the broker and wait for the full ISR."""
    old = watches.state()
    broker = cluster.brokers[old.leader]
    t0 = time.time()
    signalled.value = t0
    if kind is FailoverKind.KILL:
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGKILL)
        broker.proc.wait(30)
        hung = False
    else:
        try:
            broker.stop(STOP_TIMEOUT_S)  # SIGTERM; returns when the broker has exited
            hung = False
        except subprocess.TimeoutExpired:  # stop() has killed it; the failover is measured all the same
            hung = True
    event = _Event(kind, index, t0, old, hung)
    until(lambda: not math.isnan(watches.elected_after(old.leader, t0)[0]), WAIT_S, "a new leader")
    until(lambda: not watches.registered_now(old.leader), WAIT_S, f"broker {old.leader}'s session to end")
    until(lambda: acked_since.value > t0, WAIT_S, "the producer's first acknowledged record after the signal")
    event.elected_s, state = watches.elected_after(old.leader, t0)
    event.session_gone_s = watches.gone_after(old.leader, t0)
    assert state is not None
    event.new_leader, event.new_epoch = state.leader, state.leader_epoch
    broker.start(60)
    until(watches.every_isr_full, WAIT_S, "every replicated partition's ISR to be full again", 0.1)
    return event


def _epochs(bootstrap: str, end: int) -> list[int]:
    """The leader epoch of each offset 0..end-1 of the failover partition (consumed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-cluster-epochs",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
        }
    )
    epochs = [-1] * end
    seen = 0
    try:
        consumer.assign([TopicPartition(FAILOVER_TOPIC, 0, 0)])
        deadline = time.monotonic() + WAIT_S
        while seen < end and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=1):
                offset = message.offset()
                if message.error() is None and offset is not None and offset < end:
                    epochs[offset] = message.leader_epoch() or 0
                    seen += 1
    finally:
        consumer.close()
    if seen < end:
        raise RuntimeError(f"read back {seen} of {end} records of the failover partition")
    return epochs


def _acked_after(
    event: _Event, produced: list[float], acked: list[tuple[int, float, int]], epochs: list[int]
) -> float:
    """Seconds from the signal to the first delivery report of a record produced after it and written in a
    newer leader epoch than the one before it (before the next signal)."""
    first = math.inf
    for index, when, offset in acked:
        if index < 0 or produced[index] <= event.t0 or when >= event.t_next:
            continue
        if offset < len(epochs) and epochs[offset] > event.old.leader_epoch:
            first = min(first, when)
    return first - event.t0 if first < math.inf else math.nan


def _failovers(
    cluster: ClusterProcesses, zookeeper: ZooKeeperProcess, options: Options
) -> tuple[list[Failover], int, int]:
    watches = _Watches(zookeeper.connect_string)
    ctx = mp.get_context("spawn")
    ready, stop, queue = ctx.Event(), ctx.Event(), ctx.Queue()
    signalled, acked_since = ctx.Value("d", math.inf), ctx.Value("d", 0.0)
    args = (cluster.bootstrap, options.client, ready, stop, signalled, acked_since, queue)
    proc = ctx.Process(target=_failover_producer, args=args)
    proc.start()
    events: list[_Event] = []
    try:
        if not ready.wait(WAIT_S):
            raise RuntimeError("the failover producer did not start")
        plan = [(FailoverKind.KILL, i) for i in range(options.kills)]
        plan += [(FailoverKind.CONTROLLED, i) for i in range(options.shutdowns)]
        for kind, index in plan:
            print(f"   failover: {kind.value} round {index + 1}", flush=True)
            events.append(_failover_round(cluster, watches, kind, index, signalled, acked_since))
    finally:
        stop.set()
        try:
            result = queue.get(timeout=180)
        except Empty:
            result = "the failover producer sent no result"
        proc.join(30)
        watches.close()
    if isinstance(result, str):
        raise RuntimeError(f"failover producer: {result}")
    produced, acked, errors = result
    for event, following in itertools.pairwise(events):
        event.t_next = following.t0
    end = max((offset for _, _, offset in acked), default=-1) + 1
    epochs = _epochs(cluster.bootstrap, end)
    out = [
        Failover(
            e.kind,
            e.round,
            e.old.leader,
            e.new_leader,
            e.old.leader_epoch,
            e.new_epoch,
            e.session_gone_s,
            e.elected_s,
            _acked_after(e, produced, acked, epochs),
            e.hung,
        )
        for e in events
    ]
    return out, len(produced), len(errors)


# --- the run ----------------------------------------------------------------------------------------------


def measure(options: Options, work: Path) -> ClusterBenchResult:
    """Start ZooKeeper and three brokers under `work`, run every phase, stop them."""
    started = time.monotonic()
    with ZooKeeperProcess(work / "zookeeper") as zookeeper:
        cluster = ClusterProcesses(
            work / "cluster", zookeeper.connect_string, 3, session_timeout_ms=SESSION_TIMEOUT_MS
        )
        try:
            cluster.start(WAIT_S)
            _create_topics(cluster.bootstrap)
            runs: list[ThroughputRun] = []
            for rf in (1, 3):  # unmeasured: the first runs on a fresh cluster are not like the others
                _throughput_run(cluster, zookeeper, replace(options, records=options.records // 4), rf, -1)
            with _LagSampler(cluster) as lag:
                for r in range(options.rounds):
                    for rf in (1, 3) if r % 2 == 0 else (3, 1):
                        sampling = rf == 3
                        mark = len(lag.samples)
                        run = _throughput_run(cluster, zookeeper, options, rf, r)
                        if not sampling:  # lag only counts while producing to RF 3
                            del lag.samples[mark:]
                        runs.append(run)
                        print(f"   RF {rf} round {r + 1}: {run.mb_s:.1f} MB/s", flush=True)
            lag_bytes = tuple(lag.samples)
            rf3_records = sum(r.records for r in runs if r.replication_factor == 3)
            leader_bytes = sum(_log_bytes(cluster.brokers[LEADER], RF3_TOPIC, p) for p in range(PARTITIONS))
            bytes_per_record = leader_bytes / rf3_records if rf3_records else float(RECORD_SIZE)
            failovers, produced, errors = _failovers(cluster, zookeeper, options)
        except BaseException:
            for broker in cluster.brokers.values():
                print(f"--- broker log {broker.log_path}:\n{broker.log()[-3000:]}")
            raise
        finally:
            cluster.stop()
    return ClusterBenchResult(
        options,
        tuple(runs),
        tuple(failovers),
        lag_bytes,
        bytes_per_record,
        produced,
        errors,
        time.monotonic() - started,
    )


# --- figures, table, markdown -----------------------------------------------------------------------------


def fill_sheet(result: ClusterBenchResult, sheet: Sheet) -> None:
    """The raw samples (series named in the figures)."""
    for rf in (1, 3):
        runs = result.runs(rf)
        sheet.add(f"rf{rf}_mb_s", (r.mb_s for r in runs), "MB/s")
        sheet.add(f"rf{rf}_records_s", (r.records_s for r in runs), "records/s")
        for b, broker_id in enumerate(BROKERS):
            sheet.add(f"rf{rf}_broker{broker_id}_cpu_s", (r.cpu_s[b] for r in runs), "s")
            sheet.add(f"rf{rf}_broker{broker_id}_cpu_s_per_mb", (r.cpu_s[b] / r.mb for r in runs), "s/MB")
        sheet.add(f"rf{rf}_zookeeper_cpu_s", (r.zookeeper_cpu_s for r in runs), "s")
    for kind in FailoverKind:
        chosen = [f for f in result.failovers if f.kind is kind]
        sheet.add(f"{kind.value}_acked_s", (f.acked_s for f in chosen), "s")
        sheet.add(f"{kind.value}_elected_s", (f.elected_s for f in chosen), "s")
        sheet.add(f"{kind.value}_session_gone_s", (f.session_gone_s for f in chosen), "s")
        sheet.add(f"{kind.value}_elected_to_acked_s", (f.acked_s - f.elected_s for f in chosen), "s")
    sheet.add("lag_bytes", result.lag_bytes, "bytes")
    sheet.add("lag_records", result.lag_records, "records")
    sheet.add("bytes_per_record", [result.bytes_per_record], "bytes")


def _f(key: str, label: str, value: float, unit: str, how: str, sheet: Sheet, versus: str = "") -> Figure:
    return Figure(f"cluster.{key}", label, value, unit, how, sheet.file, versus)


def figures(result: ClusterBenchResult, sheet: Sheet) -> list[Figure]:
    """The report's figures, computed from `sheet` (filled by `fill_sheet`)."""
    out: list[Figure] = []
    med = {rf: nan_median(sheet.values(f"rf{rf}_mb_s")) for rf in (1, 3)}
    for rf in (1, 3):
        out.append(
            _f(f"rf{rf}_mb_s", f"produce to RF {rf}", med[rf], "MB/s", f"median of `rf{rf}_mb_s`", sheet)
        )
        out.append(
            _f(
                f"rf{rf}_records_s",
                f"produce to RF {rf}",
                nan_median(sheet.values(f"rf{rf}_records_s")),
                "records/s",
                f"median of `rf{rf}_records_s`",
                sheet,
            )
        )
    out.append(
        _f(
            "rf3_over_rf1",
            "RF 3 / RF 1 produce throughput",
            med[3] / med[1] if med[1] else math.nan,
            "ratio",
            "median of `rf3_mb_s` / median of `rf1_mb_s`",
            sheet,
        )
    )
    for rf in (1, 3):
        for broker_id in BROKERS:
            role = "leader" if broker_id == LEADER else ("follower" if rf == 3 else "idle")
            series = f"rf{rf}_broker{broker_id}_cpu_s_per_mb"
            out.append(
                _f(
                    f"rf{rf}_broker{broker_id}_cpu_ms_per_mb",
                    f"RF {rf}: broker {broker_id} ({role}) CPU per MB produced",
                    nan_median(sheet.values(series)) * 1e3,
                    "ms/MB",
                    f"median of `{series}` x 1000",
                    sheet,
                )
            )
    for kind, target in ((FailoverKind.KILL, KILL_TARGET_S), (FailoverKind.CONTROLLED, CONTROLLED_TARGET_S)):
        name = "kill -9" if kind is FailoverKind.KILL else "controlled shutdown"
        values = sheet.values(f"{kind.value}_acked_s")
        for stat, value in (("p50", percentile(values, 0.5)), ("max", nan_max(values))):
            out.append(
                _f(
                    f"{kind.value}_failover_{stat}_s",
                    f"{name} -> first write acked by the new leader, {stat} of {len(values)}",
                    value,
                    "s",
                    f"{'p50' if stat == 'p50' else 'max'} of `{kind.value}_acked_s`",
                    sheet,
                    f"target <= {target:g} s",
                )
            )
        parts = (
            ("session_gone", "signal -> registration deleted"),
            ("elected", "signal -> new leader in ZooKeeper"),
            ("elected_to_acked", "new leader in ZooKeeper -> first acked write"),
        )
        for part, label in parts:
            series = f"{kind.value}_{part}_s"
            out.append(
                _f(
                    f"{kind.value}_{part}_p50_s",
                    f"{name}: {label}, p50",
                    percentile(sheet.values(series), 0.5),
                    "s",
                    f"p50 of `{series}`",
                    sheet,
                )
            )
    lag = sheet.values("lag_records")
    for q, stat in ((0.5, "p50"), (0.99, "p99")):
        out.append(
            _f(
                f"lag_{stat}_records",
                f"follower lag behind the leader under full load, {stat}",
                percentile(lag, q),
                "records",
                f"{stat} of `lag_records`",
                sheet,
            )
        )
    out.append(
        _f(
            "lag_max_records",
            "follower lag behind the leader under full load, max",
            nan_max(lag),
            "records",
            "max of `lag_records`",
            sheet,
        )
    )
    return out


def notes(result: ClusterBenchResult) -> list[str]:
    o = result.options
    return [
        f"One ZooKeeper and three brokers on this machine (session timeout {SESSION_TIMEOUT_MS} ms). "
        f"Throughput: {o.rounds} round(s) of RF 1 and RF 3 interleaved, {o.records:,} records of "
        f"{RECORD_SIZE} B per run, {o.producers} producer process(es), acks=all, idempotent, 6 partitions "
        f"all led by broker {LEADER} (RF 3 replicas [1, 2, 3], min.insync.replicas=2; RF 1 replicas [1]), "
        "so CPU seconds (/proc utime+stime, before/after each run) split into leader (1), followers (2, 3).",
        f"Failover: one RF-3 partition, a producer writing a {FAILOVER_RECORD}-byte record every "
        f"{FAILOVER_GAP_S * 1e3:g} ms (acks=all, idempotent, linger.ms=0, librdkafka's default backoffs); "
        "time from the signal to the delivery report of the first record produced after it and written in a "
        "newer leader epoch (read back with Message.leader_epoch()); the killed broker is restarted and the "
        "ISR is full again before the next round. A ZooKeeper watch gives the breakdown: registration "
        "deleted (session expiry after kill -9), new leader in the partition's state znode (controller).",
        "Replica lag: every 20 ms during the RF-3 runs, per partition and follower, leader segment bytes - "
        "follower segment bytes (stat of `*.log`, followers first), divided by the leader's mean "
        f"{result.bytes_per_record:.1f} bytes per record.",
        f"Failover producer: {result.failover_records:,} records, {result.failover_errors} delivery errors. "
        f"Controlled shutdowns that had not exited {STOP_TIMEOUT_S:g} s after SIGTERM (then killed; their "
        f"failover is measured all the same): {sum(f.shutdown_hung for f in result.failovers)}.",
    ]


def markdown(result: ClusterBenchResult, figs: list[Figure], command: str) -> str:
    """The report's section on its own (`cluster.md`)."""
    return section_markdown("Cluster: replication and failover", command, result.seconds, notes(result), figs)


def print_table(result: ClusterBenchResult) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=130)
    runs = {rf: result.runs(rf) for rf in (1, 3)}
    mb_s = {rf: nan_median([r.mb_s for r in runs[rf]]) for rf in (1, 3)}
    table = Table(title="produce throughput and CPU (medians of rounds)")
    table.add_column("topic")
    for column in ("MB/s", "records/s"):
        table.add_column(column, justify="right")
    for broker_id in BROKERS:
        table.add_column(f"broker {broker_id} CPU s (ms/MB)", justify="right")
    table.add_column("ZooKeeper CPU s", justify="right")
    for rf in (1, 3):
        cells = [f"RF {rf}", f"{mb_s[rf]:.1f}", f"{nan_median([r.records_s for r in runs[rf]]):.0f}"]
        for b in range(len(BROKERS)):
            cpu = nan_median([r.cpu_s[b] for r in runs[rf]])
            per = nan_median([r.cpu_s[b] / r.mb for r in runs[rf]]) * 1e3
            cells.append(f"{cpu:.2f} ({per:.2f})")
        cells.append(f"{nan_median([r.zookeeper_cpu_s for r in runs[rf]]):.2f}")
        table.add_row(*cells)
    console.print(table)
    console.print(
        f"RF 3 / RF 1: {mb_s[3] / mb_s[1]:.3f}; broker {LEADER} leads every partition "
        "(rounds RF1/RF3 MB/s: "
        + ", ".join(f"{a.mb_s:.1f}/{b.mb_s:.1f}" for a, b in zip(runs[1], runs[3], strict=True))
        + ")"
    )
    failovers = Table(title="failover: signal -> first record produced after it, acked by the new leader (s)")
    for column in ("kind", "round", "leader", "new", "epoch", "registration gone", "elected", "acked"):
        failovers.add_column(column, justify="right")
    for f in result.failovers:
        failovers.add_row(
            f.kind.value,
            str(f.round + 1),
            str(f.old_leader),
            str(f.new_leader),
            f"{f.old_epoch}->{f.new_epoch}",
            f"{f.session_gone_s:.3f}",
            f"{f.elected_s:.3f}",
            f"{f.acked_s:.3f}",
        )
    console.print(failovers)
    for kind, target in ((FailoverKind.KILL, KILL_TARGET_S), (FailoverKind.CONTROLLED, CONTROLLED_TARGET_S)):
        values = result.failover_times(kind)
        console.print(
            f"{kind.value}: p50 {percentile(values, 0.5):.3f} s, max {nan_max(values):.3f} s "
            f"over {len(values)} (target <= {target:g} s)"
        )
    lag = result.lag_records
    console.print(
        f"replica lag under full RF-3 load ({len(lag)} samples): p50 {percentile(lag, 0.5):.1f}, "
        f"p99 {percentile(lag, 0.99):.1f}, max {nan_max(lag):.1f} records "
        f"({result.bytes_per_record:.1f} bytes per record)"
    )


def parse_options(argv: list[str] | None) -> tuple[Options, Path]:
    parser = argparse.ArgumentParser(prog="exactly bench cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 kills, 2 shutdowns (for tests)")
    parser.add_argument(
        "--out", type=Path, default=Path("bench"), help="raw/cluster.csv and cluster.md go here"
    )
    parser.add_argument("--records", type=int, default=None, help="records per throughput run (1 KiB each)")
    parser.add_argument("--producers", type=int, default=None, help="producer processes per throughput run")
    parser.add_argument("--rounds", type=int, default=None, help="throughput rounds of each RF")
    parser.add_argument("--kills", type=int, default=None, help="kill -9 failovers")
    parser.add_argument("--shutdowns", type=int, default=None, help="controlled-shutdown failovers")
    parser.add_argument(
        "--client-set",
        action="append",
        default=[],
        help="a librdkafka setting key=value of the failover producer",
    )
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    client = tuple(tuple(item.split("=", 1)) for item in args.client_set)
    options = Options(
        records=args.records or base.records,
        producers=args.producers or base.producers,
        rounds=args.rounds or base.rounds,
        kills=base.kills if args.kills is None else args.kills,
        shutdowns=base.shutdowns if args.shutdowns is None else args.shutdowns,
        quick=args.quick,
        client=tuple((k, v) for k, v in client),
    )
    return options, args.out


def main(argv: list[str] | None = None) -> ClusterBenchResult:
    options, out = parse_options(argv)
    print(f"exactly bench cluster {' '.join(options.argv)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-cluster-") as tmp:
        result = measure(options, Path(tmp))
    sheet = Sheet("cluster")
    fill_sheet(result, sheet)
    figs = figures(result, sheet)
    print_table(result)
    out.mkdir(parents=True, exist_ok=True)
    csv = sheet.write(out)
    section = out / "cluster.md"
    section.write_text(markdown(result, figs, f"exactly bench cluster {' '.join(options.argv)}"))
    print(f"wrote {csv} and {section}")
    return result


if __name__ == "__main__":
    main()
