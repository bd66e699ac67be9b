"""Transactions across the cluster (issue 22): what replicating the transaction log costs a one-record
transaction, and how long a transactional id waits when its coordinator dies.

    python -m exactly.bench.txn_cluster [--quick] [--out DIR] [--ids N] [--processes P] [--threads T]
                                        [--warmup-seconds W] [--seconds S] [--rounds R] [--kills K]
                                        [--client-set key=value ...]
    exactly bench txn-cluster [--quick] ...

In ONE run on this machine: a ZooKeeper (`exactly.testing.zookeeper.ZooKeeperProcess`), three brokers
(`exactly.testing.cluster.ClusterProcesses`: ids 1..3, replication factor 3, min.insync.replicas 2, the
`__transaction_state` topic the same, zookeeper.session.timeout.ms=6000) and one single broker
(`exactly.testing.processes.BrokerProcess`, its default settings, as `exactly bench txn` uses), all
running at once; every client is confluent-kafka.

1. One-record transactions with N transactional ids (default 1,000): `begin_transaction; produce one
   100-byte record; commit_transaction` (acks=all, idempotent, linger.ms=0) to a 6-partition topic (RF 3
   on the cluster, RF 1 on the single broker; id i writes to partition i mod 6). P worker processes
   (spawned) own a contiguous share of the ids each, one transactional producer per id (one
   `init_transactions` per id, 1,000 librdkafka instances in all: about 0.5 MB and 4 threads each), and T
   threads per process each cycle through their slice of the process's producers, one transaction at a
   time: P x T transactions in flight. Every id first commits once (unmeasured, so that its
   AddPartitionsToTxn, metadata and connections are done), then W seconds of warm-up, then an S-second
   window (`time.time()`, the same kernel clock in every process): the latency of a transaction is
   begin_transaction -> commit_transaction returned, sampled for every transaction that began and ended
   in the window; commits/s = the transactions that ended in the window / S. R rounds of each target,
   interleaved and alternating which goes first (each round re-initialises every id: new workers).
   Figures: p50, p99 and commits/s of each (over all the rounds' samples; commits/s the median of the
   rounds) and the ratios cluster / single.
2. kill -9 of a transaction coordinator, K times: a fresh transactional id is chosen whose
   `__transaction_state` partition (`exactly.group.partitioning.partition_for(id, 50)`) is led by broker
   1, 2, 3, 1, ... in turn (its coordinator, read from the partition's state znode in ZooKeeper, the
   source of the brokers' metadata; no coordinator admin call: librdkafka 2.16 can abort the whole
   process on one while a broker dies), writing to a partition of the topic that another broker leads
   (so that only the coordinator moves). A thread commits one-record transactions back to back on it;
   after it has committed a few, the coordinator's broker gets SIGKILL at t0 = time.time(). What the
   library does then: commit_transaction raises a retriable error (commit again), an abortable one
   (abort, begin again) or a fatal one (fenced: a new producer, init_transactions); each is counted. Measured:
   t0 -> the first transaction *begun after t0* that commits (its commit_transaction returning), and, from
   a ZooKeeper watch, t0 -> the partition's state naming a new leader (the controller's election, after
   the dead broker's session expires). Then the broker is restarted and the next round waits until the
   cluster is whole: three brokers registered, every `__transaction_state` partition's and the topic's
   ISR full. p50 and max over the K kills.

Prints a table (rich), writes `raw/txn_cluster.csv` (format: exactly.bench.figures) and `txn_cluster.md`
under --out.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from queue import Empty
from typing import Any

from exactly.bench.cluster import until
from exactly.bench.figures import Figure, Sheet, fmt, nan_max, nan_median, percentile, section_markdown
from exactly.cluster import znodes
from exactly.group.partitioning import partition_for
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.processes import BrokerProcess
from exactly.testing.zookeeper import ZooKeeperProcess

__all__ = [
    "FULL",
    "QUICK",
    "Kill",
    "Options",
    "Round",
    "Target",
    "TxnClusterResult",
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
SESSION_TIMEOUT_MS = 6000
TOPIC = "bench-txn-cluster"
PARTITIONS = 6
TXN_TOPIC = "__transaction_state"
TXN_PARTITIONS = 50
RECORD = b"r" * 100
WAIT_S = 120.0
KILL_WARM_COMMITS = 5


class Target(Enum):
    SINGLE = "single"
    CLUSTER = "cluster"


@dataclass(frozen=True, slots=True)
class Options:
    ids: int  # transactional ids of phase 1
    processes: int  # worker processes of phase 1
    threads: int  # threads per worker process (transactions in flight = processes x threads)
    warmup_seconds: float  # after every id has committed once
    seconds: float  # the measuring window
    rounds: int  # rounds of each target
    kills: int  # coordinator kills of phase 2
    quick: bool = False
    client: tuple[tuple[str, str], ...] = ()  # more librdkafka settings of every producer

    @property
    def argv(self) -> list[str]:
        """The command-line options that reproduce these."""
        out = ["--ids", str(self.ids), "--processes", str(self.processes), "--threads", str(self.threads)]
        out += ["--warmup-seconds", f"{self.warmup_seconds:g}", "--seconds", f"{self.seconds:g}"]
        out += ["--rounds", str(self.rounds), "--kills", str(self.kills)]
        out += [item for k, v in self.client for item in ("--client-set", f"{k}={v}")]
        return ["--quick", *out] if self.quick else out


FULL = Options(ids=1000, processes=4, threads=8, warmup_seconds=3.0, seconds=10.0, rounds=1, kills=10)
QUICK = Options(
    ids=20, processes=2, threads=2, warmup_seconds=0.5, seconds=2.0, rounds=1, kills=2, quick=True
)


@dataclass(frozen=True, slots=True)
class Round:
    """One S-second window of one target."""

    target: Target
    index: int
    latencies: tuple[float, ...]  # seconds, begin_transaction -> commit_transaction returned
    commits: int  # ended in the window
    seconds: float
    init_seconds: float  # the slowest worker's init_transactions of its share of the ids
    errors: tuple[tuple[str, int], ...]  # error kind -> count (whole round, warm-up included)

    @property
    def commits_s(self) -> float:
        return self.commits / self.seconds if self.seconds else math.nan


@dataclass(frozen=True, slots=True)
class Kill:
    """One SIGKILL of a transaction coordinator."""

    index: int
    txn_id: str
    victim: int
    new_coordinator: int
    committed_s: float  # t0 -> the first transaction begun after t0 committed
    elected_s: float  # t0 -> the state znode of the id's __transaction_state partition names a new leader
    errors: tuple[tuple[str, int], ...]  # what the library raised in between
    whole_s: float  # restart -> the cluster whole again


@dataclass(frozen=True, slots=True)
class TxnClusterResult:
    options: Options
    rounds: tuple[Round, ...]
    kills: tuple[Kill, ...]
    seconds: float

    def of(self, target: Target) -> list[Round]:
        return [r for r in self.rounds if r.target is target]


# --- error handling shared by both phases ------------------------------------------------------------------


def _producer(bootstrap: str, txn_id: str, client: Sequence[tuple[str, str]]) -> Any:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 0,
            "transaction.timeout.ms": 60_000,
            **dict(client),
        }
    )
    _init(producer)
    return producer


def _init(producer: Any) -> None:
    """init_transactions, again while it times out (a coordinator may be moving)."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            producer.init_transactions(30)
            return
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise


def _transaction(
    producer: Any,
    partition: int,
    errors: Counter[str],
    renew: Callable[[], Any],
) -> tuple[Any, bool]:
    """begin; produce one record; commit. On a retriable error commit again, on an abortable one abort
    (the transaction did not commit), on a fatal one (fenced) a new producer. Returns the producer to use
    next and whether this transaction committed."""
    from confluent_kafka import KafkaException

    try:
        producer.begin_transaction()
        producer.produce(TOPIC, RECORD, partition=partition)
    except KafkaException as e:
        errors[f"begin:{e.args[0].name()}"] += 1
        return renew(), False
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            producer.commit_transaction(30)
            return producer, True
        except KafkaException as e:
            error = e.args[0]
            if error.fatal():
                errors["fatal"] += 1
                return renew(), False
            if error.txn_requires_abort():
                errors["abortable"] += 1
                try:
                    producer.abort_transaction(30)
                    return producer, False
                except KafkaException:
                    errors["abort_failed"] += 1
                    return renew(), False
            if not error.retriable() or time.monotonic() > deadline:
                errors[f"other:{error.name()}"] += 1
                return renew(), False
            errors["retriable"] += 1


# --- phase 1: many ids -------------------------------------------------------------------------------------


def _worker(
    bootstrap: str,
    first: int,
    count: int,
    threads: int,
    client: tuple[tuple[str, str], ...],
    window: Any,
    queue: Any,
) -> None:
    """One worker process: producers for ids first..first+count-1, `threads` threads cycling through them.
    Sends ("warm", None) once every id has committed once, then ("result", ...) after the window."""
    try:
        result = _work(bootstrap, first, count, threads, client, window, queue)
        queue.put(("result", result))
    except BaseException as e:  # noqa: BLE001 (reported by the parent)
        queue.put(("error", repr(e)))
    queue.close()
    queue.join_thread()
    os._exit(0)  # not 1,000 librdkafka destructors


def _work(
    bootstrap: str,
    first: int,
    count: int,
    threads: int,
    client: tuple[tuple[str, str], ...],
    window: Any,
    queue: Any,
) -> tuple[list[float], int, float, dict[str, int]]:
    indexes = list(range(first, first + count))
    slices = [indexes[t::threads] for t in range(threads)]
    latencies: list[list[float]] = [[] for _ in range(threads)]
    commits = [0] * threads
    errors: list[Counter[str]] = [Counter() for _ in range(threads)]
    failures: list[BaseException] = []
    warm = threading.Barrier(threads + 1)

    def _renewer(i: int) -> Callable[[], Any]:
        return lambda: _producer(bootstrap, f"bench-txn-cluster-{i}", client)

    started = time.monotonic()
    init_done = [0.0] * threads

    def run(t: int) -> None:
        try:
            mine = slices[t]
            producers = {i: _producer(bootstrap, f"bench-txn-cluster-{i}", client) for i in mine}
            init_done[t] = time.monotonic() - started
            for i in mine:  # every id commits once, unmeasured
                producers[i], _ = _transaction(producers[i], i % PARTITIONS, errors[t], _renewer(i))
        except BaseException as e:  # noqa: BLE001
            failures.append(e)
            warm.abort()
            return
        warm.wait()
        n = 0
        while mine:
            i = mine[n % len(mine)]
            n += 1
            begin = time.time()
            if begin >= window[1]:
                return
            producers[i], ok = _transaction(producers[i], i % PARTITIONS, errors[t], _renewer(i))
            end = time.time()
            if ok and window[0] <= end <= window[1]:
                commits[t] += 1
                if begin >= window[0]:
                    latencies[t].append(end - begin)

    workers = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    try:
        warm.wait()
    except threading.BrokenBarrierError:
        raise RuntimeError(f"worker ids {first}..{first + count - 1}: {failures!r}") from None
    queue.put(("warm", None))
    for w in workers:
        w.join()
    if failures:
        raise RuntimeError(f"worker ids {first}..{first + count - 1}: {failures!r}")
    total: Counter[str] = Counter()
    for c in errors:
        total.update(c)
    return [x for per in latencies for x in per], sum(commits), max(init_done), dict(total)


def many_ids(bootstrap: str, options: Options, target: Target, index: int) -> Round:
    """Phase 1 against one target: worker processes, warm-up, the window; one Round."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    window = ctx.Array("d", [math.inf, math.inf], lock=False)
    p = max(1, min(options.processes, options.ids))
    shares = [options.ids // p + (1 if k < options.ids % p else 0) for k in range(p)]
    procs = []
    first = 0
    for share in shares:
        threads = max(1, min(options.threads, share))
        args = (bootstrap, first, share, threads, options.client, window, queue)
        procs.append(ctx.Process(target=_worker, args=args, daemon=True))
        first += share
    for proc in procs:
        proc.start()
    try:
        _expect(queue, procs, "warm", len(procs))
        window[0] = time.time() + options.warmup_seconds
        window[1] = window[0] + options.seconds
        results = _expect(queue, procs, "result", len(procs))
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    latencies = [x for r in results for x in r[0]]
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r[3])
    return Round(
        target,
        index,
        tuple(latencies),
        sum(r[1] for r in results),
        options.seconds,
        max(r[2] for r in results),
        tuple(sorted(errors.items())),
    )


def _expect(queue: Any, procs: list[Any], kind: str, count: int) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + WAIT_S + 60
    while len(out) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(out)} of {count} workers sent {kind!r}")
        try:
            got, value = queue.get(timeout=1)
        except Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError(f"a worker died: {[p.exitcode for p in procs]}") from None
            continue
        if got == "error":
            raise RuntimeError(f"a worker failed: {value}")
        if got != kind:
            raise RuntimeError(f"a worker sent {got!r} while {kind!r} was expected")
        out.append(value)
    return out


# --- phase 2: coordinator kills ----------------------------------------------------------------------------


class _ZooKeeper:
    """The partitions' states as the controller wrote them, and a watch on one of them."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=connect)
        self.zk.start(15)
        self._lock = threading.Lock()
        self.changes: list[tuple[float, znodes.PartitionState]] = []
        self.watched: set[int] = set()

    def state(self, topic: str, partition: int) -> znodes.PartitionState:
        data, _ = self.zk.get(znodes.partition_state_path(topic, partition))
        return znodes.PartitionState.decode(data)

    def leaders(self, topic: str, partitions: int) -> list[int]:
        return [self.state(topic, p).leader for p in range(partitions)]

    def watch(self, partition: int) -> None:
        """Record every state of __transaction_state-`partition` from now on, as (time.time(), state)."""
        from kazoo.recipe.watchers import DataWatch

        if partition in self.watched:
            return
        self.watched.add(partition)

        def on_state(data: bytes | None, _stat: object, _event: object) -> None:
            if data is not None:
                state = znodes.PartitionState.decode(data)
                with self._lock:
                    self.changes.append((time.time(), state))

        path = znodes.partition_state_path(TXN_TOPIC, partition)
        DataWatch(self.zk, path, on_state)

    def elected_after(self, old: int, t0: float) -> tuple[float, int]:
        with self._lock:
            for t, state in self.changes:
                if t >= t0 and state.leader not in (old, -1):
                    return t - t0, state.leader
        return math.nan, -1

    def whole(self) -> bool:
        """Three brokers registered and every replica of the internal topic and the topic in sync."""
        if any(self.zk.exists(znodes.broker_path(b)) is None for b in BROKERS):
            return False
        for topic, partitions in ((TXN_TOPIC, TXN_PARTITIONS), (TOPIC, PARTITIONS)):
            for p in range(partitions):
                state = self.state(topic, p)
                if state.leader < 0 or len(state.isr) < len(BROKERS):
                    return False
        return True

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def _pick(zk: _ZooKeeper, victim: int, index: int) -> str:
    """A fresh transactional id whose coordinator is `victim` (any broker if it leads no partition)."""
    leaders = zk.leaders(TXN_TOPIC, TXN_PARTITIONS)
    wanted = victim if victim in leaders else next(b for b in leaders if b >= 0)
    for n in range(100_000):
        txn_id = f"bench-txn-cluster-kill-{index}-{n}"
        if leaders[partition_for(txn_id, TXN_PARTITIONS)] == wanted:
            return txn_id
    raise RuntimeError("no transactional id found for the coordinator")


class _Committer:
    """A thread committing one-record transactions back to back on one id, noting when each that
    committed began and ended (time.time())."""

    def __init__(
        self, bootstrap: str, txn_id: str, partition: int, client: Sequence[tuple[str, str]]
    ) -> None:
        self.bootstrap, self.txn_id, self.partition, self.client = bootstrap, txn_id, partition, client
        self.producer = _producer(bootstrap, txn_id, client)
        self.committed: list[tuple[float, float]] = []
        self.errors: Counter[str] = Counter()
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                begin = time.time()
                renew: Callable[[], Any] = lambda: _producer(self.bootstrap, self.txn_id, self.client)  # noqa: E731
                self.producer, ok = _transaction(self.producer, self.partition, self.errors, renew)
                if ok:
                    with self._lock:
                        self.committed.append((begin, time.time()))
        except BaseException as e:  # noqa: BLE001 (raised in the parent)
            self.failure = e

    def first_begun_after(self, t0: float) -> float:
        with self._lock:
            ends = [end for begin, end in self.committed if begin > t0]
        return ends[0] if ends else math.nan

    def count(self) -> int:
        with self._lock:
            return len(self.committed)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        if self.failure is not None:
            raise RuntimeError(f"the committer of {self.txn_id} failed: {self.failure!r}")
        self.producer.flush(10)


def _kill_round(cluster: ClusterProcesses, zk: _ZooKeeper, options: Options, index: int) -> Kill:
    target = BROKERS[index % len(BROKERS)]
    txn_id = _pick(zk, target, index)
    txn_partition = partition_for(txn_id, TXN_PARTITIONS)
    victim = zk.state(TXN_TOPIC, txn_partition).leader
    leaders = zk.leaders(TOPIC, PARTITIONS)
    partition = next((p for p, b in enumerate(leaders) if b not in (victim, -1)), 0)
    zk.watch(txn_partition)
    committer = _Committer(cluster.bootstrap, txn_id, partition, options.client)
    try:
        until(
            lambda: committer.count() >= KILL_WARM_COMMITS or committer.failure is not None,
            WAIT_S,
            "commits before the kill",
        )
        before = Counter(committer.errors)
        broker = cluster.brokers[victim]
        assert broker.proc is not None
        t0 = time.time()
        broker.proc.send_signal(signal.SIGKILL)
        broker.proc.wait(30)
        until(
            lambda: not math.isnan(committer.first_begun_after(t0)) or committer.failure is not None,
            WAIT_S,
            f"a commit of {txn_id} after its coordinator (broker {victim}) was killed",
        )
        committed = committer.first_begun_after(t0) - t0
        errors = Counter(committer.errors)
        errors.subtract(before)
    finally:
        committer.stop()
    until(lambda: not math.isnan(zk.elected_after(victim, t0)[0]), WAIT_S, "the election in ZooKeeper")
    elected, new = zk.elected_after(victim, t0)
    restarted = time.monotonic()
    broker.start(60)
    until(zk.whole, WAIT_S, "the cluster whole again (3 brokers, every ISR full)", 0.1)
    return Kill(
        index,
        txn_id,
        victim,
        new,
        committed,
        elected,
        tuple(sorted((k, v) for k, v in errors.items() if v > 0)),
        time.monotonic() - restarted,
    )


# --- the run -----------------------------------------------------------------------------------------------


def _create_topic(bootstrap: str, replication: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication)]).values():
        future.result(60)


def measure(options: Options, work: Path) -> TxnClusterResult:
    """Start ZooKeeper, three brokers and a single broker under `work`, run both phases, stop them."""
    started = time.monotonic()
    (work / "single").mkdir(parents=True, exist_ok=True)
    single = BrokerProcess(work / "single" / "data", log_path=work / "single" / "broker.log")
    with ZooKeeperProcess(work / "zookeeper") as zookeeper:
        cluster = ClusterProcesses(
            work / "cluster", zookeeper.connect_string, 3, session_timeout_ms=SESSION_TIMEOUT_MS
        )
        zk: _ZooKeeper | None = None
        try:
            single.start(60)
            cluster.start(WAIT_S)
            _create_topic(single.bootstrap, 1)
            _create_topic(cluster.bootstrap, 3)
            zk = _ZooKeeper(zookeeper.connect_string)
            for bootstrap in (single.bootstrap, cluster.bootstrap):  # creates __transaction_state
                _producer(bootstrap, "bench-txn-cluster-first", options.client).flush(10)
            until(zk.whole, WAIT_S, "the cluster's internal topic in sync", 0.2)
            bootstraps = {Target.SINGLE: single.bootstrap, Target.CLUSTER: cluster.bootstrap}
            rounds: list[Round] = []
            for r in range(options.rounds):
                order = (Target.SINGLE, Target.CLUSTER) if r % 2 == 0 else (Target.CLUSTER, Target.SINGLE)
                for target in order:
                    run = many_ids(bootstraps[target], options, target, r)
                    rounds.append(run)
                    print(
                        f"   {target.value} round {r + 1}: {run.commits_s:.0f} commits/s, "
                        f"p50 {percentile(list(run.latencies), 0.5) * 1e3:.1f} ms "
                        f"(init {run.init_seconds:.1f} s, errors {dict(run.errors)})",
                        flush=True,
                    )
            single.stop(60)
            kills: list[Kill] = []
            for k in range(options.kills):
                kill = _kill_round(cluster, zk, options, k)
                kills.append(kill)
                print(
                    f"   kill {k + 1}: broker {kill.victim} -> {kill.new_coordinator}, elected "
                    f"{kill.elected_s:.2f} s, committed {kill.committed_s:.2f} s ({dict(kill.errors)})",
                    flush=True,
                )
        except BaseException:
            for broker in [single, *cluster.brokers.values()]:
                print(f"--- broker log {broker.log_path}:\n{broker.log()[-3000:]}")
            raise
        finally:
            if zk is not None:
                zk.close()
            if single.running:
                single.stop(60)
            cluster.stop()
    return TxnClusterResult(options, tuple(rounds), tuple(kills), time.monotonic() - started)


# --- figures, table, markdown -----------------------------------------------------------------------------


def fill_sheet(result: TxnClusterResult, sheet: Sheet) -> None:
    """The raw samples (series named in the figures)."""
    for target in Target:
        for run in result.of(target):
            sheet.add(f"{target.value}_transaction_ms", (s * 1e3 for s in run.latencies), "ms", run=run.index)
            sheet.add(f"{target.value}_commits_s", [run.commits_s], "1/s", run=run.index)
    sheet.add("kill_committed_s", (k.committed_s for k in result.kills), "s")
    sheet.add("kill_elected_s", (k.elected_s for k in result.kills), "s")
    sheet.add("kill_whole_again_s", (k.whole_s for k in result.kills), "s")


def _f(key: str, label: str, value: float, unit: str, how: str, sheet: Sheet, versus: str = "") -> Figure:
    return Figure(f"txn_cluster.{key}", label, value, unit, how, sheet.file, versus)


def figures(result: TxnClusterResult, sheet: Sheet) -> list[Figure]:
    """The figures, computed from `sheet` (filled by `fill_sheet`)."""
    o = result.options
    out: list[Figure] = []
    value: dict[str, dict[Target, float]] = {"p50": {}, "p99": {}, "commits": {}}
    for target in Target:
        name = "3 brokers, RF 3, min ISR 2" if target is Target.CLUSTER else "single broker"
        series = f"{target.value}_transaction_ms"
        samples = sheet.values(series)
        for stat, q in (("p50", 0.5), ("p99", 0.99)):
            value[stat][target] = percentile(samples, q)
            out.append(
                _f(
                    f"{target.value}_transaction_{stat}_ms",
                    f"one-record transaction, {o.ids:,} ids, {name}, {stat}",
                    value[stat][target],
                    "ms",
                    f"{stat} of all `{series}`",
                    sheet,
                )
            )
        value["commits"][target] = nan_median(sheet.values(f"{target.value}_commits_s"))
        out.append(
            _f(
                f"{target.value}_commits_s",
                f"commits/s, {o.ids:,} ids, {o.processes} x {o.threads} in flight, {name}",
                value["commits"][target],
                "1/s",
                f"median of `{target.value}_commits_s`",
                sheet,
            )
        )
    for stat, label in (("p50", "latency p50"), ("p99", "latency p99"), ("commits", "commits/s")):
        single, clustered = value[stat][Target.SINGLE], value[stat][Target.CLUSTER]
        key = "commits_s" if stat == "commits" else f"transaction_{stat}"
        out.append(
            _f(
                f"{key}_cluster_over_single",
                f"one-record transaction {label}, cluster / single broker",
                clustered / single if single else math.nan,
                "ratio",
                f"cluster_{key} / single_{key}",
                sheet,
            )
        )
    committed = sheet.values("kill_committed_s")
    for stat, stat_value in (("p50", percentile(committed, 0.5)), ("max", nan_max(committed))):
        out.append(
            _f(
                f"kill_to_commit_{stat}_s",
                f"kill -9 of the coordinator -> next commit of its id, {stat} of {len(committed)}",
                stat_value,
                "s",
                f"{stat} of `kill_committed_s`",
                sheet,
            )
        )
    out.append(
        _f(
            "kill_to_elected_p50_s",
            "kill -9 of the coordinator -> new leader of its partition in ZooKeeper, p50",
            percentile(sheet.values("kill_elected_s"), 0.5),
            "s",
            "p50 of `kill_elected_s`",
            sheet,
        )
    )
    return out


def notes(result: TxnClusterResult) -> list[str]:
    o = result.options
    errors: Counter[str] = Counter()
    for k in result.kills:
        errors.update(dict(k.errors))
    round_errors: Counter[str] = Counter()
    for r in result.rounds:
        round_errors.update(dict(r.errors))
    return [
        f"Three brokers on one ZooKeeper (session timeout {SESSION_TIMEOUT_MS} ms; topic and "
        f"{TXN_TOPIC} RF 3, min.insync.replicas 2) and one single broker (default settings), same run. "
        f"{o.ids:,} transactional ids, one confluent-kafka producer each, in {o.processes} processes of "
        f"{o.threads} threads ({o.processes * o.threads} transactions in flight), each thread cycling "
        f"through its ids: begin, produce one {len(RECORD)}-byte record (acks=all, linger.ms=0), commit. "
        f"Every id commits once unmeasured, then {o.warmup_seconds:g} s warm-up, then a {o.seconds:g}-s "
        f"window; {o.rounds} round(s) of each target, interleaved. Latency = begin_transaction -> "
        "commit_transaction returned.",
        f"Errors during the rounds: {dict(round_errors) or 'none'}.",
        f"Coordinator kills: {o.kills}; each a fresh id whose {TXN_TOPIC} partition broker 1, 2, 3, ... "
        "leads (from its state znode), writing to a partition another broker leads, committing back to back; "
        "SIGKILL of the coordinator; time to the first transaction begun after the signal that commits "
        "(retriable: commit again; abortable: abort, begin again; fatal: a new producer). The broker is "
        f"restarted and every ISR is full before the next kill. Errors the library raised: "
        f"{dict(errors) or 'none'}.",
    ]


def markdown(result: TxnClusterResult, figs: list[Figure], command: str) -> str:
    """The section on its own (`txn_cluster.md`)."""
    return section_markdown("Transactions across the cluster", command, result.seconds, notes(result), figs)


def print_table(result: TxnClusterResult, figs: list[Figure]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=130)
    table = Table(title="one-record transactions")
    for column in ("target", "round", "commits/s", "p50 ms", "p99 ms", "samples", "init s", "errors"):
        table.add_column(column, justify="right")
    for run in result.rounds:
        lat = list(run.latencies)
        table.add_row(
            run.target.value,
            str(run.index + 1),
            f"{run.commits_s:.0f}",
            f"{percentile(lat, 0.5) * 1e3:.1f}",
            f"{percentile(lat, 0.99) * 1e3:.1f}",
            str(len(lat)),
            f"{run.init_seconds:.1f}",
            ", ".join(f"{k} {v}" for k, v in run.errors) or "-",
        )
    console.print(table)
    kills = Table(title="kill -9 of a transaction coordinator -> next commit of its id (s)")
    for column in ("kill", "id", "coordinator", "new", "elected", "committed", "whole again", "errors"):
        kills.add_column(column, justify="right")
    for k in result.kills:
        kills.add_row(
            str(k.index + 1),
            k.txn_id,
            str(k.victim),
            str(k.new_coordinator),
            f"{k.elected_s:.3f}",
            f"{k.committed_s:.3f}",
            f"{k.whole_s:.1f}",
            ", ".join(f"{e} {n}" for e, n in k.errors) or "-",
        )
    console.print(kills)
    summary = Table(title="figures")
    for column in ("figure", "value", "unit"):
        summary.add_column(column)
    for f in figs:
        summary.add_row(f.label, fmt(f.value), f.unit)
    console.print(summary)


def parse_options(argv: list[str] | None) -> tuple[Options, Path]:
    parser = argparse.ArgumentParser(prog="exactly bench txn-cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 ids, 2-s windows, 2 kills (for tests)")
    parser.add_argument("--out", type=Path, default=Path("bench"), help="raw/txn_cluster.csv, txn_cluster.md")
    parser.add_argument("--ids", type=int, default=None, help="transactional ids")
    parser.add_argument("--processes", type=int, default=None, help="worker processes")
    parser.add_argument("--threads", type=int, default=None, help="threads per worker process")
    parser.add_argument("--warmup-seconds", type=float, default=None, help="warm-up before the window")
    parser.add_argument("--seconds", type=float, default=None, help="the measuring window")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of each target (interleaved)")
    parser.add_argument("--kills", type=int, default=None, help="coordinator kills")
    parser.add_argument(
        "--client-set", action="append", default=[], help="a librdkafka setting key=value of every producer"
    )
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    client = tuple((k, v) for k, v in (item.split("=", 1) for item in args.client_set))
    options = Options(
        ids=args.ids or base.ids,
        processes=args.processes or base.processes,
        threads=args.threads or base.threads,
        warmup_seconds=base.warmup_seconds if args.warmup_seconds is None else args.warmup_seconds,
        seconds=args.seconds or base.seconds,
        rounds=args.rounds or base.rounds,
        kills=base.kills if args.kills is None else args.kills,
        quick=args.quick,
        client=client,
    )
    return options, args.out


def main(argv: list[str] | None = None) -> TxnClusterResult:
    options, out = parse_options(argv)
    command = f"exactly bench txn-cluster {' '.join(options.argv)}"
    print(command, flush=True)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-txn-cluster-") as tmp:
        result = measure(options, Path(tmp))
    sheet = Sheet("txn_cluster")
    fill_sheet(result, sheet)
    figs = figures(result, sheet)
    print_table(result, figs)
    out.mkdir(parents=True, exist_ok=True)
    csv = sheet.write(out)
    section = out / "txn_cluster.md"
    section.write_text(markdown(result, figs, command))
    print(f"wrote {csv} and {section}")
    return result


if __name__ == "__main__":
    main()
