"""The sizes of `exactly bench report`'s two runs, and the helpers its figures are made with.

`FULL` is `make bench` (about 14 minutes on 2 quiet cores, 25-30 on loaded ones); `QUICK` is `--quick`
(about 4 minutes: Spark skipped, every other benchmark tiny), which the test runs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from exactly.bench import spark as spark_defaults
from exactly.bench.figures import NO_SPREAD, Figure, Sheet, Stat

MB = 1e6


@dataclass(frozen=True, slots=True)
class Plan:
    fsyncs: int
    seq_write_mib: int
    loopback_mib: int
    bound_rounds: int
    codec_repeat: int
    codec_min_time: float
    storage_total_mib: int
    storage_recovery_mib: int
    storage_runs: int
    broker_rounds: int
    broker_warmup_s: int  # unmeasured seconds at the start of each produce round
    broker_seconds: int  # measured seconds of each produce round
    consume_warmup_s: int
    consume_seconds: int
    broker_producers: int
    broker_consumers: int
    paced_mb_s: float
    paced_seconds: float
    txn_argv: tuple[str, ...]
    group_members: tuple[int, ...]
    group_rounds: int
    group_committers: int
    group_commit_seconds: float
    group_load_records: int
    group_skip_clients: bool
    spark: bool
    spark_size_mib: float
    spark_rounds: int
    spark_seconds: float
    spark_warmup_seconds: float
    spark_read_runs: int
    cluster_argv: tuple[str, ...]  # `exactly bench cluster` options ("--out" is the report's)


FULL_TXN_ARGV = (
    "--seconds", "10", "--rounds", "3", "--producers", "1", "--warmup-seconds", "3",
    "--commits", "4000", "--visibility-commits", "150", "--runs", "3", "--ids", "1000",
    "--ids-processes", "4", "--ids-seconds", "10",
)  # fmt: skip

FULL_CLUSTER_ARGV = ("--records", "50000", "--rounds", "3", "--kills", "10", "--shutdowns", "5")
QUICK_CLUSTER_ARGV = ("--quick", "--records", "2000", "--kills", "1", "--shutdowns", "1")

QUICK_TXN_ARGV = (
    "--seconds", "1", "--rounds", "1", "--producers", "1", "--warmup-seconds", "0",
    "--commits", "30", "--visibility-commits", "10", "--runs", "2", "--ids", "20",
    "--ids-processes", "1", "--ids-seconds", "1",
)  # fmt: skip

FULL = Plan(
    fsyncs=1000,
    seq_write_mib=128,
    loopback_mib=1024,
    bound_rounds=3,
    codec_repeat=15,
    codec_min_time=0.2,
    storage_total_mib=64,
    storage_recovery_mib=512,
    storage_runs=3,
    broker_rounds=3,
    broker_warmup_s=3,
    broker_seconds=10,
    consume_warmup_s=2,
    consume_seconds=10,
    broker_producers=2,
    broker_consumers=3,
    paced_mb_s=20.0,
    paced_seconds=10.0,
    txn_argv=FULL_TXN_ARGV,
    group_members=(3, 10),
    group_rounds=3,
    group_committers=10,
    group_commit_seconds=5.0,
    group_load_records=200_000,
    group_skip_clients=False,
    spark=True,
    # `exactly bench spark`'s own defaults: the report and the command measure the same thing.
    spark_size_mib=spark_defaults.DEFAULT_SIZE_MIB,
    spark_rounds=spark_defaults.DEFAULT_ROUNDS,
    spark_seconds=spark_defaults.DEFAULT_SECONDS,
    spark_warmup_seconds=spark_defaults.DEFAULT_WARMUP_SECONDS,
    spark_read_runs=spark_defaults.DEFAULT_READ_RUNS,
    cluster_argv=FULL_CLUSTER_ARGV,
)

QUICK = Plan(
    fsyncs=200,
    seq_write_mib=16,
    loopback_mib=128,
    bound_rounds=3,
    codec_repeat=5,
    codec_min_time=0.02,
    storage_total_mib=8,
    storage_recovery_mib=16,
    storage_runs=1,
    broker_rounds=2,
    broker_warmup_s=1,
    broker_seconds=2,
    consume_warmup_s=1,
    consume_seconds=2,
    broker_producers=1,
    broker_consumers=1,
    paced_mb_s=5.0,
    paced_seconds=2.0,
    txn_argv=QUICK_TXN_ARGV,
    group_members=(3,),
    group_rounds=2,
    group_committers=4,
    group_commit_seconds=2.0,
    group_load_records=10_000,
    group_skip_clients=True,
    spark=False,
    spark_size_mib=0.0,
    spark_rounds=0,
    spark_seconds=0.0,
    spark_warmup_seconds=0.0,
    spark_read_runs=0,
    cluster_argv=QUICK_CLUSTER_ARGV,
)


@dataclass(frozen=True, slots=True)
class BoundFigures:
    """The machine's bounds the other sections compare with (NaN when not measured)."""

    fsync_p50_ms: float = math.nan
    fsync_p99_ms: float = math.nan
    seq_write_mb_s: float = math.nan
    loopback_mb_s: float = math.nan
    sustained_write_mb_s: float = math.nan
    sustained_write_cpu_s_per_gb: float = math.nan
    drop_behind_write_mb_s: float = math.nan  # the sustained writer with its pages dropped behind it
    drop_behind_write_cpu_s_per_gb: float = math.nan

    def dropping_behind(self) -> BoundFigures:
        """These bounds with the drop-behind writer as the sustained one (for a drop-behind broker)."""
        return dataclasses.replace(
            self,
            sustained_write_mb_s=self.drop_behind_write_mb_s,
            sustained_write_cpu_s_per_gb=self.drop_behind_write_cpu_s_per_gb,
        )


def figure(
    key: str, label: str, stat: Stat | tuple[float, str], unit: str, sheet: Sheet, versus: str = ""
) -> Figure:
    spread = stat.spread if isinstance(stat, Stat) else NO_SPREAD
    return Figure(key, label, stat[0], unit, stat[1], sheet.file, versus, spread)


def times(value: float, bound: float, name: str) -> str:
    """`value / bound` as "0.123 x name" (blank when the bound is missing)."""
    if math.isnan(value) or math.isnan(bound) or bound == 0:
        return ""
    return f"{value / bound:.3g} x {name}"
