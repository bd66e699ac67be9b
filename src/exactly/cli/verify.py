"""`exactly verify run`: the verification harness (`exactly.verify.runner`) from the command line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from exactly.cli.common import CliError, reported_errors

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Verify the broker under faults.")


@app.command()
def run(
    duration: Annotated[
        float, typer.Option(help="seconds of workload under faults (then the final phase)")
    ] = 600.0,
    seed: Annotated[int | None, typer.Option(help="the seed of the fault schedule and workloads")] = None,
    workloads: Annotated[
        str, typer.Option(help="comma-separated: queue,copier,bank,zombie,idem,spark (spark: a Spark driver)")
    ] = "queue,copier,bank,zombie,idem",
    faults: Annotated[
        str,
        typer.Option(
            help="comma-separated fault families (broker,client,disk,proxy,cluster) or kinds (broker-kill, "
            "...); default broker,client,disk,proxy, with --brokers N >= 3 broker,client,proxy,cluster"
        ),
    ] = "",
    out: Annotated[Path | None, typer.Option(help="the run directory (default verify-runs/seed-N)")] = None,
    txn_timeout_ms: Annotated[int, typer.Option(help="the workers' transaction.timeout.ms")] = 10_000,
    fault_interval: Annotated[
        str, typer.Option(help="MIN,MAX seconds between faults (then a quiet period of MIN/2)")
    ] = "5,15",
    brokers: Annotated[
        int,
        typer.Option(
            help="1: one broker behind the fault proxy; N >= 3: a ZooKeeper and N brokers (RF 3, min ISR 2)"
            " with the cluster's faults"
        ),
    ] = 1,
) -> None:
    """Run the workloads against a real broker under a seeded fault schedule, then check the history.

    Exits 0 when every invariant held (0 anomalies), 1 otherwise."""
    from exactly.verify.nemesis import CLUSTER, DISK, FAMILIES, Schedule
    from exactly.verify.runner import ALL_WORKLOADS, Run, RunConfig, RunError, format_summary

    with reported_errors():
        seed = seed if seed is not None else int(time.time()) % 100_000
        chosen = tuple(w for w in workloads.split(",") if w)
        unknown = [w for w in chosen if w not in ALL_WORKLOADS]
        if unknown:
            raise CliError(f"unknown workload {unknown[0]!r} (known: {', '.join(ALL_WORKLOADS)})", 2)
        if brokers != 1 and brokers < 3:
            raise CliError(f"--brokers is 1 or at least 3 (replication factor 3), not {brokers}", 2)
        if not faults:
            faults = "broker,client,disk,proxy" if brokers == 1 else "broker,client,proxy,cluster"
        kinds = {k for family in FAMILIES.values() for k in family}
        fault_names = tuple(f for f in faults.split(",") if f)
        bad = [f for f in fault_names if f not in FAMILIES and f not in kinds]
        if bad:
            raise CliError(f"unknown fault {bad[0]!r} (families: {', '.join(FAMILIES)}; or a kind)", 2)
        unfit = ("cluster", *CLUSTER) if brokers == 1 else ("disk", *DISK)
        misplaced = [f for f in fault_names if f in unfit]
        if misplaced:
            needs = "--brokers N >= 3" if brokers == 1 else "--brokers 1"
            raise CliError(f"fault {misplaced[0]!r} needs {needs}", 2)
        try:
            low, high = (float(x) for x in fault_interval.split(","))
        except ValueError:
            raise CliError(f"--fault-interval wants MIN,MAX seconds, not {fault_interval!r}", 2) from None
        out_dir = out or Path("verify-runs") / f"seed-{seed}"
        if out_dir.exists() and any(out_dir.iterdir()):
            raise CliError(f"{out_dir} is not empty: give another --out", 2)
        config = RunConfig(
            out=out_dir,
            duration=duration,
            seed=seed,
            workloads=chosen,
            faults=fault_names,
            txn_timeout_ms=txn_timeout_ms,
            schedule=Schedule(low, high, low / 2),
            brokers=brokers,
        )
        cluster = f", {brokers} brokers" if brokers > 1 else ""
        typer.echo(f"exactly verify: seed {seed}, {duration:g} s{cluster}, run dir {out_dir}")
        try:
            summary = Run(config).execute()
        except RunError as e:
            raise CliError(f"{e} (seed {seed}, run dir {out_dir})") from None
        typer.echo(format_summary(summary))
        if not summary["ok"]:
            raise typer.Exit(1)
