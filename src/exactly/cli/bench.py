"""`exactly bench ...`: the benchmarks, each printing medians next to the machine's own bounds."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Run a benchmark.")


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
def txn(
    seconds: Annotated[float, typer.Option(help="length of each throughput round")] = 10.0,
    rounds: Annotated[int, typer.Option(help="throughput rounds of each mode")] = 3,
    commits: Annotated[int, typer.Option(help="transactions for the latency figures")] = 500,
    ids: Annotated[int, typer.Option(help="concurrent transactional ids")] = 1000,
    ids_seconds: Annotated[float, typer.Option(help="how long the transactional ids commit")] = 15.0,
) -> None:
    """Transactions: idempotent vs transactional throughput, commit latency, visibility, many ids."""
    from exactly.bench import txn as bench

    bench.main(
        [
            "--seconds",
            str(seconds),
            "--rounds",
            str(rounds),
            "--commits",
            str(commits),
            "--ids",
            str(ids),
            "--ids-seconds",
            str(ids_seconds),
        ]
    )


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
