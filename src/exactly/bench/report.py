"""`exactly bench report` (`make bench`): every benchmark in one run, one report beside its raw samples.

    exactly bench report [--out bench] [--quick] [--peer-bootstrap HOST:PORT] [--only a,b,...]

Writes, under --out:

    REPORT.md          the figures, each median with its spread over the rounds (min to max, n, ±), the
                       machine's bounds measured in the same run, ratios, peers, plots
    raw/<name>.csv     the raw samples of each benchmark (format: exactly.bench.figures)
    throughput.png     the broker section's timed rounds: produce and consume MB/s and the broker's CPU
                       (cores) in each second, one line per round, the warm-up shaded
    peers.png          exactly beside each peer broker (Tansu's memory broker when its binary is found):
                       MB/s and broker CPU s/GB, median bars with min-max whiskers
    section_<key>.png  every other section's figures as median bars with min-max whiskers
    latency.png        p50/p90/p99/p99.9 of each latency benchmark
    commit_cdf.png     transaction commit latency CDF against the fsync p50/p99

Sections, in order (each timed; a failing benchmark is reported as FAILED and the command exits 1
after writing the report): bounds, codec, storage, broker, txn, groups, cluster, spark, peers. Produce
and consume are timed rounds (`exactly.bench.rounds`: 3 s / 2 s of warm-up, then 10 s measured,
sampled per second, 3 rounds) with the broker process's CPU seconds per GB beside the MB/s; the
transaction workloads report the broker's CPU per commit. The full run takes about 25 minutes on 2
shared cores (cluster about 5: ten kill -9 failovers wait out a 6 s ZooKeeper session each; Spark
about 5; broker and peers about 2 each), --quick about 4 (Spark skipped, every other benchmark tiny,
one failover of each kind).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from exactly.bench import plan as plans
from exactly.bench import suite
from exactly.bench.figures import (
    Figure,
    Section,
    SectionStatus,
    Sheet,
    figure_table,
    fmt,
    percentile,
    with_spread,
)
from exactly.bench.machine import DROP_BEHIND_WINDOW, Machine, describe_machine, git_commit
from exactly.bench.peers import PeerProcess, find_peers
from exactly.bench.rounds import SAMPLE_EVERY

SECTIONS = (
    "bounds", "codec", "storage", "broker", "dropbehind", "txn", "groups", "cluster", "spark", "peers",
)  # fmt: skip
TITLES = {
    "bounds": "Machine bounds",
    "codec": "Protocol codec",
    "storage": "Storage engine",
    "broker": "Broker: produce and consume",
    "dropbehind": "Broker with page cache drop-behind",
    "txn": "Transactions",
    "groups": "Consumer groups",
    "cluster": "Cluster: replication and failover",
    "spark": "Spark",
    "peers": "Peer brokers",
}
PLOTS = {
    "throughput": "throughput.png",
    "throughput_dropbehind": "throughput_dropbehind.png",
    "peers": "peers.png",
    "latency": "latency.png",
    "commit_cdf": "commit_cdf.png",
    **{
        f"section_{key}": f"section_{key}.png"
        for key in SECTIONS
        if key not in ("broker", "dropbehind", "peers")
    },
}
# The plots shown under each section (all of them are also listed under "Plots").
SECTION_PLOTS = {
    "broker": ("throughput",),
    "dropbehind": ("throughput_dropbehind",),
    "peers": ("peers",),
    "txn": ("commit_cdf", "section_txn"),
    **{key: (f"section_{key}",) for key in SECTIONS if key not in ("broker", "dropbehind", "peers", "txn")},
}


@dataclass(frozen=True, slots=True)
class Options:
    out: Path
    quick: bool
    peer_bootstrap: str | None
    only: tuple[str, ...]

    @property
    def command(self) -> str:
        parts = ["exactly bench report", f"--out {self.out}"]
        if self.quick:
            parts.append("--quick")
        if self.peer_bootstrap:
            parts.append(f"--peer-bootstrap {self.peer_bootstrap}")
        if self.only != SECTIONS:
            parts.append("--only " + ",".join(self.only))
        return " ".join(parts)


class Run:
    """The state of one report run: sheets, sections, the bounds found so far."""

    def __init__(self, options: Options, work: Path) -> None:
        self.options = options
        self.plan = plans.QUICK if options.quick else plans.FULL
        self.work = work
        self.sheets: dict[str, Sheet] = {}
        self.sections: list[Section] = []
        self.bounds = plans.BoundFigures()
        self.peer_names: dict[str, str] = {}  # sheet name -> product

    def sheet(self, name: str) -> Sheet:
        return self.sheets.setdefault(name, Sheet(name))

    def section(
        self, key: str, command: str, body: Callable[[Sheet], tuple[list[Figure], list[str]]]
    ) -> None:
        if key not in self.options.only:
            self.sections.append(
                Section(key, TITLES[key], SectionStatus.SKIPPED, 0.0, command, notes=("not in --only",))
            )
            return
        print(f"\n=== {TITLES[key]}: {command}", flush=True)
        started = time.monotonic()
        sheet = self.sheet(key)
        try:
            figures, notes = body(sheet)
            status = SectionStatus.DONE
        except Exception as e:  # noqa: BLE001 (reported as FAILED; the command exits 1 at the end)
            traceback.print_exc()
            figures, notes = [], [f"FAILED: {type(e).__name__}: {e}"]
            status = SectionStatus.FAILED
        seconds = time.monotonic() - started
        figures = [with_spread(f, sheet) for f in figures]  # benchmarks that build figures by hand
        print(f"=== {TITLES[key]}: {status.value} in {seconds:.0f} s", flush=True)
        sheets = (sheet.file,) if sheet.rows else ()
        self.sections.append(
            Section(key, TITLES[key], status, seconds, command, tuple(figures), tuple(notes), sheets)
        )

    def skip(self, key: str, command: str, why: str) -> None:
        self.sections.append(Section(key, TITLES[key], SectionStatus.SKIPPED, 0.0, command, notes=(why,)))


def run_all(run: Run) -> None:
    plan, work = run.plan, run.work

    def bounds(sheet: Sheet) -> tuple[list[Figure], list[str]]:
        figures, run.bounds, notes = suite.run_bounds(plan, work, sheet)
        return figures, notes

    run.section("bounds", "exactly.bench.machine.measure_bounds", bounds)
    run.section(
        "codec",
        f"exactly.bench.codec.measure(repeat={plan.codec_repeat}, min_time={plan.codec_min_time})",
        lambda sheet: (suite.run_codec(plan, sheet), ["CPU time of this thread per call, median over runs."]),
    )
    run.section(
        "storage",
        f"exactly.bench.storage measure_appends(total_mib={plan.storage_total_mib}) + "
        f"measure_reads_and_recovery(mib={plan.storage_recovery_mib}), runs={plan.storage_runs}",
        lambda sheet: (suite.run_storage(plan, sheet, run.bounds), []),
    )
    run.section(
        "broker",
        f"exactly.bench.broker paced_latency({plan.paced_mb_s:g} MB/s, {plan.paced_seconds:g} s) + "
        f"{plan.broker_rounds} x (produce_round(producers={plan.broker_producers}, "
        f"warmup={plan.broker_warmup_s} s, {plan.broker_seconds} s) + consume_round(consumers="
        f"{plan.broker_consumers}, warmup={plan.consume_warmup_s} s, {plan.consume_seconds} s))",
        lambda sheet: suite.run_broker(plan, work, sheet, run.bounds),
    )
    run.section(
        "dropbehind",
        f"the broker section's benchmark, broker setting exactly.log.drop.behind.bytes={DROP_BEHIND_WINDOW}",
        lambda sheet: suite.run_drop_behind(plan, work, sheet, run.bounds),
    )
    run.section(
        "txn",
        "exactly bench txn " + " ".join(plan.txn_argv),
        lambda sheet: (suite.run_txn(plan, sheet, run.bounds), []),
    )
    run.section(
        "groups",
        f"exactly.bench.groups.measure(members={list(plan.group_members)}, rounds={plan.group_rounds}, "
        f"committers={plan.group_committers}, commit_seconds={plan.group_commit_seconds:g}, "
        f"load_records={plan.group_load_records}, skip_clients={plan.group_skip_clients})",
        lambda sheet: (suite.run_groups(plan, sheet, run.bounds), []),
    )
    cluster_command = "exactly bench cluster " + " ".join(plan.cluster_argv)
    cluster_missing = suite.cluster_available()
    if cluster_missing is not None:
        run.skip("cluster", cluster_command, f"skipped: {cluster_missing}")
    else:
        run.section("cluster", cluster_command, lambda sheet: suite.run_cluster(plan, sheet))
    spark_command = (
        f"exactly bench spark --size-mib {plan.spark_size_mib:g} --rounds {plan.spark_rounds} "
        f"--seconds {plan.spark_seconds:g} --warmup-seconds {plan.spark_warmup_seconds:g} "
        f"--read-runs {plan.spark_read_runs}"
    )
    missing = suite.spark_available()
    if not plan.spark:
        run.skip("spark", spark_command, "skipped: --quick (the full run measures it: about 3 minutes)")
    elif missing is not None and "spark" in run.options.only:
        run.skip("spark", spark_command, f"skipped: {missing}")
    else:
        run.section("spark", spark_command, lambda sheet: suite.spark_section(plan, sheet, run.bounds))
    run.section(
        "peers", "find_peers() on PATH; the broker section's client benchmark", lambda s: peers(run, s)
    )


def peers(run: Run, sheet: Sheet) -> tuple[list[Figure], list[str]]:
    """Run the broker section's client benchmark against every peer that can be reached, Tansu's memory
    broker included when its binary is found (else the note says why it is missing)."""
    from exactly.bench.peers import PEER_BINARIES, TANSU_HOW, find_tansu, start_peer

    found = find_peers()
    notes: list[str] = []
    figures: list[Figure] = []
    if not any(Path(p.binary).name == "tansu" for p in found):
        tansu = find_tansu()
        if tansu is not None:
            found.append(tansu)
        else:
            reason = f"Tansu skipped: no binary found ({TANSU_HOW})."
            print(reason, flush=True)
            notes.append(reason)
    targets: list[tuple[str, str, PeerProcess | None]] = []
    if not found and run.options.peer_bootstrap is None:
        looked = ", ".join(f"`{b}`" for b, _ in PEER_BINARIES)
        notes.append(f"no peer broker found on PATH (looked for {looked}); no --peer-bootstrap given.")
        return [], notes
    for peer in found:
        if peer.can_start:
            directory = run.work / f"peer-{len(targets)}"
            directory.mkdir(parents=True)
            targets.append((peer.product, "", start_peer(peer, directory)))
        else:
            notes.append(
                f"found {peer.product} at `{peer.binary}`: the report cannot start it; run it and pass "
                "`--peer-bootstrap HOST:PORT`."
            )
    if run.options.peer_bootstrap:
        targets.append((f"peer at {run.options.peer_bootstrap}", run.options.peer_bootstrap, None))
    ours = {f.key.removeprefix("broker."): f for s in run.sections if s.key == "broker" for f in s.figures}
    for number, (product, bootstrap, process) in enumerate(targets):
        peer_sheet = run.sheet(f"peer{number}")
        pid = None
        try:
            if process is not None:
                started = process.start()
                bootstrap, pid = started.bootstrap, started.pid
            theirs = suite.client_benchmark(
                run.plan, bootstrap, peer_sheet, run.bounds, f"peer{number}", pid, check_growth=False
            )
        finally:
            if process is not None:
                process.stop()
        for figure in theirs:
            mine = ours.get(figure.key.split(".", 1)[1])
            versus = plans.times(mine.value, figure.value, f"{product} (exactly / peer)") if mine else ""
            figures.append(replace(figure, label=f"{product}: {figure.label}", versus=versus))
        run.peer_names[f"peer{number}"] = product
        cpu = "its CPU from /proc" if pid is not None else "no CPU figures (its process is not ours)"
        notes.append(
            f"{product} (`raw/peer{number}.csv`): the broker section's client benchmark, same parameters, "
            f"same run; {cpu}."
        )
    if any("Tansu" in product for product, _, _ in targets):
        notes.append(
            "Tansu runs with its memory storage engine: it keeps the bytes in RAM and never fsyncs, while "
            "exactly writes every batch to its log and fsyncs before acks=all is answered. The ratio "
            "column is exactly / peer (above 1: exactly is faster or, for CPU per GB, costs more). "
            f"The produce rounds give one record in {SAMPLE_EVERY} a delivery report; against exactly they "
            "also check that the topic grew by every record delivered. Not against Tansu: its latest offsets "
            "(ListOffsets) stay behind what it acknowledged and serves (2,000,000 records acknowledged and "
            "all read back, no gaps; their partitions' latest offsets summed to 1,997,944)."
        )
    return figures, notes


# --- plots and the markdown ---------------------------------------------------------------------------------


def _plot_inputs(run: Run) -> dict[str, str]:
    """Draw the plots that have data; returns plot name -> what it was drawn from."""
    from exactly.bench import plots

    out = run.options.out
    made: dict[str, str] = {}
    for name, key, writer, writer_label, what in (
        ("throughput", "broker", "sustained_write", "sustained writer", "exactly"),
        (
            "throughput_dropbehind",
            "dropbehind",
            "drop_behind_write",
            "drop-behind writer",
            "exactly, drop-behind",
        ),
    ):
        drawn = _throughput_plot(run, out / PLOTS[name], key, (writer, writer_label), what)
        if drawn is not None:
            made[name] = drawn
    sections = {s.key: s for s in run.sections}
    peer_section = sections.get("peers")
    if peer_section is not None and peer_section.figures and "broker" in sections:
        ours = {f.key.split(".", 1)[1]: f for f in sections["broker"].figures}
        metrics = []
        for name, title in (
            ("produce_mb_s", "produce MB/s"),
            ("consume_mb_s", "consume MB/s"),
            ("produce_cpu_s_per_gb", "broker CPU s per GB produced"),
            ("consume_cpu_s_per_gb", "broker CPU s per GB read"),
        ):
            entries = [("exactly", ours[name])] if name in ours else []
            for peer_sheet, product in run.peer_names.items():
                entries += [
                    (product.split(" (")[0], f)
                    for f in peer_section.figures
                    if f.key == f"{peer_sheet}.{name}" and not math.isnan(f.value)
                ]
            if len(entries) > 1:
                metrics.append((title, entries))
        if metrics:
            plots.comparison_plot(out / PLOTS["peers"], metrics, "exactly beside its peers (median, min-max)")
            made["peers"] = "the Broker and Peer brokers tables (medians; whiskers: min to max over rounds)"
    for key, section in sections.items():
        name = f"section_{key}"
        if name in PLOTS and section.figures:
            plots.section_plot(out / PLOTS[name], section.figures, f"{section.title} (median, min-max)")
            made[name] = f"the {section.title} table (medians; whiskers: min to max over rounds)"
    latencies = []
    for label, name, series in suite.latency_series():
        sheet = run.sheets.get(name)
        values = sheet.values(series) if sheet else []
        if values:
            latencies.append((label, values))
    if latencies:
        plots.latency_plot(out / PLOTS["latency"], latencies, "latency percentiles (all runs pooled)")
        made["latency"] = "the series of the Latency percentiles table"
    txn = run.sheets.get("txn")
    if txn is not None and txn.values("commit_ms") and not math.isnan(run.bounds.fsync_p50_ms):
        commits = [
            ("commit_transaction()", txn.values("commit_ms")),
            ("commit_transaction() after flush() (EndTxn)", txn.values("end_txn_ms")),
        ]
        plots.commit_cdf_plot(
            out / PLOTS["commit_cdf"],
            commits,
            run.bounds.fsync_p50_ms,
            run.bounds.fsync_p99_ms,
            "one-record transaction commit latency vs the fsync bound",
        )
        made["commit_cdf"] = (
            "`raw/txn.csv` series `commit_ms`, `end_txn_ms`; lines: `raw/bounds.csv` `fsync_4k_ms` p50/p99"
        )
    return made


def _throughput_plot(run: Run, path: Path, key: str, writer: tuple[str, str], what: str) -> str | None:
    """Per-second MB/s and broker cores of section `key`'s rounds, the bounds' writer (series prefix,
    label: the kernel alone, same length and same bytes per write) above them; returns what it was drawn
    from."""
    from exactly.bench import plots

    broker = run.sheets.get(key)
    if broker is None or not broker.runs("produce_window_mb_s"):
        return None
    plan = run.plan
    panels = [
        ("produce MB/s", _per_round(broker, "produce_window_mb_s")),
        ("consume MB/s", _per_round(broker, "consume_window_mb_s")),
        ("broker CPU, produce (cores)", _per_round(broker, "produce_broker_cores")),
        ("broker CPU, consume (cores)", _per_round(broker, "consume_broker_cores")),
    ]
    warmups = [plan.broker_warmup_s, plan.consume_warmup_s, plan.broker_warmup_s, plan.consume_warmup_s]
    sources = f"`raw/{key}.csv` series `produce_window_mb_s`, `consume_window_mb_s`, `produce_broker_cores`, "
    bounds = run.sheets.get("bounds")
    series, label = f"{writer[0]}_window_mb_s", writer[1]
    if bounds is not None and bounds.runs(series):
        panels.insert(1, (f"{label} MB/s (no broker)", _per_round(bounds, series)))
        warmups.insert(1, plan.broker_warmup_s)
        sources = f"`raw/bounds.csv` series `{series}`; " + sources
    plots.timeline_plot(
        path,
        panels,
        warmups,
        f"{what}: {plan.broker_rounds} timed rounds, MB/s and broker CPU in each second",
    )
    return sources + "`consume_broker_cores` (run = round, index = second since the round began)"


def _per_round(sheet: Sheet, series: str) -> list[list[tuple[float, float]]]:
    rows = [r for r in sheet.rows if r[0] == series]
    return [[(float(i), v) for _, r, i, v, _ in rows if r == n] for n in sorted({r[1] for r in rows})]


def _figure_table(figures: tuple[Figure, ...] | list[Figure]) -> list[str]:
    return figure_table(figures)


def render(
    run: Run,
    machine: Machine,
    load: tuple[tuple[float, ...], tuple[float, ...]],
    meta: dict[str, str],
    plots_made: dict[str, str],
) -> str:
    o = run.options
    lines = [
        "# exactly: benchmark report",
        "",
        f"Produced by `{o.command}` (`make bench` runs `exactly bench report --out bench`) on "
        f"{meta['started']} from commit `{meta['commit']}` in {meta['seconds']} s."
        + (" **--quick run: tiny sizes, for the test; not the published figures.**" if o.quick else ""),
        "",
        "Every figure names the CSV under `raw/` it was computed from, the series and the statistic "
        "(CSV columns `series,run,index,value,unit`, one row per sample; percentiles are nearest-rank: "
        "`sorted(values)[min(n - 1, int(q * n))]`; medians are `statistics.median`). Ratios compare a "
        "figure with the machine's own bounds measured at the start of the same run. The machine is "
        "shared with other work: see the load average; noisy figures are medians over rounds.",
        "",
        "## Summary",
        "",
    ]
    headline = [f for s in run.sections for f in s.figures if f.key in HEADLINE]
    lines += _figure_table(headline) if headline else ["(no figures: every section failed or was skipped)"]
    lines += ["", "## Machine", ""]
    lines += [
        f"- CPU: {machine.cpu_model}, {machine.cores} cores; memory {machine.memory_gib:.1f} GiB",
        f"- kernel: {machine.kernel}",
        f"- load average (1, 5, 15 min) at start: {', '.join(f'{x:.2f}' for x in load[0])}; "
        f"at end: {', '.join(f'{x:.2f}' for x in load[1])}",
        f"- Python {machine.python}; java: {machine.java}",
        "- client libraries: " + ", ".join(f"{n} {v}" for n, v in machine.libraries),
    ]
    for section in run.sections:
        lines += ["", f"## {section.title}", ""]
        took = f" in {section.seconds:.0f} s" if section.status is not SectionStatus.SKIPPED else ""
        lines.append(
            f"{section.status.value}{took}; `{section.command}`"
            + (f"; raw samples: {', '.join(f'`{s}`' for s in section.sheets)}" if section.sheets else "")
        )
        lines.append("")
        lines += [f"{note}" for note in section.notes]
        if section.notes:
            lines.append("")
        if section.figures:
            lines += _figure_table(section.figures)
        for name in SECTION_PLOTS.get(section.key, ()):
            if name in plots_made:
                lines += ["", f"![{name}]({PLOTS[name]})"]
    lines += ["", "## Latency percentiles", ""]
    lines += [
        "| benchmark | samples | p50 ms | p90 ms | p99 ms | p99.9 ms | computed from |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for label, name, series in suite.latency_series():
        sheet = run.sheets.get(name)
        values = sheet.values(series) if sheet else []
        if sheet is not None and values:
            cells = " | ".join(fmt(percentile(values, q)) for q in (0.5, 0.9, 0.99, 0.999))
            lines.append(f"| {label} | {len(values)} | {cells} | `{sheet.file}` `{series}`, all runs |")
    lines += ["", "## Plots", ""]
    for name, file in PLOTS.items():
        if name in plots_made:
            lines += [f"![{name}]({file})", "", f"`{file}`: from {plots_made[name]}.", ""]
        else:
            lines += [f"`{file}`: not drawn (no samples).", ""]
    lines += ["## Raw data", ""]
    for sheet in run.sheets.values():
        if sheet.rows:
            names = sorted({r[0] for r in sheet.rows})
            lines.append(
                f"- `{sheet.file}`: {len(sheet.rows)} rows; series " + ", ".join(f"`{n}`" for n in names)
            )
    lines.append("")
    return "\n".join(lines)


HEADLINE = {
    "bounds.fsync_p50_ms",
    "bounds.seq_write_fsync_mb_s",
    "bounds.sustained_write_mb_s",
    "bounds.loopback_mb_s",
    "broker.produce_mb_s",
    "broker.paced_latency_p50_ms",
    "broker.consume_mb_s",
    "txn.transactional_mb_s",
    "txn.commit_p50_ms",
    "txn.commit_p99_ms",
    "txn.ids_commits_s",
    "groups.offset_commit_requests_s",
    "storage.append_1024k_fsync_on_mb_s",
    "spark.stream_exactly_once_records_s",
    "cluster.rf3_over_rf1",
    "cluster.kill_failover_p50_s",
    "cluster.controlled_failover_p50_s",
}


def report(options: Options) -> int:
    started = datetime.now(UTC)
    begin = time.monotonic()
    load_start = os.getloadavg()
    machine = describe_machine()
    out = options.out
    (out / "raw").mkdir(parents=True, exist_ok=True)
    for stale in [*(out / "raw").glob("*.csv"), *(out / p for p in PLOTS.values())]:
        stale.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-report-") as tmp:
        run = Run(options, Path(tmp))
        run_all(run)
    for sheet in run.sheets.values():
        if sheet.rows:
            sheet.write(out)
    plots_made = _plot_inputs(run)
    meta = {
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(Path(__file__).parent),
        "seconds": f"{time.monotonic() - begin:.0f}",
    }
    text = render(run, machine, (load_start, os.getloadavg()), meta, plots_made)
    (out / "REPORT.md").write_text(text)
    failed = [s.title for s in run.sections if s.status is SectionStatus.FAILED]
    print(f"\nwrote {out / 'REPORT.md'} in {meta['seconds']} s" + (f"; FAILED: {failed}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exactly bench report", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes (about 3 minutes), no Spark")
    parser.add_argument("--peer-bootstrap", default=None, help="also benchmark a running peer broker")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections to run")
    args = parser.parse_args(argv)
    only = tuple(s for s in args.only.split(",") if s)
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    return report(Options(args.out, args.quick, args.peer_bootstrap, only))


if __name__ == "__main__":
    sys.exit(main())
