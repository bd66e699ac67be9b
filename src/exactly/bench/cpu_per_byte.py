"""Broker CPU per byte (issue 25): the broker process's CPU seconds per GB produced and per GB consumed.

    python -m exactly.bench.cpu_per_byte [--rounds 3] [--seconds 10] [--producers 1] [--consumers 1]
                                [--profile-produce x.svg] [--profile-consume y.svg]

CPU time (utime + stime of /proc/<pid>/stat, read before and after each phase) is the figure that holds
on a noisy shared machine, where throughput does not. Each round, against one real `exactly serve`
process started in a temporary directory:

- produce: `--producers` confluent-kafka processes, 1 KiB records, 6 partitions, acks=all, idempotent,
  linger.ms=5 and batch.size=1 MB (what throughput-minded users set), default durability (fsync before
  ack), for `--seconds` after a warm-up that is not counted;
- consume: `--consumers` processes, each assigned its share of the partitions, read the round's topic
  from the start again and again for `--seconds` (plaintext, whole batches from the page cache).

Reported per phase: MB/s and broker CPU s/GB (GB = 1e9 bytes of record values) per round, then the
median and spread (min..max) over the rounds. `--profile-*` runs py-spy against the broker during the
phase of one more round, which is not counted (py-spy must be installed).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly.bench.broker import throughput_producer_config
from exactly.bench.cpu import read_proc_stat
from exactly.bench.rounds import SAMPLE_EVERY
from exactly.testing.processes import BrokerProcess

RECORD_SIZE = 1024
PARTITIONS = 6
WARM_UP_S = 2.0
IDLE_S = 3.0
BROKER_START_TIMEOUT = 20.0


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far (Linux /proc/<pid>/stat utime and stime)."""
    fields = read_proc_stat(pid).rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


@dataclass(frozen=True, slots=True)
class Phase:
    """One measured phase of one round: bytes of record values moved, wall seconds, the broker's user and
    system CPU seconds."""

    value_bytes: int
    seconds: float
    user: float
    system: float

    @property
    def cpu(self) -> float:
        return self.user + self.system

    @property
    def mb_s(self) -> float:
        return self.value_bytes / self.seconds / 1e6 if self.seconds else 0.0

    @property
    def cpu_s_per_gb(self) -> float:
        return self.cpu / (self.value_bytes / 1e9) if self.value_bytes else float("nan")

    def __str__(self) -> str:
        gb = self.value_bytes / 1e9 or float("nan")
        return (
            f"{self.mb_s:7.1f} MB/s  broker CPU {self.cpu_s_per_gb:.3f} s/GB"
            f" (user {self.user / gb:.3f}, system {self.system / gb:.3f})"
        )


class _Clock:
    """The broker's CPU and the wall clock at the start of a phase."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu = cpu_times(pid)
        self.start = time.perf_counter()

    def phase(self, value_bytes: int) -> Phase:
        user, system = cpu_times(self.pid)
        return Phase(value_bytes, time.perf_counter() - self.start, user - self.cpu[0], system - self.cpu[1])


def _producer(bootstrap: str, topic: str, index: int, start: Any, stop: Any, queue: Any) -> None:
    """Produce as fast as the broker acknowledges until `stop`; count what was delivered after `start`."""
    from confluent_kafka import Producer

    producer = Producer(throughput_producer_config(bootstrap, 262_144))
    value = os.urandom(RECORD_SIZE)
    counted = [0]

    def delivered(err: Any, _msg: Any) -> None:  # one record in SAMPLE_EVERY (as the report's rounds)
        if err is not None:
            raise RuntimeError(str(err))
        if start.is_set():
            counted[0] += SAMPLE_EVERY

    i = index
    while i % 1000 or not stop.is_set():
        try:
            if i % SAMPLE_EVERY != SAMPLE_EVERY - 1:
                producer.produce(topic, value, partition=i % PARTITIONS)
            else:
                producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=delivered)
            i += 1
        except BufferError:
            producer.poll(0.001)
            continue
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    queue.put(counted[0] * RECORD_SIZE)


def _consumer(bootstrap: str, topic: str, partitions: list[int], seconds: float, queue: Any) -> None:
    """Read `partitions` of `topic` from the start, over and over, for `seconds`; report value bytes."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cpu-bench-{os.getpid()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "enable.partition.eof": True,
        }
    )
    nbytes = 0
    begin = time.perf_counter()
    while time.perf_counter() - begin < seconds:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        while len(at_end) < len(partitions) and time.perf_counter() - begin < seconds:
            for m in consumer.consume(10_000, timeout=1):
                error = m.error()
                if error is None:
                    nbytes += len(m.value() or b"")
                elif error.code() == -191:  # _PARTITION_EOF
                    at_end.add(m.partition() or 0)
        consumer.unassign()
    queue.put((nbytes, time.perf_counter() - begin))
    consumer.close()


class _Profiler:
    """py-spy recording the broker while a phase runs (None: not asked for). A `.txt` output is py-spy's
    raw (collapsed stacks) format, `.json` speedscope, anything else a flame graph; only threads that hold
    the GIL are sampled (`--gil`): the Python work, not the threads waiting for an fsync."""

    def __init__(self, pid: int, output: Path | None, seconds: float) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        if output is None:
            return
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        fmt = {".json": "speedscope", ".txt": "raw"}.get(output.suffix, "flamegraph")
        command = [spy, "record", "--gil", "--pid", str(pid), "-o", str(output), "-d", str(int(seconds))]
        self.proc = subprocess.Popen(
            [*command, "-f", fmt, "-r", "200"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def wait(self) -> None:
        if self.proc is not None:
            self.proc.wait(60)


def produce_phase(
    bootstrap: str, topic: str, pid: int, producers: int, seconds: float, profile: Path | None
) -> Phase:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    start, stop = ctx.Event(), ctx.Event()
    procs = [
        ctx.Process(target=_producer, args=(bootstrap, topic, i, start, stop, queue))
        for i in range(producers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(WARM_UP_S)  # producers connect, get their producer ids and reach a steady rate
    clock = _Clock(pid)
    start.set()
    profiler = _Profiler(pid, profile, seconds)
    time.sleep(seconds)
    stop.set()
    delivered = sum(queue.get(timeout=120) for _ in procs)
    phase = clock.phase(delivered)
    for proc in procs:
        proc.join(30)
    profiler.wait()
    return phase


def consume_phase(
    bootstrap: str, topic: str, pid: int, consumers: int, seconds: float, profile: Path | None
) -> Phase:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    shares = [list(range(PARTITIONS))[i::consumers] for i in range(consumers)]
    procs = [
        ctx.Process(target=_consumer, args=(bootstrap, topic, share, seconds, queue)) for share in shares
    ]
    clock = _Clock(pid)
    for proc in procs:
        proc.start()
    profiler = _Profiler(pid, profile, seconds)
    results = [queue.get(timeout=seconds + 120) for _ in procs]
    phase = clock.phase(sum(r[0] for r in results))
    for proc in procs:
        proc.join(30)
    profiler.wait()
    return phase


def _summary(name: str, phases: list[Phase]) -> str:
    per_gb = [p.cpu_s_per_gb for p in phases]
    mb_s = [p.mb_s for p in phases]
    return (
        f"{name}: broker CPU {statistics.median(per_gb):.3f} s/GB"
        f" (spread {min(per_gb):.3f}..{max(per_gb):.3f}),"
        f" {statistics.median(mb_s):.1f} MB/s (spread {min(mb_s):.1f}..{max(mb_s):.1f}), {len(phases)} rounds"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="broker CPU seconds per GB produced and consumed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--profile-produce", type=Path, default=None)
    parser.add_argument("--profile-consume", type=Path, default=None)
    parser.add_argument("--set", action="append", default=[], help="a broker setting, key=value")
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    produced: list[Phase] = []
    consumed: list[Phase] = []
    with tempfile.TemporaryDirectory(prefix="exactly-cpu-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", *args.set).start(BROKER_START_TIMEOUT)
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            idle = _Clock(broker.pid)
            time.sleep(IDLE_S)
            print(f"broker idle: {idle.phase(0).cpu / IDLE_S:.3f} CPU s/s", flush=True)
            profiling = args.profile_produce is not None or args.profile_consume is not None
            for r in range(args.rounds + profiling):
                last = r == args.rounds  # the profiled round: py-spy costs the broker CPU, not counted
                topic = f"cpu-{r}"
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
                prof = args.profile_produce if last else None
                phase = produce_phase(broker.bootstrap, topic, broker.pid, args.producers, args.seconds, prof)
                if not last:
                    produced.append(phase)
                print(f"round {r}: produce {phase}{' (profiled)' if last else ''}", flush=True)
                prof = args.profile_consume if last else None
                phase = consume_phase(broker.bootstrap, topic, broker.pid, args.consumers, args.seconds, prof)
                if not last:
                    consumed.append(phase)
                print(f"round {r}: consume {phase}{' (profiled)' if last else ''}", flush=True)
                admin.delete_topics([topic])[topic].result()
        finally:
            broker.stop(30)
    print(_summary(f"produce ({args.producers} producer(s), 1 KiB, acks=all, idempotent, fsync)", produced))
    print(_summary(f"consume ({args.consumers} consumer(s), plaintext)", consumed))


if __name__ == "__main__":
    main()
