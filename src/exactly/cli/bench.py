"""`exactly bench ...`: the benchmarks, each printing medians next to the machine's own bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Run a benchmark.")

# A benchmark with its own argparse options: the command passes everything after its name to it (and
# `--help` lists them).
_PASS_THROUGH: dict[str, Any] = {
    "context_settings": {"allow_extra_args": True, "ignore_unknown_options": True},
    "add_help_option": False,
}


@app.command()
def broker(
    records: Annotated[int, typer.Option(help="records to produce (1 KiB each)")] = 1_000_000,
    producers: Annotated[int, typer.Option(help="producer processes")] = 2,
    bootstrap_server: Annotated[
        str | None, typer.Option(help="an existing broker; default: start one")
    ] = None,
) -> None:
    """Produce and consume through the broker (confluent-kafka, 6 partitions, 1 KiB records)."""
    from exactly.bench import broker as bench

    argv = ["--records", str(records), "--producers", str(producers)]
    if bootstrap_server:
        argv += ["--bootstrap-server", bootstrap_server]
    bench.main(argv)


@app.command()
def tls(
    records: Annotated[int, typer.Option(help="records per run (1 KiB each)")] = 300_000,
    producers: Annotated[int, typer.Option(help="producer processes")] = 2,
    rounds: Annotated[int, typer.Option(help="rounds of each listener (interleaved)")] = 3,
) -> None:
    """Produce throughput over mutual TLS vs plaintext, on one broker (medians, ratio; target >= 0.7)."""
    from exactly.bench import tls as bench

    bench.main(["--records", str(records), "--producers", str(producers), "--rounds", str(rounds)])


@app.command()
def metrics(
    records: Annotated[int, typer.Option(help="records per run (1 KiB each)")] = 200_000,
    producers: Annotated[int, typer.Option(help="producer processes")] = 2,
    rounds: Annotated[int, typer.Option(help="rounds of each broker (interleaved)")] = 3,
    partitions: Annotated[str, typer.Option(help="partition counts to scrape at")] = "1000,10000",
) -> None:
    """Produce throughput with metrics on vs off (ratio; target >= 0.97); scrape time and size (issue 26)."""
    from exactly.bench import metrics as bench

    argv = ["--records", str(records), "--producers", str(producers), "--rounds", str(rounds)]
    bench.main([*argv, "--partitions", partitions])


@app.command()
def scale(
    topics: Annotated[int, typer.Option(help="topics to create")] = 100,
    partitions_per_topic: Annotated[int, typer.Option(help="partitions of each topic")] = 100,
    nofile: Annotated[int, typer.Option(help="the broker's open-file limit")] = 20_000,
    connections: Annotated[int, typer.Option(help="idle connections held open")] = 1000,
    librdkafka_max: Annotated[
        int, typer.Option(help="measure librdkafka's one-record-per-partition produce up to this many")
    ] = 20_000,
) -> None:
    """Many partitions and connections on one broker: create, Metadata, produce, restart, RSS (issue 14)."""
    from exactly.bench import scale as bench

    argv = ["--topics", str(topics), "--partitions-per-topic", str(partitions_per_topic)]
    argv += ["--nofile", str(nofile), "--connections", str(connections)]
    bench.main([*argv, "--librdkafka-max", str(librdkafka_max)])


@app.command()
def acls(
    records: Annotated[int, typer.Option(help="records per run (1 KiB each)")] = 300_000,
    producers: Annotated[int, typer.Option(help="producer processes")] = 2,
    rounds: Annotated[int, typer.Option(help="runs per broker (medians compared)")] = 3,
) -> None:
    """Produce throughput with the authorizer on and 1,000 ACLs versus off (issue 13)."""
    from exactly.bench import acls as bench

    bench.main(["--records", str(records), "--producers", str(producers), "--rounds", str(rounds)])


@app.command()
def sasl(
    connections: Annotated[int, typer.Option(help="connections per kind (interleaved)")] = 300,
    iterations: Annotated[int, typer.Option(help="SCRAM iterations of the user")] = 4096,
) -> None:
    """Connection setup time over SASL (PLAIN, SCRAM-SHA-256/512) vs PLAINTEXT: p50 and p99."""
    from exactly.bench import sasl as bench

    bench.main(["--connections", str(connections), "--iterations", str(iterations)])


@app.command()
def security(
    records: Annotated[int, typer.Option(help="records per produce run (1 KiB each)")] = 300_000,
    producers: Annotated[int, typer.Option(help="producer processes")] = 2,
    rounds: Annotated[int, typer.Option(help="rounds (each: a TLS pair, an ACL pair, SASL connections)")] = 5,
    connections: Annotated[int, typer.Option(help="SASL connections per kind per round")] = 100,
    acls: Annotated[int, typer.Option(help="ACLs of the authorizer-on broker")] = 1000,
) -> None:
    """Issue 13's figures in one run: TLS/plaintext produce, SASL/SCRAM setup p50, 1,000-ACL overhead."""
    from exactly.bench import security as bench

    argv = ["--records", str(records), "--producers", str(producers), "--rounds", str(rounds)]
    bench.main([*argv, "--connections", str(connections), "--acls", str(acls)])


@app.command()
def txn(
    seconds: Annotated[float, typer.Option(help="length of each throughput round")] = 10.0,
    rounds: Annotated[int, typer.Option(help="throughput rounds of each mode (interleaved)")] = 3,
    producers: Annotated[int, typer.Option(help="producer processes for throughput")] = 1,
    warmup_seconds: Annotated[float, typer.Option(help="unmeasured idempotent round first (0: none)")] = 5.0,
    commits: Annotated[int, typer.Option(help="one-record transactions per latency run")] = 500,
    visibility_commits: Annotated[int, typer.Option(help="transactions per visibility run")] = 300,
    fetch_wait_ms: Annotated[int, typer.Option(help="fetch.wait.max.ms of the visibility consumer")] = 5,
    runs: Annotated[int, typer.Option(help="runs of the latency, visibility and ids phases")] = 3,
    ids: Annotated[int, typer.Option(help="concurrent transactional ids")] = 1000,
    ids_processes: Annotated[int, typer.Option(help="processes driving the ids")] = 4,
    ids_seconds: Annotated[float, typer.Option(help="length of each ids run")] = 10.0,
    versions_commits: Annotated[
        int, typer.Option(help="transactions per transaction-version-2-vs-1 run (0: skip)")
    ] = 300,
) -> None:
    """Transactions: idempotent vs transactional throughput, commit latency, visibility, many ids,
    transaction version 2 vs 1."""
    from exactly.bench import txn as bench

    options = {
        "--seconds": seconds,
        "--rounds": rounds,
        "--producers": producers,
        "--warmup-seconds": warmup_seconds,
        "--commits": commits,
        "--visibility-commits": visibility_commits,
        "--fetch-wait-ms": fetch_wait_ms,
        "--runs": runs,
        "--ids": ids,
        "--ids-processes": ids_processes,
        "--ids-seconds": ids_seconds,
        "--versions-commits": versions_commits,
    }
    bench.main([item for name, value in options.items() for item in (name, str(value))])


@app.command()
def cluster(
    quick: Annotated[
        bool, typer.Option(help="tiny sizes, 2 kills, 2 controlled shutdowns (about 2 minutes)")
    ] = False,
    out: Annotated[Path, typer.Option(help="directory of raw/cluster.csv and cluster.md")] = Path("bench"),
    records: Annotated[int | None, typer.Option(help="records per throughput run (1 KiB each)")] = None,
    rounds: Annotated[int | None, typer.Option(help="throughput rounds of each replication factor")] = None,
    kills: Annotated[int | None, typer.Option(help="kill -9 failovers")] = None,
    shutdowns: Annotated[int | None, typer.Option(help="controlled-shutdown failovers")] = None,
) -> None:
    """3 brokers + ZooKeeper: RF 3 vs RF 1 produce and CPU, failover (kill -9, SIGTERM), replica lag."""
    from exactly.bench import cluster as bench

    argv = ["--out", str(out), *(["--quick"] if quick else [])]
    for name, value in (
        ("--records", records),
        ("--rounds", rounds),
        ("--kills", kills),
        ("--shutdowns", shutdowns),
    ):
        if value is not None:
            argv += [name, str(value)]
    bench.main(argv)


@app.command("txn-cluster")
def txn_cluster(
    quick: Annotated[bool, typer.Option(help="20 ids, 2-s windows, 2 kills (about 1 minute)")] = False,
    out: Annotated[Path, typer.Option(help="directory of raw/txn_cluster.csv and txn_cluster.md")] = Path(
        "bench"
    ),
    ids: Annotated[int | None, typer.Option(help="transactional ids (default 1000)")] = None,
    processes: Annotated[int | None, typer.Option(help="worker processes (default 4)")] = None,
    threads: Annotated[int | None, typer.Option(help="threads per worker process (default 8)")] = None,
    warmup_seconds: Annotated[float | None, typer.Option(help="warm-up before the window (3 s)")] = None,
    seconds: Annotated[float | None, typer.Option(help="the measuring window (default 10)")] = None,
    rounds: Annotated[int | None, typer.Option(help="rounds of each target, interleaved (1)")] = None,
    kills: Annotated[int | None, typer.Option(help="coordinator kill -9 rounds (10)")] = None,
) -> None:
    """3 brokers vs 1: one-record transactions with 1,000 ids (p50, p99, commits/s), coordinator kill -9."""
    from exactly.bench import txn_cluster as bench

    argv = ["--out", str(out), *(["--quick"] if quick else [])]
    for name, value in (
        ("--ids", ids),
        ("--processes", processes),
        ("--threads", threads),
        ("--warmup-seconds", warmup_seconds),
        ("--seconds", seconds),
        ("--rounds", rounds),
        ("--kills", kills),
    ):
        if value is not None:
            argv += [name, str(value)]
    bench.main(argv)


@app.command()
def codec() -> None:
    """Protocol codec: Produce decode, Fetch encode, CRC throughput."""
    from exactly.bench import codec as bench

    bench.main()


@app.command()
def storage() -> None:
    """Storage engine: append (fsync on/off) against raw writes, reads, recovery."""
    from exactly.bench import storage as bench

    bench.main([])


@app.command(**_PASS_THROUGH)
def spark(ctx: typer.Context) -> None:
    """Spark pipeline: exactly-once vs at-least-once sink, batch read vs one consumer, commit-to-visible
    (--help lists the options)."""
    from exactly.bench import spark as bench

    bench.main(list(ctx.args))


@app.command()
def report(
    out: Annotated[Path, typer.Option(help="directory of REPORT.md, raw/*.csv and the PNG plots")] = Path(
        "bench"
    ),
    quick: Annotated[bool, typer.Option(help="tiny sizes (about 3 minutes), no Spark")] = False,
    peer_bootstrap: Annotated[
        str | None, typer.Option(help="also run the client benchmark against this running peer broker")
    ] = None,
    only: Annotated[str | None, typer.Option(help="comma-separated sections (default: all)")] = None,
) -> None:
    """Every benchmark in one run: REPORT.md with figures, machine bounds, ratios, plots, raw CSVs."""
    from exactly.bench import report as bench

    argv = ["--out", str(out)]
    if quick:
        argv.append("--quick")
    if peer_bootstrap:
        argv += ["--peer-bootstrap", peer_bootstrap]
    if only:
        argv += ["--only", only]
    code = bench.main(argv)
    if code:
        raise typer.Exit(code)


@app.command("spark-soak", **_PASS_THROUGH)
def spark_soak(ctx: typer.Context) -> None:
    """A long-running exactly-once streaming query: broker RSS, transactional ids, producer ids,
    decisions and __transaction_state size stay flat (issue 23; --help lists the options)."""
    from exactly.bench import spark_soak as bench

    bench.main(list(ctx.args))


@app.command(**_PASS_THROUGH)
def rebalance(ctx: typer.Context) -> None:
    """Consumer-group rebalance times, classic (range, cooperative-sticky) vs KIP-848, N = 3 and 10
    (--help lists the options)."""
    from exactly.bench import rebalance as bench

    bench.main(list(ctx.args))


@app.command(**_PASS_THROUGH)
def share(ctx: typer.Context) -> None:
    """Share-group consume throughput, 1 and 4 share consumers vs 1 and 4 consumers of a classic group
    on the same data, with an exactly-once check of the share deliveries (--help lists the options)."""
    from exactly.bench import share as bench

    bench.main(list(ctx.args))


@app.command(**_PASS_THROUGH)
def requests(ctx: typer.Context) -> None:
    """Broker CPU per small request (ApiVersions, Metadata of one topic, OffsetCommit, a one-record
    produce), exactly's client and confluent-kafka, serial on one connection (--help lists the options)."""
    from exactly.bench import requests as bench

    bench.main(list(ctx.args))
