"""A verification run: the real broker behind the fault proxy, worker processes, the nemesis, a final
phase, and the checker.

    run dir/
      data/               the broker's data directory
      history/*.jsonl     one file per worker incarnation, and runner.0.jsonl (faults, samples, scans)
      logs/               the broker's and every worker's output
      summary.json        the figures of the table printed at the end

Timeline: create topics; seed `copy-in`; start the workers; sample every partition's log start / LSO /
HWM every 2 s; let the nemesis inject faults for `duration` seconds; then heal everything, stop the
workers, restart the broker cleanly, re-initialise ("hijack") every transactional.id so that no
transaction stays open, wait until LSO == HWM everywhere, record the open transactions, the groups'
committed offsets and full scans at both isolation levels; then check the history.

With `brokers` >= 3 (`exactly.verify.cluster`) the run has a ZooKeeper and that many brokers instead, each
behind its own fault proxy and link proxies; topics have replication factor 3 and min ISR 2; the workers get
every broker's address; the nemesis adds the cluster's faults (the `cluster` family); and the final phase,
instead of restarting the broker, heals every link, restarts ZooKeeper and every broker that is down, and
waits for the cluster to be whole (every broker registered, a controller, every partition led with its full
ISR) before it hijacks, waits for LSO == HWM and scans:

    run dir/data/zookeeper/, data/broker-<id>/, logs/broker-<id>.log
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly.testing.processes import BrokerProcess, child_env, free_port
from exactly.verify.cluster import FaultProxies, VerifyCluster
from exactly.verify.datadir import DataDir
from exactly.verify.history import (
    HistoryWriter,
    OpType,
    Poll,
    Send,
    complete_ops,
    encode_micro_ops,
    history_files,
    read_history,
    value_for,
)
from exactly.verify.nemesis import CLUSTER, DISK, FAMILIES, Nemesis, Schedule
from exactly.verify.proxy import FaultProxy
from exactly.verify.worker import EXIT_STUCK, QUEUE_TOPICS, key_of, split_key

ALL_WORKLOADS = ("queue", "copier", "bank", "zombie", "idem", "spark")
#: what runs unless told otherwise (spark needs a JVM and a core of its own)
DEFAULT_WORKLOADS = ("queue", "copier", "bank", "zombie", "idem")
#: why a worker exited on its own, by exit code (the supervisor restarts it as its next incarnation)
BROKER_SUPERVISOR_GRACE_S = 10.0  # longer than a fault keeps a broker down on purpose
EXIT_CODES = {3: "fenced", EXIT_STUCK: "stuck in the client library", -9: "killed"}


class RunError(Exception):
    """The run could not go on (the broker did not come back, ...): one line."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    out: Path
    duration: float = 60.0
    seed: int = 1
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS
    faults: tuple[str, ...] = ("broker", "client", "proxy")
    txn_timeout_ms: int = 10_000
    partitions: int = 3
    workers: dict[str, int] = field(
        default_factory=lambda: {"queue": 2, "copier": 2, "bank": 2, "zombie": 1, "idem": 1}
    )
    copier_records: int = 5_000
    schedule: Schedule = field(default_factory=Schedule)
    #: where the progress line goes (None: nowhere)
    progress: Callable[[str], None] | None = print
    #: 1: one broker behind the fault proxy; >= 3: a ZooKeeper cluster (`exactly.verify.cluster`)
    brokers: int = 1

    @property
    def fault_kinds(self) -> tuple[str, ...]:
        kinds: list[str] = []
        for name in self.faults:
            kinds += FAMILIES.get(name, (name,))
        if "zombie" not in self.workloads:
            kinds = [k for k in kinds if k != "zombie"]
        # a single broker has no cluster; a cluster's brokers share no size-limited disk
        unfit = CLUSTER if self.brokers == 1 else DISK
        kinds = [k for k in kinds if k not in unfit]
        return tuple(dict.fromkeys(kinds))


def _client_logger(run_dir: Path) -> logging.Logger:
    logger = logging.getLogger(f"exactly.verify.clients.{run_dir}")
    logger.propagate = False
    if not logger.handlers:
        handler = logging.FileHandler(run_dir / "logs" / "runner-clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    return logger


class WorkerProcess:
    """One incarnation of one worker."""

    def __init__(self, run: Run, name: str, workload: str, number: int, inc: int) -> None:
        self.name = name
        self.workload = workload
        self.number = number
        self.inc = inc
        c = run.config
        args = [sys.executable, "-m", "exactly.verify.worker", workload, "--run-dir", str(run.run_dir)]
        args += [
            "--proc",
            name,
            "--inc",
            str(inc),
            "--number",
            str(number),
            "--bootstrap",
            run.proxy.bootstrap,
        ]
        args += [
            "--seed",
            str(c.seed),
            "--txn-timeout-ms",
            str(c.txn_timeout_ms),
            "--partitions",
            str(c.partitions),
        ]
        args += ["--copiers", str(c.workers.get("copier", 1))]
        with (run.run_dir / "logs" / f"{name}.{inc}.log").open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=child_env())
        self.paused = False
        #: stopped on purpose: not to be restarted
        self.stopping = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def pause(self) -> None:
        self.paused = True
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping = True
        self.resume()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


class Run:
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.run_dir = config.out
        for d in (self.run_dir / "logs", self.run_dir / "history"):
            d.mkdir(parents=True, exist_ok=True)
        self.disk = DataDir(self.run_dir, size_limited="disk-full" in config.fault_kinds)
        self.data_dir = self.disk.path
        self.history = HistoryWriter.for_process(self.run_dir, "runner", 0)
        cleanup = "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"
        #: the cluster (None: one broker)
        self.cluster: VerifyCluster | None = None
        self.proxy: FaultProxy | FaultProxies
        if config.brokers > 1:
            self.cluster = VerifyCluster(
                self.data_dir, self.run_dir / "logs", config.brokers, config.seed, cleanup
            )
            self.proxy = self.cluster.proxy
        else:
            port = free_port()
            self.proxy = FaultProxy(("127.0.0.1", port), seed=config.seed).start()
        #: the runner's own clients (admin, seeder, sampler, scans, hijack): their log goes to a file
        self.clients: dict[str, Any] = {
            "bootstrap.servers": self.proxy.bootstrap,
            "logger": _client_logger(self.run_dir),
        }
        if self.cluster is not None:
            #: every broker by id (one broker: id 0)
            self.brokers = self.cluster.brokers
            self.broker = self.brokers[1]
        else:
            assert isinstance(self.proxy, FaultProxy)
            settings = [
                f"advertised.listeners=127.0.0.1:{self.proxy.port}",
                cleanup,
                "group.initial.rebalance.delay.ms=0",
                *self.disk.settings(),
            ]
            self.broker = BrokerProcess(self.data_dir, *settings, port=port, log_level="WARNING")
            self.broker.log_path = self.run_dir / "logs" / "broker.log"
            self.brokers = {0: self.broker}
        self.workers: dict[str, WorkerProcess] = {}
        self._numbers: dict[str, int] = {}
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # one broker start at a time (the nemesis, the supervisor)
        self._stopping = threading.Event()
        self._workers_done = threading.Event()
        self.restarts: list[float] = []
        self.nemesis = Nemesis(self, config.fault_kinds, config.seed, config.schedule)

    # --- keys and topics ----------------------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        p = self.config.partitions
        out: dict[str, int] = {}
        w = self.config.workloads
        if "queue" in w:
            out.update(dict.fromkeys(QUEUE_TOPICS, p))
        if "copier" in w:
            out.update({"copy-in": p, "copy-out": p})
        if "bank" in w:
            out["bank"] = p
        if "zombie" in w:
            out["zombie"] = p
        if "idem" in w:
            out["idem"] = p
        if "spark" in w:
            out.update({"spark-in": p, "spark-out": p})
        return out

    def keys(self) -> list[str]:
        return [key_of(t, p) for t, n in self.topics().items() for p in range(n)]

    def create_topics(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient(self.clients)
        if self.cluster is not None:
            isr = {"min.insync.replicas": "2"}
            new = [NewTopic(t, n, replication_factor=3, config=isr) for t, n in self.topics().items()]
        else:
            new = [NewTopic(t, n, 1) for t, n in self.topics().items()]
        futures = admin.create_topics(new)
        for f in futures.values():
            f.result(30)

    def seed_input(self, topic: str, number: int) -> None:
        """`copier_records` values into `topic` (sends of proc `seeder`, incarnation `number`)."""
        from confluent_kafka import Producer

        h = HistoryWriter.for_process(self.run_dir, "seeder", number)
        producer = Producer(
            {
                **self.clients,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for n in range(1, self.config.copier_records + 1):
            send = Send(key_of(topic, n % self.config.partitions), value_for(4095 - number, n))
            op = h.invoke("send", encode_micro_ops([send]))

            def done(err: Any, msg: Any, op: Any = op, send: Send = send) -> None:
                if err is None:
                    h.complete(op, OpType.OK, encode_micro_ops([Send(send.key, send.value, msg.offset())]))
                else:
                    h.complete(op, OpType.INFO, error=str(err))

            topic, partition = split_key(send.key)
            producer.produce(topic, value=str(send.value).encode(), partition=partition, on_delivery=done)
            producer.poll(0)
        if producer.flush(60):
            raise RunError(f"seeding {topic} did not finish within 60 s")
        h.close()

    # --- workers ------------------------------------------------------------------------------------

    def start_workers(self) -> None:
        number = 0
        workloads = list(self.config.workloads)
        if "copier" in workloads:
            workloads.append("feeder")
        if "spark" in workloads:
            workloads.append("spark-feeder")
        for workload in workloads:
            for i in range(self.config.workers.get(workload, 1)):
                name = f"{workload}-{i}"
                self._numbers[name] = number
                number += 1
                self.workers[name] = WorkerProcess(self, name, workload, self._numbers[name], 0)

    def worker_names(self, exclude: tuple[str, ...] = (), only: str | None = None) -> list[str]:
        with self._lock:
            return sorted(
                n
                for n, w in self.workers.items()
                if w.workload not in exclude and (only is None or w.workload == only)
            )

    def start_worker(self, name: str) -> WorkerProcess:
        """The next incarnation of `name` (the old one, if still alive, keeps running: the caller owns it)."""
        with self._lock:
            old = self.workers[name]
            new = WorkerProcess(self, name, old.workload, old.number, old.inc + 1)
            self.workers[name] = new
            return new

    def kill_worker(self, name: str) -> None:
        with self._lock:
            w = self.workers[name]
        w.kill()
        self.start_worker(name)

    def pause_worker(self, name: str) -> WorkerProcess:
        with self._lock:
            w = self.workers[name]
        w.pause()
        return w

    def resume_worker(self, name: str) -> None:
        with self._lock:
            w = self.workers[name]
        w.resume()

    def _supervise(self) -> None:
        """Restart workers that exited on their own (a fenced zombie, a crash) as their next incarnation,
        and a cluster's brokers that exited on their own (see `_supervise_brokers`)."""
        exited: dict[str, float] = {}
        dead: dict[int, float] = {}
        while not self._workers_done.wait(1.0):
            if self.cluster is not None:
                self._supervise_brokers(dead)
            for name in self.worker_names():
                with self._lock:
                    w = self.workers[name]
                if w.alive() or w.stopping:
                    continue
                key = f"{name}.{w.inc}"
                if key not in exited:
                    exited[key] = time.monotonic()
                    value = {"proc": name, "inc": w.inc, "code": w.proc.returncode}
                    self.history.record("worker-exit", OpType.OK, value)
                # restart after 2 s (a worker that cannot start at all must not spin)
                if time.monotonic() - exited[key] >= 2.0:
                    self.start_worker(name)

    def _supervise_brokers(self, dead: dict[int, float]) -> None:
        """A cluster broker can exit on its own after it started listening: with no ZooKeeper session
        within its connection timeout (as Kafka's does), while a fault cuts its link or the machine is
        loaded. A supervisor starts it again: here once it has been down for longer than any fault keeps
        a broker down on purpose (a kill's 0-5 s), recorded as a `broker-exit` op."""
        for broker_id, broker in self.brokers.items():
            if broker.running:
                dead.pop(broker_id, None)
                continue
            since = dead.setdefault(broker_id, time.monotonic())
            if time.monotonic() - since < BROKER_SUPERVISOR_GRACE_S:
                continue
            dead.pop(broker_id, None)
            code = broker.proc.returncode if broker.proc is not None else None
            self.history.record("broker-exit", OpType.OK, {"broker": broker_id, "code": code})
            try:
                self.restart_broker(broker_id)
            except RunError as e:
                self.history.record("restart-failed", OpType.FAIL, {"broker": broker_id, "error": str(e)})

    # --- broker -------------------------------------------------------------------------------------

    def restart_broker(self, broker_id: int | None = None, timeout: float = 180.0) -> float:
        """Start the broker (of a cluster: `broker_id`) again; its recovery seconds.

        As a supervisor would (systemd's Restart=on-failure): a start that fails (the process exits, e.g.
        a cluster broker with no ZooKeeper session within its connection timeout, as Kafka's exits, while
        a fault cuts its link or the machine is loaded) is recorded as a `restart-failed` op and made
        again until `timeout`; RunError after that."""
        with self._starting:
            return self._restart_broker(broker_id, timeout)

    def _restart_broker(self, broker_id: int | None, timeout: float) -> float:
        broker = self.broker if broker_id is None else self.brokers[broker_id]
        if broker.running:
            return 0.0  # the supervisor started it already
        started = time.monotonic()
        deadline = started + timeout
        while True:
            try:
                broker.start(timeout=max(1.0, deadline - time.monotonic()))
                break
            except (RuntimeError, TimeoutError) as e:
                error = str(e).splitlines()[0]
                if time.monotonic() >= deadline or broker.running:
                    raise RunError(f"the broker did not come back: {error}") from None
                failed: dict[str, Any] = {"error": error}
                if broker_id is not None:
                    failed["broker"] = broker_id
                self.history.record("restart-failed", OpType.FAIL, failed)
                time.sleep(1.0)  # a supervisor's restart backoff
        seconds = time.monotonic() - started
        self.restarts.append(seconds)
        value: dict[str, Any] = {"seconds": round(seconds, 3)}
        if broker_id is not None:
            value["broker"] = broker_id
        self.history.record("restart", OpType.OK, value)
        return seconds

    # --- samples and scans --------------------------------------------------------------------------

    def _consumer(self, isolation: str, bootstrap: str | None = None) -> Any:
        from confluent_kafka import Consumer

        return Consumer(
            {
                **self.clients,
                **({} if bootstrap is None else {"bootstrap.servers": bootstrap}),
                "group.id": "verify-runner",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "socket.connection.setup.timeout.ms": 5000,
            }
        )

    def sample_offsets(self, timeout: float = 5.0) -> dict[str, list[int]] | None:
        """[log start, LSO, HWM] of every key, or None when a key could not be sampled.

        In a cluster each key is asked of the leader ZooKeeper names, and the sample is void if a leader
        changed meanwhile. An isolated leader (ZooKeeper mode, as in Kafka) keeps answering as the leader
        of the epoch it knows until the controller reaches it: two fresh clients bootstrapped at random
        once got the LSO from the new leader and the HWM from the isolated one ([0, 10, 1]), then the
        reverse ([0, 0, 19]) — their old values, not the partition's."""
        if self.cluster is None:
            return self._record_sample(self._sample_at(None, self.keys(), timeout))
        from kazoo.exceptions import KazooException

        cluster = self.cluster
        try:
            leadership = {k: cluster.leadership(*split_key(k)) for k in self.keys()}
        except KazooException:
            return None
        by_leader: dict[int, list[str]] = {}
        for k, (leader, _) in leadership.items():
            by_leader.setdefault(leader, []).append(k)
        out: dict[str, list[int]] = {}
        for leader, keys in sorted(by_leader.items()):
            if leader not in self.brokers:
                return None  # no leader (-1)
            part = self._sample_at(leader, keys, timeout)
            if part is None:
                return None
            out.update(part)
        try:
            if any(cluster.leadership(*split_key(k)) != was for k, was in leadership.items()):
                return None
        except KazooException:
            return None
        return self._record_sample(out)

    def _record_sample(self, sample: dict[str, list[int]] | None) -> dict[str, list[int]] | None:
        if sample is not None:
            self.history.record("offsets", OpType.OK, sample)
        return sample

    def _sample_at(self, leader: int | None, keys: list[str], timeout: float) -> dict[str, list[int]] | None:
        """The keys' offsets from the runner's bootstrap (one broker) or from `leader` alone: None when
        they could not be read, or when a client's metadata does not name `leader`."""
        from confluent_kafka import KafkaException, TopicPartition

        bootstrap = None if leader is None or self.cluster is None else self.cluster.client_bootstrap(leader)
        rc, ru = self._consumer("read_committed", bootstrap), self._consumer("read_uncommitted", bootstrap)
        try:
            if leader is not None:
                wanted: dict[str, list[int]] = {}
                for topic, partition in map(split_key, keys):
                    wanted.setdefault(topic, []).append(partition)
                for client in (rc, ru):
                    for topic, partitions in wanted.items():
                        known = client.list_topics(topic, timeout).topics[topic].partitions
                        if any(known[p].leader != leader for p in partitions):
                            return None
            out: dict[str, list[int]] = {}
            for k in keys:
                tp = TopicPartition(*split_key(k))
                # LSO before HWM: both only grow, so lso <= hwm holds across the two requests
                low, lso = rc.get_watermark_offsets(tp, timeout)
                _, hwm = ru.get_watermark_offsets(tp, timeout)
                out[k] = [low, lso, hwm]
            return out
        except (KafkaException, KeyError):
            return None
        finally:
            rc.close()
            ru.close()

    def _sampler(self) -> None:
        while not self._stopping.wait(2.0):
            self.sample_offsets()

    def scan(
        self, isolation: str, ends: dict[str, int], timeout: float = 120.0
    ) -> dict[str, list[tuple[int, int]]]:
        from confluent_kafka import TopicPartition

        consumer = self._consumer(isolation)
        read: dict[str, list[tuple[int, int]]] = {k: [] for k in ends}
        consumer.assign([TopicPartition(*split_key(k), 0) for k in ends])
        deadline = time.monotonic() + timeout
        try:
            while True:
                positions = {
                    key_of(tp.topic, tp.partition): tp.offset
                    for tp in consumer.position([TopicPartition(*split_key(k)) for k in ends])
                }
                if all(positions[k] >= end for k, end in ends.items() if end > 0):
                    return read
                if time.monotonic() > deadline:
                    raise RunError(f"the final {isolation} scan did not reach the end within {timeout:g} s")
                for msg in consumer.consume(500, 0.5):
                    if msg.error() is None:
                        read[key_of(msg.topic(), msg.partition())].append((msg.offset(), int(msg.value())))
        finally:
            consumer.close()

    # --- the run ------------------------------------------------------------------------------------

    def transactional_ids(self) -> list[str]:
        return [f"txn-{n}" for n in self.worker_names(exclude=("idem",))]

    def heal(self) -> None:
        self.history.record("heal", OpType.OK)
        self.proxy.clear_rules()
        self.proxy.release_held()
        self.proxy.blackhole(False)
        self.proxy.enabled = False
        if self.cluster is not None:
            self.cluster.heal()
        else:
            self.broker.resume()

    def make_whole(self, timeout: float = 180.0) -> None:
        """The final phase's cluster: ZooKeeper and every broker running, then whole (`unwhole`)."""
        assert self.cluster is not None
        started = time.monotonic()
        deadline = started + timeout
        while True:
            # as a supervisor would: a broker that exits (e.g. no ZooKeeper session within its
            # connection timeout on a loaded machine) is started again until the deadline
            if not self.cluster.zookeeper.running:
                self.cluster.zookeeper.start()
            for broker_id, broker in self.brokers.items():
                if not broker.running:
                    try:
                        self.restart_broker(broker_id)
                    except RunError as e:
                        if time.monotonic() >= deadline:
                            raise
                        failed = {"broker": broker_id, "error": str(e)}
                        self.history.record("restart-failed", OpType.FAIL, failed)
            missing = self.cluster.wait_whole(max(0.0, min(15.0, deadline - time.monotonic())))
            if not missing or time.monotonic() >= deadline:
                break
        seconds = round(time.monotonic() - started, 3)
        self.history.record("cluster-whole", OpType.OK, {"seconds": seconds, "missing": missing})
        if missing:
            raise RunError(
                f"the cluster was not whole {timeout:g} s after the heal: {'; '.join(missing[:5])}"
            )

    def final_phase(self, supervisor: threading.Thread) -> None:
        from confluent_kafka import Producer

        self.heal()
        for feeder in ("feeder", "spark-feeder"):
            for name in self.worker_names(only=feeder):
                self.workers[name].stop()
        if "copier" in self.config.workloads:
            self.wait_for_copiers()
        if "spark" in self.config.workloads:
            from exactly.verify.spark_job import wait_for_spark

            wait_for_spark(self)
        for name in self.worker_names():
            self.workers[name].stopping = True
        self._workers_done.set()
        supervisor.join(30)
        for name in self.worker_names():
            self.workers[name].stop()
        if self.cluster is not None:
            self.make_whole()
        else:
            if self.broker.running:
                self.broker.stop(60)
            self.restart_broker()
        for txid in self.transactional_ids():
            producer = Producer({**self.clients, "transactional.id": txid})
            producer.init_transactions(60)
            producer.flush(0)
        deadline = time.monotonic() + 60
        while True:
            sample = self.sample_offsets()
            if sample is not None and all(lso == hwm for _, lso, hwm in sample.values()):
                break
            if time.monotonic() > deadline:
                break  # the checker reports the hanging transaction
            time.sleep(0.5)
        self.history.record("open-txns", OpType.OK, self.open_transactions())
        if "copier" in self.config.workloads:
            self.history.record("group-offsets", OpType.OK, {"copier": self.copier_offsets()})
        ends = {k: hwm for k, (_, _, hwm) in (sample or {}).items()}
        for isolation, f in (("read_committed", "final-rc"), ("read_uncommitted", "final-ru")):
            records = self.scan(isolation, ends)
            self.history.record(f, OpType.OK, encode_micro_ops([Poll(records)]))

    def copier_offsets(self) -> dict[str, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.clients)
        tps = [TopicPartition("copy-in", p) for p in range(self.config.partitions)]
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("copier", tps)])
        listed = result["copier"].result(30)
        return {key_of(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions}

    def wait_for_copiers(self, timeout: float = 120.0) -> None:
        """Until the copiers' committed offsets reach the end of `copy-in` (the feeder has stopped)."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sample = self.sample_offsets()
            try:
                committed = self.copier_offsets()
            except KafkaException:
                committed = {}
            if (
                sample
                and committed
                and all(
                    committed.get(k, -1) >= lso
                    for k, (_, lso, _) in sample.items()
                    if k.startswith("copy-in:")
                )
            ):
                return
            time.sleep(1.0)

    def open_transactions(self) -> list[str]:
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.proxy.bootstrap, request_timeout_ms=30000)
        try:
            listed = admin.list_transactions()
            return sorted(
                t.transactional_id
                for listings in listed.values()
                for t in listings
                # kafka-python's TransactionState: name COMPLETE_COMMIT, value "CompleteCommit"
                if str(getattr(t.state, "value", t.state)).lower().replace("_", "")
                not in ("empty", "completecommit", "completeabort", "dead")
            )
        finally:
            admin.close()

    def execute(self) -> dict[str, Any]:
        c = self.config
        started = time.monotonic()
        if self.cluster is not None:
            try:
                self.cluster.start()
            except BaseException:
                self.cluster.close()
                raise
        else:
            self.broker.start(timeout=60)
        threads: list[threading.Thread] = []
        try:
            self.create_topics()
            if "copier" in c.workloads:
                self.seed_input("copy-in", 0)
            if "spark" in c.workloads:
                self.seed_input("spark-in", 1)
            self.start_workers()
            for target in (self._sampler, self._supervise):
                t = threading.Thread(target=target, daemon=True)
                t.start()
                threads.append(t)
            supervisor = threads[-1]
            self.nemesis.start()
            progress = Progress(self, started)
            while (elapsed := time.monotonic() - started) < c.duration:
                time.sleep(min(5.0, c.duration - elapsed))
                if c.progress is not None:
                    c.progress(progress.line())
            self.nemesis.stop()
            self._stopping.set()
            threads[0].join(30)
            self.final_phase(supervisor)
        finally:
            self._stopping.set()
            self._workers_done.set()
            self.nemesis.stop()
            for w in list(self.workers.values()):
                with contextlib.suppress(Exception):
                    w.kill()
            if self.cluster is not None:
                self.cluster.close()
            else:
                with contextlib.suppress(Exception):
                    self.broker.stop(60)
            self.disk.close()
            self.proxy.close()
            self.history.close()
        return self.summarise(time.monotonic() - started)

    def summarise(self, seconds: float) -> dict[str, Any]:
        from exactly.verify.checker import check_run

        c = self.config
        report = check_run(self.run_dir)
        ops = list(complete_ops(read_history(history_files(self.run_dir))))
        txns = Counter(
            "intentional" if o.type is OpType.FAIL and o.error == "intentional" else o.type.value
            for o in ops
            if o.f == "txn"
        )
        faults = [o for o in ops if o.f == "fault"]
        by_kind: dict[str, list[float]] = {}
        for o in faults:
            by_kind.setdefault(o.value["kind"], []).append(float(o.value.get("seconds", 0)))
        restarts = [float(o.value["seconds"]) for o in ops if o.f == "restart"]
        exits = Counter(EXIT_CODES.get(o.value["code"], "other") for o in ops if o.f == "worker-exit")
        summary: dict[str, Any] = {
            "seed": self.config.seed,
            "duration_s": round(seconds, 1),
            "command": (
                f"exactly verify run --seed {c.seed} --duration {c.duration:g} "
                f"--workloads {','.join(c.workloads)} --faults {','.join(c.faults)} "
                f"--fault-interval {c.schedule.min_interval:g},{c.schedule.max_interval:g} "
                f"--txn-timeout-ms {c.txn_timeout_ms}" + (f" --brokers {c.brokers}" if c.brokers > 1 else "")
            ),
            "workloads": list(self.config.workloads),
            "faults_enabled": list(self.config.fault_kinds),
            "txns": {
                "attempted": sum(txns.values()),
                "committed": txns["ok"],
                "aborted_intentional": txns["intentional"],
                "aborted_error": txns["fail"],
                "unknown": txns["info"],
            },
            "sends": Counter(o.type.value for o in ops if o.f == "send"),
            "faults": {k: {"count": len(v), "seconds": round(sum(v), 1)} for k, v in sorted(by_kind.items())},
            "fault_errors": [o.value for o in faults if "error" in o.value][:10],
            "restarts": {
                "count": len(restarts),
                "p50_s": round(statistics.median(restarts), 3) if restarts else None,
                "max_s": round(max(restarts), 3) if restarts else None,
            },
            "worker_exits": dict(exits),
            "anomalies": report.anomalies,
            "allowed": report.allowed,
            "stats": report.stats,
            "ok": report.ok,
        }
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        summary["_report"] = report
        return summary


class Progress:
    """Counts the workers' completed transactions by reading the history files' new lines."""

    def __init__(self, run: Run, started: float) -> None:
        self.run = run
        self.started = started
        self.offsets: dict[Path, int] = {}
        self.counts: Counter[str] = Counter()

    def line(self) -> str:
        for path in history_files(self.run.run_dir):
            with path.open("rb") as f:
                f.seek(self.offsets.get(path, 0))
                data = f.read()
            end = data.rfind(b"\n") + 1
            self.offsets[path] = self.offsets.get(path, 0) + end
            for raw in data[:end].splitlines():
                if b'"f":"txn"' in raw:
                    for t in (b'"type":"ok"', b'"type":"fail"', b'"type":"info"'):
                        if t in raw:
                            self.counts[t.split(b":")[1].strip(b'"').decode()] += 1
        n = self.run.nemesis
        elapsed = time.monotonic() - self.started
        return (
            f"[{elapsed:6.0f}s/{self.run.config.duration:.0f}s] txn ok {self.counts['ok']} "
            f"fail {self.counts['fail']} info {self.counts['info']} "
            f"| faults {sum(n.counts.values())} (last {n.last or '-'}) "
            f"| broker restarts {len(self.run.restarts)}"
        )


def format_summary(summary: dict[str, Any]) -> str:
    from exactly.verify.checker import format_report

    t = summary["txns"]
    lines = [
        f"seed {summary['seed']}, {summary['duration_s']} s, workloads {','.join(summary['workloads'])}",
        f"transactions: attempted {t['attempted']}, committed {t['committed']}, aborted "
        f"{t['aborted_intentional'] + t['aborted_error']} ({t['aborted_intentional']} on purpose), "
        f"unknown {t['unknown']}",
        "faults:",
        *(f"  {k:<22} {v['count']:>5} x, {v['seconds']:>8.1f} s" for k, v in summary["faults"].items()),
        f"broker restarts: {summary['restarts']['count']}, recovery p50 {summary['restarts']['p50_s']} s, "
        f"max {summary['restarts']['max_s']} s",
        "worker exits: "
        + (", ".join(f"{n} {why}" for why, n in sorted(summary["worker_exits"].items())) or "none"),
        format_report(summary["_report"]),
        f"reproduce: {summary['command']}",
    ]
    return "\n".join(lines)
