"""Share-group consume throughput (KIP-932, issue 24): 1 and 4 share consumers against 1 and 4 consumers
of a classic consumer group reading the same data, in the same run.

    exactly bench share [--records N] [--partitions P] [--rounds R] [--record-locks L] [--out DIR]
    (= python -m exactly.bench.share ...)

One broker process (`exactly serve`, default durability, `group.share.enable=true`,
`share.auto.offset.reset=earliest`, `group.initial.rebalance.delay.ms=0`, and with --record-locks L
`group.share.partition.max.record.locks=L`: the in-flight window of a share partition, 200 by default as
in Kafka 4.0, 2000 in later Kafka releases) on a fresh data directory.
One topic of P partitions (default 4) is preloaded with N records (default 20,000) of 1 KiB by a
confluent-kafka producer. Then, for R rounds (default 3), each variant reads all of it with a group of
its own, the variants' order rotated each round, so that machine noise falls on all of them alike:

* `share-1`, `share-4`: 1 or 4 confluent-kafka `ShareConsumer` processes (librdkafka's share consumer,
  explicit acknowledgement: every record ACCEPTed, acknowledgements sent with the next poll and
  committed at close);
* `classic-1`, `classic-4`: 1 or 4 `Consumer` processes of a classic group (range assignor,
  auto-commit), the usual way of reading a topic in parallel.

A worker process counts what it receives and reports it to this process every 0.2 s; once the workers
together received N records (or the round times out) they are told to stop, close their consumers and
report every (partition, offset) they got with the monotonic time (system-wide on Linux) of their first
and last record. A round's throughput is N / (last record of any worker - first record of any worker):
group joins before the first record are not counted (librdkafka's classic consumer prefetches in the
background, so its first record may come after much was fetched: "records/s with joins", N / (last record
- first subscribe), is given too). MB/s counts the 1 KiB values only (MiB = 2^20 B).

Exactly once: for the share variants every (partition, offset) must have been delivered once across the
share consumers: `missing` (offsets never delivered) and `duplicates` (deliveries beyond the first) are
reported for every variant and round; the classic group's duplicates come from its rebalances (what
auto-commit had not yet committed when partitions moved), which share groups do not have.

Output in DIR (default bench/share): raw/share.csv (`exactly.bench.figures.Sheet`; series
`<variant>_records_per_s`, `_mb_per_s`, `_seconds`, `_records_per_s_with_join`, `_duplicates`,
`_missing`, run = round), share.md (median, min and max of the rounds), share.png.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly.bench.figures import Sheet, fmt

__all__ = [
    "VARIANTS",
    "Options",
    "RoundResult",
    "Spread",
    "Variant",
    "WorkerReport",
    "main",
    "markdown",
    "order",
    "spread",
    "summarize",
]

SHEET = "share"
TOPIC = "bench-share"
RECORD_SIZE = 1024
MIB = 1 << 20
BROKER_SETTINGS = (
    "group.share.enable=true",
    "share.auto.offset.reset=earliest",
    "group.initial.rebalance.delay.ms=0",  # Kafka's 3 s would count against the classic group only
)


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    share: bool
    consumers: int


VARIANTS = (
    Variant("share-1", True, 1),
    Variant("share-4", True, 4),
    Variant("classic-1", False, 1),
    Variant("classic-4", False, 4),
)


@dataclass(frozen=True, slots=True)
class Options:
    records: int = 20_000
    partitions: int = 4
    rounds: int = 3
    timeout_s: float = 300.0
    variants: tuple[str, ...] = tuple(v.name for v in VARIANTS)
    record_locks: int | None = None  # group.share.partition.max.record.locks; None: the broker's default

    def argv(self) -> list[str]:
        out = [
            f"--records {self.records}",
            f"--partitions {self.partitions}",
            f"--rounds {self.rounds}",
        ]
        if self.record_locks is not None:
            out.append(f"--record-locks {self.record_locks}")
        return out

    def broker_settings(self) -> tuple[str, ...]:
        if self.record_locks is None:
            return BROKER_SETTINGS
        return (*BROKER_SETTINGS, f"group.share.partition.max.record.locks={self.record_locks}")


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What one consumer process got: its (partition, offset) deliveries and when (monotonic s)."""

    delivered: tuple[tuple[int, int], ...]
    first: float | None
    last: float | None
    started: float | None = None  # when it subscribed


@dataclass(frozen=True, slots=True)
class RoundResult:
    variant: str
    round: int
    records: int  # distinct (partition, offset) delivered
    duplicates: int  # deliveries beyond the first of an offset
    missing: int  # offsets of the preloaded range never delivered
    seconds: float  # first record of any worker .. last record of any worker
    total_seconds: float = 0.0  # first subscribe .. last record: group joins included

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * RECORD_SIZE / MIB

    @property
    def records_per_s_with_join(self) -> float:
        return self.records / self.total_seconds if self.total_seconds > 0 else 0.0


def summarize(
    variant: str, round_: int, reports: Sequence[WorkerReport], expected: dict[int, int]
) -> RoundResult:
    """A round's figures from its workers' reports; `expected`: partition -> records preloaded (offsets
    0 .. n-1: the topic holds only what the bench wrote, no transaction markers)."""
    seen: set[tuple[int, int]] = set()
    deliveries = 0
    for report in reports:
        deliveries += len(report.delivered)
        seen.update(report.delivered)
    wanted = {(p, o) for p, n in expected.items() for o in range(n)}
    firsts = [r.first for r in reports if r.first is not None]
    lasts = [r.last for r in reports if r.last is not None]
    seconds = max(lasts) - min(firsts) if firsts and lasts else 0.0
    starts = [r.started for r in reports if r.started is not None]
    total = max(lasts) - min(starts) if starts and lasts else 0.0
    return RoundResult(
        variant,
        round_,
        records=len(seen & wanted),
        duplicates=deliveries - len(seen),
        missing=len(wanted - seen),
        seconds=seconds,
        total_seconds=total,
    )


def order(variants: Sequence[str], round_: int) -> list[str]:
    """The variants rotated by the round, so that each one runs first once in len(variants) rounds."""
    if not variants:
        return []
    k = round_ % len(variants)
    return [*variants[k:], *variants[:k]]


@dataclass(frozen=True, slots=True)
class Spread:
    median: float
    low: float
    high: float
    n: int


def spread(values: Sequence[float]) -> Spread:
    if not values:
        return Spread(float("nan"), float("nan"), float("nan"), 0)
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return Spread(median, ordered[0], ordered[-1], len(ordered))


def fill_sheet(results: Sequence[RoundResult], sheet: Sheet) -> None:
    for r in results:
        sheet.add(f"{r.variant}_records_per_s", [r.records_per_s], "records/s", run=r.round)
        sheet.add(f"{r.variant}_mb_per_s", [r.mb_per_s], "MiB/s", run=r.round)
        sheet.add(f"{r.variant}_seconds", [r.seconds], "s", run=r.round)
        sheet.add(
            f"{r.variant}_records_per_s_with_join", [r.records_per_s_with_join], "records/s", run=r.round
        )
        sheet.add(f"{r.variant}_duplicates", [r.duplicates], "records", run=r.round)
        sheet.add(f"{r.variant}_missing", [r.missing], "records", run=r.round)


def _cell(s: Spread) -> str:
    return f"{fmt(s.median)} ({fmt(s.low)}..{fmt(s.high)})" if s.n else "-"


def markdown(sheet: Sheet, variants: Sequence[str], rounds: int, records: int) -> str:
    """The figures table: median (min..max) of the rounds per variant."""
    lines = [
        "| variant | records/s | MiB/s | seconds | records/s with joins | duplicates (max) | missing (max) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in variants:
        rate = spread(sheet.values(f"{name}_records_per_s"))
        mb = spread(sheet.values(f"{name}_mb_per_s"))
        took = spread(sheet.values(f"{name}_seconds"))
        joined = spread(sheet.values(f"{name}_records_per_s_with_join"))
        dups = sheet.values(f"{name}_duplicates")
        missing = sheet.values(f"{name}_missing")
        lines.append(
            f"| {name} | {_cell(rate)} | {_cell(mb)} | {_cell(took)} | {_cell(joined)} | "
            f"{int(max(dups)) if dups else '-'} | {int(max(missing)) if missing else '-'} |"
        )
    head = (
        f"{records} records of {RECORD_SIZE} B per round and variant; median (min..max) of {rounds} "
        "rounds.\n\n"
    )
    return head + "\n".join(lines) + "\n"


def plot(sheet: Sheet, variants: Sequence[str], rounds: int, path: Path) -> Path:
    from exactly.bench.plots import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    spreads = [spread(sheet.values(f"{v}_records_per_s")) for v in variants]
    medians = [s.median for s in spreads]
    below = [s.median - s.low if s.n else 0.0 for s in spreads]
    above = [s.high - s.median if s.n else 0.0 for s in spreads]
    colors = ["tab:blue" if v.startswith("share") else "tab:gray" for v in variants]
    ax.bar(range(len(variants)), medians, yerr=[below, above], capsize=4, color=colors)
    ax.set_xticks(range(len(variants)))
    ax.set_xticklabels(list(variants))
    ax.set_ylabel("records/s (1 KiB records)")
    ax.set_title(
        f"share group vs classic group consume throughput, median of {rounds} rounds (bars: min-max)"
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# --- the worker process ------------------------------------------------------------------------------


def worker(kind: str, bootstrap: str, group: str) -> None:
    """One consumer: report the running count on stdout, stop on a line on stdin, then report all."""
    from confluent_kafka import AcknowledgeType, Consumer, ShareConsumer

    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3}
    if kind == "share":
        settings["share.acknowledgement.mode"] = "explicit"
        consumer: Any = ShareConsumer(settings)
    else:
        settings["auto.offset.reset"] = "earliest"
        consumer = Consumer(settings)
    consumer.subscribe([TOPIC])
    started = time.monotonic()
    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    delivered: list[tuple[int, int]] = []
    first: float | None = None
    last: float | None = None
    reported = time.monotonic()
    while not stop.is_set():
        if kind == "share":
            got = consumer.poll(0.2)
        else:
            got = consumer.consume(500, 0.2)
        now = time.monotonic()
        for m in got:
            if m.error() is not None:
                continue
            delivered.append((m.partition(), m.offset()))
            if kind == "share":
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        if got:
            first = now if first is None else first
            last = now
        if now - reported >= 0.2:
            print(f"n {len(delivered)}", flush=True)
            reported = now
    if kind == "share":
        consumer.commit_sync()
    consumer.close()
    print(
        "result " + json.dumps({"delivered": delivered, "started": started, "first": first, "last": last}),
        flush=True,
    )


class _Worker:
    def __init__(self, kind: str, bootstrap: str, group: str) -> None:
        args = [sys.executable, "-m", "exactly.bench.share", "--worker", kind, bootstrap, group]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.count = 0
        self.report: WorkerReport | None = None

    def read(self, timeout: float) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return
        line = self.proc.stdout.readline()
        if line.startswith("n "):
            self.count = int(line.split()[1])
        elif line.startswith("result "):
            raw = json.loads(line[len("result ") :])
            delivered = tuple((int(p), int(o)) for p, o in raw["delivered"])
            self.report = WorkerReport(delivered, raw["first"], raw["last"], raw["started"])

    def stop(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass


def run_variant(
    variant: Variant, bootstrap: str, group: str, records: int, timeout_s: float
) -> list[WorkerReport]:
    workers = [
        _Worker("share" if variant.share else "classic", bootstrap, group) for _ in range(variant.consumers)
    ]
    try:
        deadline = time.monotonic() + timeout_s
        while sum(w.count for w in workers) < records and time.monotonic() < deadline:
            for w in workers:
                w.read(0.05)
            if any(w.proc.poll() is not None for w in workers):
                raise RuntimeError(f"{variant.name}: a consumer process exited early")
        for w in workers:
            w.stop()
        end = time.monotonic() + 60
        while any(w.report is None for w in workers) and time.monotonic() < end:
            for w in workers:
                if w.report is None:
                    w.read(0.05)
    finally:
        for w in workers:
            try:
                w.proc.wait(30)
            except subprocess.TimeoutExpired:
                w.proc.kill()
    return [w.report if w.report is not None else WorkerReport((), None, None) for w in workers]


def preload(bootstrap: str, records: int, partitions: int) -> dict[int, int]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    value = b"x" * RECORD_SIZE
    counts = dict.fromkeys(range(partitions), 0)
    for i in range(records):
        partition = i % partitions
        while True:
            try:
                producer.produce(TOPIC, value, partition=partition)
                break
            except BufferError:
                producer.poll(0.1)
        counts[partition] += 1
    if producer.flush(120) != 0:
        raise RuntimeError("the preload was not acknowledged")
    return counts


def measure(
    options: Options, bootstrap: str, expected: dict[int, int], progress: Callable[[str], None]
) -> list[RoundResult]:
    chosen = [v for v in VARIANTS if v.name in options.variants]
    by_name = {v.name: v for v in chosen}
    results: list[RoundResult] = []
    for round_ in range(options.rounds):
        for name in order([v.name for v in chosen], round_):
            group = f"bench-{name}-{round_}-{os.getpid()}"
            reports = run_variant(by_name[name], bootstrap, group, options.records, options.timeout_s)
            result = summarize(name, round_, reports, expected)
            results.append(result)
            progress(
                f"round {round_} {name}: {result.records_per_s:.0f} records/s, {result.mb_per_s:.2f} MiB/s, "
                f"{result.duplicates} duplicates, {result.missing} missing"
            )
    return results


def machine_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} CPUs; load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min)"


def parse_options(argv: list[str] | None) -> tuple[Options, Path]:
    defaults = Options()
    parser = argparse.ArgumentParser(prog="exactly bench share")
    parser.add_argument("--records", type=int, default=defaults.records)
    parser.add_argument("--partitions", type=int, default=defaults.partitions)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--timeout-s", type=float, default=defaults.timeout_s)
    parser.add_argument(
        "--variants", nargs="+", default=list(defaults.variants), choices=[v.name for v in VARIANTS]
    )
    parser.add_argument("--record-locks", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench/share"))
    args = parser.parse_args(argv)
    options = Options(
        args.records, args.partitions, args.rounds, args.timeout_s, tuple(args.variants), args.record_locks
    )
    return options, args.out


def main(argv: list[str] | None = None) -> Sheet:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["--worker"]:
        worker(arguments[1], arguments[2], arguments[3])
        return Sheet(SHEET)
    options, out = parse_options(arguments)
    command = f"exactly bench share {' '.join(options.argv())} --out {out}"
    print(command, flush=True)
    at_start = machine_line()
    began = time.monotonic()
    from exactly.testing.processes import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="exactly-bench-share-") as tmp:
        broker = BrokerProcess(
            Path(tmp) / "data", *options.broker_settings(), log_path=Path(tmp) / "broker.log"
        )
        broker.start(60)
        try:
            expected = preload(broker.bootstrap, options.records, options.partitions)
            results = measure(options, broker.bootstrap, expected, lambda line: print(line, flush=True))
        finally:
            broker.stop()
    machine = f"Machine at the start: {at_start}; at the end: {machine_line()}; the run took "
    machine += f"{time.monotonic() - began:.0f} s."
    sheet = Sheet(SHEET)
    fill_sheet(results, sheet)
    out.mkdir(parents=True, exist_ok=True)
    raw = sheet.write(out)
    table = out / "share.md"
    names = [v.name for v in VARIANTS if v.name in options.variants]
    table.write_text(
        f"`{command}`\n\n{machine}\n\n" + markdown(sheet, names, options.rounds, options.records)
    )
    png = plot(sheet, names, options.rounds, out / "share.png")
    print(table.read_text())
    print(f"wrote {raw}, {table} and {png}")
    return sheet


if __name__ == "__main__":
    main()
