"""Rebalance benchmark: how long a consumer group takes to settle, classic protocol against KIP-848
(issue 24, proof), and how many partitions stop being consumed meanwhile.

    python -m exactly.bench.rebalance [--sizes 3 10] [--partitions 30] [--rounds 3] [--session-ms 3000]
        [--heartbeat-ms 500] [--quiet-s 3] [--timeout-s 90] [--initial-delay-ms 0] [--seed 24]
        [--variants classic-range classic-coop-sticky consumer-uniform] [--out DIR]
    exactly bench rebalance ...

One broker process (`exactly.testing.processes.BrokerProcess`) on a temporary data directory, one topic of
P partitions. For each group size N and each *variant* — classic `range` (eager), classic
`cooperative-sticky` (incremental), KIP-848 `group.protocol=consumer` (the broker's `uniform` assignor) —
in every round (variants interleaved, their order rotated each round), on a fresh group:

  (a) form:  N member processes (`exactly.bench.rebalance_member`, one librdkafka consumer each) are
             started, and once all are ready they subscribe together; timed from the first subscribe;
  (b) join:  one more member subscribes; timed from its subscribe;
  (c) leave: one member closes cleanly (LeaveGroup); timed from the close request;
  (d) kill:  one member gets SIGKILL; timed from the kill. The session timeout is the same for both
             protocols (classic: the member's `session.timeout.ms`; KIP-848: the broker's
             `group.consumer.session.timeout.ms`), and so is the heartbeat interval.
(c) and (d) begin a random fraction of a heartbeat interval after the previous phase settled, so that
they do not always fall at the same point of the members' heartbeat cycle.

Every member reports each change of the partitions it owns with a `time.monotonic()` stamp (the same
clock in every process), so a phase yields an *assignment timeline*: `Change(t, member, partitions)`.
The group is *settled* when the live members' owned sets partition the P partitions (each owned exactly
once), no departed member owns any, and the shares differ by at most one (every assignor here balances a
single topic). The settle time of a phase is the last moment the timeline turned settled (`settle_time`),
confirmed by `--quiet-s` seconds without any change. For (b) to (d), `ownership_gaps` says, per partition,
for how long no member owned it between the phase's start and its settle time (a classic eager
rebalance revokes every partition; an incremental one only those that move; a killed member's
partitions are unowned from the kill until the survivors get them), and `double_ownership` how long any
partition had two owners (must be 0).

Raw figures go to DIR/raw/rebalance.csv (`exactly.bench.figures.Sheet`; one row per round:
`<variant>.n<N>.<phase>.<measure>`, run = round), the tables to DIR/rebalance.md and the plot to
DIR/rebalance.png. Figures are medians over the rounds with the min-max spread (`spread`).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from exactly.bench.figures import Sheet, fmt

__all__ = [
    "VARIANTS",
    "Change",
    "Options",
    "Phase",
    "PhaseResult",
    "Spread",
    "Variant",
    "double_ownership",
    "is_settled",
    "main",
    "ownership_gaps",
    "phase_result",
    "settle_time",
    "spread",
]

TOPIC = "bench-rebalance"
SHEET = "rebalance"


# --- the pure part: assignment timelines, settling, statistics -----------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """From `t` on (seconds, monotonic clock), `member` owns exactly `partitions`."""

    t: float
    member: str
    partitions: frozenset[int]


class Phase(Enum):
    FORM = "form"  # (a) N members subscribe together
    JOIN = "join"  # (b) one more member
    LEAVE = "leave"  # (c) one member closes
    KILL = "kill"  # (d) one member is SIGKILLed


def _replay(changes: Iterable[Change]) -> Iterable[tuple[float, dict[str, frozenset[int]]]]:
    """The owned sets at each moment a change happened, after every change of that moment, in time order
    (the same dict, updated in place): changes logged at the same time leave no state in between."""
    owned: dict[str, frozenset[int]] = {}
    for t, together in itertools.groupby(sorted(changes, key=lambda c: c.t), key=lambda c: c.t):
        for change in together:
            owned[change.member] = change.partitions
        yield t, owned


def is_settled(owned: Mapping[str, frozenset[int]], live: Iterable[str], partitions: int) -> bool:
    """The live members' sets partition range(partitions) and are balanced; nobody else owns anything."""
    live = set(live)
    if not live:
        return False
    if any(parts for member, parts in owned.items() if member not in live):
        return False
    sizes = [len(owned.get(member, frozenset())) for member in live]
    if sum(sizes) != partitions or max(sizes) - min(sizes) > 1:
        return False
    union: set[int] = set()
    for member in live:
        union |= owned.get(member, frozenset())
    return union == set(range(partitions))


def settle_time(
    changes: Iterable[Change], live: Iterable[str], partitions: int, start: float
) -> float | None:
    """The last moment at or after `start` when the group turned settled, or None if it is not settled
    after the last change. A group already settled at `start` and never unsettled after it: `start`."""
    live = set(live)
    at_start = False
    settled_since: float | None = None
    started = False
    for t, owned in _replay(changes):
        if t < start:
            at_start = is_settled(owned, live, partitions)
            continue
        if not started:
            started = True
            settled_since = start if at_start else None
        now = is_settled(owned, live, partitions)
        if now and settled_since is None:
            settled_since = t
        elif not now:
            settled_since = None
    if not started:
        return start if at_start else None
    return settled_since


def _owner_counts(
    changes: Iterable[Change], partitions: int, start: float, end: float
) -> Iterable[tuple[float, list[int]]]:
    """(segment length within [start, end], owners of each partition during it) for each segment."""
    owners = [0] * partitions
    owned: dict[str, frozenset[int]] = {}
    previous = start
    for change in sorted(changes, key=lambda c: c.t):
        if change.t > previous:
            segment = min(change.t, end) - previous
            if segment > 0:
                yield segment, owners
            previous = max(previous, min(change.t, end))
        for p in owned.get(change.member, frozenset()):
            if p < partitions:
                owners[p] -= 1
        for p in change.partitions:
            if p < partitions:
                owners[p] += 1
        owned[change.member] = change.partitions
    if end > previous:
        yield end - previous, owners


def ownership_gaps(changes: Iterable[Change], partitions: int, start: float, end: float) -> dict[int, float]:
    """Per partition, the seconds of [start, end] during which no member owned it (0 for none)."""
    gaps = dict.fromkeys(range(partitions), 0.0)
    for segment, owners in _owner_counts(changes, partitions, start, end):
        for p, count in enumerate(owners):
            if count == 0:
                gaps[p] += segment
    return gaps


def double_ownership(changes: Iterable[Change], partitions: int, start: float, end: float) -> float:
    """The seconds of [start, end] during which some partition had two owners or more."""
    return sum(
        segment
        for segment, owners in _owner_counts(changes, partitions, start, end)
        if max(owners, default=0) > 1
    )


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """One phase of one round: its settle time and what stopped being consumed meanwhile."""

    settle_s: float  # NaN: did not settle within the timeout
    stopped: int  # partitions that had no owner for a while
    longest_stop_s: float  # the longest such stop
    stopped_partition_s: float  # the sum over partitions of their stops
    double_owned_s: float


def phase_result(
    changes: Sequence[Change], partitions: int, start: float, settled: float | None, end: float
) -> PhaseResult:
    """The figures of a phase that began at `start` and settled at `settled` (None: had not by `end`)."""
    stop = end if settled is None else settled
    gaps = ownership_gaps(changes, partitions, start, stop)
    stopped = [g for g in gaps.values() if g > 0]
    return PhaseResult(
        settle_s=math.nan if settled is None else settled - start,
        stopped=len(stopped),
        longest_stop_s=max(stopped, default=0.0),
        stopped_partition_s=sum(stopped),
        double_owned_s=double_ownership(changes, partitions, start, stop),
    )


@dataclass(frozen=True, slots=True)
class Spread:
    """The median of some rounds' figures with their range (NaN rounds, which did not settle, left out)."""

    median: float
    low: float
    high: float
    n: int  # rounds that count
    missing: int  # rounds left out (NaN)

    def text(self, scale: float = 1.0) -> str:
        if self.n == 0:
            return "n/a"
        body = f"{fmt(self.median * scale)} ({fmt(self.low * scale)}..{fmt(self.high * scale)})"
        return body + (f" ⚠{self.missing} unsettled" if self.missing else "")


def spread(values: Iterable[float]) -> Spread:
    values = list(values)
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return Spread(math.nan, math.nan, math.nan, 0, len(values))
    return Spread(float(statistics.median(kept)), min(kept), max(kept), len(kept), len(values) - len(kept))


# --- variants and options -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    protocol: str  # group.protocol
    strategy: str  # classic: partition.assignment.strategy; consumer: the broker's assignor (informative)


VARIANTS = (
    Variant("classic-range", "classic", "range"),
    Variant("classic-coop-sticky", "classic", "cooperative-sticky"),
    Variant("consumer-uniform", "consumer", "uniform"),
)


@dataclass(frozen=True, slots=True)
class Options:
    sizes: tuple[int, ...] = (3, 10)
    partitions: int = 30
    rounds: int = 3
    session_ms: int = 3000
    heartbeat_ms: int = 500
    quiet_s: float = 3.0
    timeout_s: float = 90.0
    initial_delay_ms: int = 0
    variants: tuple[str, ...] = tuple(v.name for v in VARIANTS)
    seed: int = 24  # of the random delays before the leave and the kill

    def broker_settings(self) -> tuple[str, ...]:
        return (
            "group.min.session.timeout.ms=1000",
            f"group.initial.rebalance.delay.ms={self.initial_delay_ms}",
            "group.consumer.min.session.timeout.ms=1000",
            f"group.consumer.session.timeout.ms={self.session_ms}",
            "group.consumer.min.heartbeat.interval.ms=100",
            f"group.consumer.heartbeat.interval.ms={self.heartbeat_ms}",
        )

    def argv(self) -> list[str]:
        out = ["--sizes", *map(str, self.sizes), "--partitions", str(self.partitions)]
        out += ["--rounds", str(self.rounds), "--session-ms", str(self.session_ms)]
        out += ["--heartbeat-ms", str(self.heartbeat_ms), "--quiet-s", f"{self.quiet_s:g}"]
        out += ["--timeout-s", f"{self.timeout_s:g}", "--initial-delay-ms", str(self.initial_delay_ms)]
        out += ["--seed", str(self.seed)]
        return out


def series(variant: str, size: int, phase: Phase, measure: str) -> str:
    return f"{variant}.n{size}.{phase.value}.{measure}"


# --- member processes ---------------------------------------------------------------------------------


class MemberProcess:
    """A `rebalance_member` process and the events it printed (a reader thread collects them)."""

    def __init__(self, name: str, bootstrap: str, group: str, variant: Variant, options: Options, log: Path):
        self.name = name
        args = [sys.executable, "-m", "exactly.bench.rebalance_member", "--bootstrap", bootstrap]
        args += ["--group", group, "--topic", TOPIC, "--protocol", variant.protocol, "--name", name]
        args += ["--session-ms", str(options.session_ms), "--heartbeat-ms", str(options.heartbeat_ms)]
        if variant.protocol == "classic":
            args += ["--strategy", variant.strategy]
        with log.open("ab") as stderr:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1
            )
        self.events: list[dict[str, Any]] = []
        self.killed_at: float | None = None
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def event_time(self, name: str) -> float | None:
        with self._lock:
            return next((e["t"] for e in self.events if e["event"] == name), None)

    def changes(self) -> list[Change]:
        """Its assignment timeline; a closed or killed member owns nothing from then on."""
        with self._lock:
            out = [
                Change(e["t"], self.name, frozenset(e["partitions"]))
                for e in self.events
                if e["event"] == "assigned"
            ]
            closed = next((e["t"] for e in self.events if e["event"] == "closed"), None)
        for end in (closed, self.killed_at):
            if end is not None:
                out.append(Change(end, self.name, frozenset()))
        return out

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def kill(self) -> float:
        """SIGKILL; returns when (monotonic) it was sent."""
        self.killed_at = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        return self.killed_at


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


def wait_settled(
    members: Sequence[MemberProcess], live: Iterable[str], partitions: int, start: float, options: Options
) -> tuple[float | None, list[Change]]:
    """Poll the timelines until the group settled and stayed so for `quiet_s` (or the timeout)."""
    live = set(live)
    while True:
        changes = [c for m in members for c in m.changes()]
        settled = settle_time(changes, live, partitions, start)
        now = time.monotonic()
        last = max((c.t for c in changes), default=start)
        if settled is not None and now - max(settled, last) >= options.quiet_s:
            return settled, changes
        if now - start > options.timeout_s:
            return None, changes
        time.sleep(0.05)


def run_group(
    bootstrap: str, variant: Variant, size: int, options: Options, logs: Path, jitter: random.Random
) -> dict[Phase, PhaseResult]:
    """One fresh group through the four phases. The leave and the kill come a random fraction of a
    heartbeat interval (`jitter`) after the previous phase settled: settling happens on a heartbeat, and
    a fixed quiet period after it would otherwise start every leave and kill at the same heartbeat
    phase (just after a heartbeat, so always one whole interval before the survivors hear of it)."""
    group = f"rebalance-{variant.name}-{size}-{uuid.uuid4().hex[:8]}"
    counter = iter(range(1_000))
    partitions = options.partitions
    log = logs / f"{group}.log"

    def spawn() -> MemberProcess:
        return MemberProcess(f"m{next(counter)}", bootstrap, group, variant, options, log)

    def ready(ms: Sequence[MemberProcess]) -> None:
        wait_for(lambda: all(m.event_time("ready") is not None for m in ms), 120, "members ready")

    def subscribed(m: MemberProcess) -> float:
        wait_for(lambda: m.event_time("subscribed") is not None, 30, f"{m.name} subscribed")
        t = m.event_time("subscribing")  # the moment it called subscribe()
        assert t is not None
        return t

    results: dict[Phase, PhaseResult] = {}
    members = [spawn() for _ in range(size)]
    everyone = list(members)
    try:
        ready(members)
        for m in members:
            m.send("go")
        start = min(subscribed(m) for m in members)
        settled, changes = wait_settled(everyone, [m.name for m in members], partitions, start, options)
        form = phase_result(changes, partitions, start, settled, time.monotonic())
        results[Phase.FORM] = PhaseResult(form.settle_s, 0, 0.0, 0.0, form.double_owned_s)

        newcomer = spawn()
        everyone.append(newcomer)
        ready([newcomer])
        newcomer.send("go")
        members.append(newcomer)
        start = subscribed(newcomer)
        results[Phase.JOIN] = _phase(everyone, members, partitions, start, options)

        leaver = members.pop(0)
        time.sleep(jitter.uniform(0, options.heartbeat_ms / 1000))
        start = time.monotonic()
        leaver.send("close")
        results[Phase.LEAVE] = _phase(everyone, members, partitions, start, options)

        victim = members.pop(0)
        time.sleep(jitter.uniform(0, options.heartbeat_ms / 1000))
        start = victim.kill()
        results[Phase.KILL] = _phase(everyone, members, partitions, start, options)
    finally:
        for m in everyone:
            if m.proc.poll() is None:
                m.proc.send_signal(signal.SIGKILL)
            m.proc.wait(10)
    return results


def _phase(
    everyone: Sequence[MemberProcess],
    live: Sequence[MemberProcess],
    partitions: int,
    start: float,
    options: Options,
) -> PhaseResult:
    names = [m.name for m in live]
    settled, changes = wait_settled(everyone, names, partitions, start, options)
    return phase_result(changes, partitions, start, settled, time.monotonic())


# --- the run ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    variant: str
    size: int
    round: int
    phase: Phase
    result: PhaseResult


def _create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)


def measure(options: Options, tmp: Path, progress: Callable[[str], None] = print) -> list[Outcome]:
    from exactly.bench.broker import BROKER_START_TIMEOUT
    from exactly.testing.processes import BrokerProcess

    variants = [v for v in VARIANTS if v.name in options.variants]
    outcomes: list[Outcome] = []
    jitter = random.Random(options.seed)
    with BrokerProcess(tmp / "data", *options.broker_settings()).start(BROKER_START_TIMEOUT) as broker:
        _create_topic(broker.bootstrap, options.partitions)
        for number in range(options.rounds):
            order = variants[number % len(variants) :] + variants[: number % len(variants)]
            for size in options.sizes:
                for variant in order:
                    began = time.monotonic()
                    results = run_group(broker.bootstrap, variant, size, options, tmp, jitter)
                    line = ", ".join(f"{p.value} {r.settle_s:.2f}s/{r.stopped}p" for p, r in results.items())
                    took = time.monotonic() - began
                    progress(f"round {number + 1} N={size} {variant.name}: {line}  ({took:.0f} s)")
                    outcomes.extend(Outcome(variant.name, size, number, p, r) for p, r in results.items())
    return outcomes


def fill_sheet(outcomes: Sequence[Outcome], sheet: Sheet) -> None:
    for o in outcomes:
        r = o.result
        sheet.add(series(o.variant, o.size, o.phase, "settle_s"), [r.settle_s], "s", run=o.round)
        if o.phase is not Phase.FORM:
            sheet.add(series(o.variant, o.size, o.phase, "stopped"), [r.stopped], "partitions", run=o.round)
            sheet.add(
                series(o.variant, o.size, o.phase, "longest_stop_s"), [r.longest_stop_s], "s", run=o.round
            )
            sheet.add(
                series(o.variant, o.size, o.phase, "stopped_partition_s"),
                [r.stopped_partition_s],
                "partition-s",
                run=o.round,
            )
        sheet.add(series(o.variant, o.size, o.phase, "double_owned_s"), [r.double_owned_s], "s", run=o.round)


PHASE_TITLES = {
    Phase.FORM: "(a) N members subscribe",
    Phase.JOIN: "(b) one joins",
    Phase.LEAVE: "(c) one leaves (close)",
    Phase.KILL: "(d) one killed (SIGKILL)",
}


def markdown(sheet: Sheet, options: Options, command: str, machine: str) -> str:
    variants = [v for v in VARIANTS if v.name in options.variants]
    header = "| N | phase | " + " | ".join(v.name for v in variants) + " |"
    rule = "|---|---|" + "---|" * len(variants)
    lines = [
        f"`{command}`",
        "",
        machine,
        "",
        f"### Settle time, seconds: median (min-max) of {options.rounds} rounds",
        "",
        header,
        rule,
    ]
    for size in options.sizes:
        for phase in Phase:
            cells = [spread(sheet.values(series(v.name, size, phase, "settle_s"))).text() for v in variants]
            lines.append(f"| {size} | {PHASE_TITLES[phase]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Partitions that stopped being consumed: median count / median longest stop (s) / median "
        "partition-seconds stopped",
        "",
        header,
        rule,
    ]
    for size in options.sizes:
        for phase in (Phase.JOIN, Phase.LEAVE, Phase.KILL):
            cells = []
            for v in variants:
                count = spread(sheet.values(series(v.name, size, phase, "stopped")))
                longest = spread(sheet.values(series(v.name, size, phase, "longest_stop_s")))
                total = spread(sheet.values(series(v.name, size, phase, "stopped_partition_s")))
                cells.append(f"{count.median:g} / {fmt(longest.median)} / {fmt(total.median)}")
            lines.append(f"| {size} | {PHASE_TITLES[phase]} | " + " | ".join(cells) + " |")
    doubles = [r[3] for r in sheet.rows if r[0].endswith(".double_owned_s")]
    lines += [
        "",
        f"Longest time any partition had two owners, over every phase: {fmt(max(doubles, default=0.0))} s.",
    ]
    return "\n".join(lines) + "\n"


def plot(sheet: Sheet, options: Options, path: Path) -> Path:
    from exactly.bench.plots import _pyplot

    plt = _pyplot()
    variants = [v for v in VARIANTS if v.name in options.variants]
    fig, axes = plt.subplots(len(options.sizes), 2, figsize=(12, 4 * len(options.sizes)), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for row, size in enumerate(options.sizes):
        for col, (measure, phases, label) in enumerate(
            (
                ("settle_s", list(Phase), "settle time (s)"),
                (
                    "stopped_partition_s",
                    [Phase.JOIN, Phase.LEAVE, Phase.KILL],
                    "partition-seconds not consumed",
                ),
            )
        ):
            ax = axes[row][col]
            for i, v in enumerate(variants):
                spreads = [spread(sheet.values(series(v.name, size, p, measure))) for p in phases]
                xs = [x + (i - (len(variants) - 1) / 2) * width for x in range(len(phases))]
                medians = [s.median for s in spreads]
                below = [s.median - s.low if s.n else 0.0 for s in spreads]
                above = [s.high - s.median if s.n else 0.0 for s in spreads]
                ax.bar(xs, medians, width=width, label=v.name, yerr=[below, above], capsize=3)
            ax.set_xticks(range(len(phases)))
            ax.set_xticklabels([PHASE_TITLES[p] for p in phases], fontsize=8)
            ax.set_ylabel(label)
            ax.set_title(
                f"N = {size}: {label}, median of {options.rounds} rounds (bars: min-max)", fontsize=9
            )
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def load_sheet(path: Path) -> Sheet:
    """A `Sheet` back from the CSV it wrote (to redraw the table and the plot from the raw figures)."""
    sheet = Sheet(SHEET)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            sheet.rows.append(
                (row["series"], int(row["run"]), int(row["index"]), float(row["value"]), row["unit"])
            )
    return sheet


def parse_options(argv: list[str] | None) -> tuple[Options, Path]:
    defaults = Options()
    parser = argparse.ArgumentParser(prog="python -m exactly.bench.rebalance")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(defaults.sizes))
    parser.add_argument("--partitions", type=int, default=defaults.partitions)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--session-ms", type=int, default=defaults.session_ms)
    parser.add_argument("--heartbeat-ms", type=int, default=defaults.heartbeat_ms)
    parser.add_argument("--quiet-s", type=float, default=defaults.quiet_s)
    parser.add_argument("--timeout-s", type=float, default=defaults.timeout_s)
    parser.add_argument("--initial-delay-ms", type=int, default=defaults.initial_delay_ms)
    parser.add_argument(
        "--variants", nargs="+", default=list(defaults.variants), choices=[v.name for v in VARIANTS]
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--out", type=Path, default=Path("bench/rebalance"))
    args = parser.parse_args(argv)
    options = Options(
        sizes=tuple(args.sizes),
        partitions=args.partitions,
        rounds=args.rounds,
        session_ms=args.session_ms,
        heartbeat_ms=args.heartbeat_ms,
        quiet_s=args.quiet_s,
        timeout_s=args.timeout_s,
        initial_delay_ms=args.initial_delay_ms,
        variants=tuple(args.variants),
        seed=args.seed,
    )
    return options, args.out


def machine_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} CPUs; load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min)"


def main(argv: list[str] | None = None) -> Sheet:
    options, out = parse_options(argv)
    command = f"exactly bench rebalance {' '.join(options.argv())} --out {out}"
    print(command, flush=True)
    at_start = machine_line()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="exactly-bench-rebalance-") as tmp:
        outcomes = measure(options, Path(tmp), progress=lambda line: print(line, flush=True))
    machine = f"Machine at the start: {at_start}; at the end: {machine_line()}; the run took "
    machine += f"{time.monotonic() - began:.0f} s."
    sheet = Sheet(SHEET)
    fill_sheet(outcomes, sheet)
    out.mkdir(parents=True, exist_ok=True)
    raw = sheet.write(out)
    table = out / "rebalance.md"
    table.write_text(markdown(sheet, options, command, machine))
    png = plot(sheet, options, out / "rebalance.png")
    print(table.read_text())
    print(f"wrote {raw}, {table} and {png}")
    return sheet


if __name__ == "__main__":
    main()
