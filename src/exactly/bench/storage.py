"""Storage engine benchmark: `python -m exactly.bench.storage [--total-mib N] [--runs R] [--recovery-mib M]`.

Prints medians over `--runs` runs of:

* append throughput (MB/s) of the leader's append (`Partition.append_records_to_leader`) for 1 MiB and
  16 KiB batches, with fsync-before-ack (`flush(upto=...)` after every append, as an acks=all producer
  with one request in flight sees it) and without, next to a raw sequential `os.write` of the same bytes
  with the same fsync pattern (dd-like) in the same run;
* read throughput (GB/s) of `read(offset, 1 MiB)` over a log in the page cache;
* recovery time of a `--recovery-mib` log without the clean-shutdown marker (every batch CRC-checked,
  indexes and producer state rebuilt) and with it.

Everything is written under a temporary directory in /tmp, removed at the end. Default writes stay
below 2 GiB in total.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from exactly.clock import SystemClock
from exactly.records.builder import build_batch
from exactly.replication.partition import Partition
from exactly.storage.config import LogConfig
from exactly.storage.loader import load_log
from exactly.storage.log import PartitionLog

MiB = 1024 * 1024


def make_batch(batch_bytes: int) -> bytes:
    record_value = 1024 if batch_bytes <= 64 * 1024 else batch_bytes - 200
    n = max(1, (batch_bytes - 61) // (record_value + 20))
    return build_batch([(None, os.urandom(record_value))] * n, timestamp=int(time.time() * 1000))


def raw_write(path: Path, batch: bytes, count: int, fsync: bool) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    try:
        for _ in range(count):
            os.write(fd, batch)
            if fsync:
                os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def log_append(directory: Path, batch: bytes, count: int, fsync: bool) -> float:
    config = LogConfig(max_message_bytes=4 * MiB)
    plog = load_log(directory, "bench", 0, config, SystemClock())
    leader = Partition(plog)  # appends as the broker does: the leader moves the high watermark
    start = time.perf_counter()
    try:
        for _ in range(count):
            appended = leader.append_records_to_leader(batch)
            if fsync and appended.durable_offset is not None:
                plog.flush(upto=appended.durable_offset)
    finally:
        elapsed = time.perf_counter() - start
        plog.close_without_flush()
    return elapsed


def timed(fn: Callable[[], float], runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


@dataclass(frozen=True, slots=True)
class AppendCase:
    """One append plan: `runs` timings of a raw write and of the log's appends of the same bytes."""

    batch_bytes: int
    fsync: bool
    total_bytes: int  # written per run
    raw_seconds: tuple[float, ...]
    log_seconds: tuple[float, ...]

    @property
    def raw_mb_s(self) -> float:
        return self.total_bytes / statistics.median(self.raw_seconds) / 1e6

    @property
    def log_mb_s(self) -> float:
        return self.total_bytes / statistics.median(self.log_seconds) / 1e6


@dataclass(frozen=True, slots=True)
class ReadRecovery:
    log_bytes: int
    read_seconds: tuple[float, ...]  # reading the whole log in 1 MiB fetches, per run
    unclean_seconds: tuple[float, ...]  # recovery without the clean-shutdown marker, per run
    clean_seconds: tuple[float, ...]


def measure_appends(root: Path, total_mib: int, runs: int) -> tuple[AppendCase, ...]:
    plans = [
        (MiB, False, total_mib),
        (MiB, True, total_mib),
        (16 * 1024, False, total_mib // 2),
        (16 * 1024, True, max(1, total_mib // 16)),
    ]
    cases = []
    for batch_bytes, fsync, mib in plans:
        batch = make_batch(batch_bytes)
        count = max(1, mib * MiB // len(batch))
        raw_times, log_times = [], []
        for i in range(runs):
            raw_path = root / f"raw-{i}"
            raw_times.append(raw_write(raw_path, batch, count, fsync))
            raw_path.unlink()
            log_dir = root / f"log-{i}"
            log_times.append(log_append(log_dir, batch, count, fsync))
            shutil.rmtree(log_dir)
        cases.append(AppendCase(batch_bytes, fsync, count * len(batch), tuple(raw_times), tuple(log_times)))
    return tuple(cases)


def bench_appends(root: Path, total_mib: int, runs: int) -> None:
    print(f"append throughput, median of {runs} runs (MB/s = 10^6 bytes/s)")
    print(f"{'batch':>8} {'fsync':>6} {'MiB/run':>8} {'raw':>10} {'log':>10} {'log/raw':>8}")
    for case in measure_appends(root, total_mib, runs):
        raw, lg = case.raw_mb_s, case.log_mb_s
        label = f"{case.batch_bytes // 1024} KiB"
        mode = "on" if case.fsync else "off"
        print(f"{label:>8} {mode:>6} {case.total_bytes / MiB:8.0f} {raw:10.1f} {lg:10.1f} {lg / raw:8.2f}")


def build_log(directory: Path, mib: int) -> PartitionLog:
    config = LogConfig(max_message_bytes=4 * MiB, segment_bytes=256 * MiB)
    plog = load_log(directory, "bench", 0, config, SystemClock())
    batch = make_batch(MiB)
    leader = Partition(plog)
    for _ in range(mib * MiB // len(batch)):
        leader.append_records_to_leader(batch)
    return plog


def measure_reads_and_recovery(root: Path, mib: int, runs: int) -> ReadRecovery:
    directory = root / "bench-0"
    plog = build_log(directory, mib)
    size = plog.size_in_bytes
    reads = []
    for _ in range(runs):
        start = time.perf_counter()
        offset = 0
        got = 0
        while offset < plog.log_end_offset:
            info = plog.read(offset, MiB)
            got += len(info.records)
            offset = info.next_offset
        reads.append(time.perf_counter() - start)
    plog.flush()
    leo = plog.log_end_offset
    unclean, clean = [], []
    config = plog.config
    plog.close_without_flush()
    for _ in range(runs):
        start = time.perf_counter()
        again = load_log(directory, "bench", 0, config, SystemClock(), recovery_point=0)
        unclean.append(time.perf_counter() - start)
        assert again.log_end_offset == leo
        again.close()
        start = time.perf_counter()
        again = load_log(
            directory, "bench", 0, config, SystemClock(), recovery_point=leo, had_clean_shutdown=True
        )
        clean.append(time.perf_counter() - start)
        assert again.log_end_offset == leo
        again.close_without_flush()
    shutil.rmtree(directory, ignore_errors=True)
    return ReadRecovery(size, tuple(reads), tuple(unclean), tuple(clean))


def bench_reads_and_recovery(root: Path, mib: int, runs: int) -> None:
    result = measure_reads_and_recovery(root, mib, runs)
    size = result.log_bytes
    print(
        f"read throughput from page cache ({size / MiB:.0f} MiB, 1 MiB fetches): "
        f"{size / statistics.median(result.read_seconds) / 1e9:.2f} GB/s"
    )
    print(
        f"recovery of {size / MiB:.0f} MiB: no clean-shutdown marker "
        f"{statistics.median(result.unclean_seconds):.2f} s, "
        f"clean {statistics.median(result.clean_seconds) * 1000:.1f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--total-mib", type=int, default=64, help="MiB appended per run for 1 MiB batches")
    parser.add_argument("--recovery-mib", type=int, default=1024, help="size of the read/recovery log")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="exactly-bench-storage-", dir="/tmp"))
    try:
        bench_appends(root, args.total_mib, args.runs)
        bench_reads_and_recovery(root, args.recovery_mib, args.runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
