"""The machine a benchmark report ran on: what it is, and its own bounds measured in the same run.

Bounds (what no broker on this machine can beat, measured next to the broker's figures):
- fsync latency: write 4 KiB + fsync, one after the other, on the filesystem of the brokers' data
  directories (a temporary directory, like every benchmark's data directory); one sample per fsync;
- sequential write with fsync: `exactly.bench.broker.raw_disk_write_mb_s` (384 KiB writes, an fsync
  after each: the broker's pattern for 6 partitions x 64 KiB), MB/s per round -- a burst of 128 MiB;
- sustained write (`sustained_write`): what a produce round asks of the kernel, without a broker: 1 MiB
  writes to 6 files in turn (one per partition), an fdatasync after each (the broker's pattern with
  1 MB requests), for as long as a produce round (warm-up, then the measured seconds), the files
  deleted at its end as a round's topic is; MB/s per second and the writer thread's CPU per GB
  (`time.thread_time`); once as is, once with the pages more than `DROP_BEHIND_WINDOW` behind each
  file's end dropped after its fdatasync (what `exactly.log.drop.behind.bytes` makes the broker do);
- loopback TCP copy: `exactly.bench.broker.raw_loopback_mb_s` (1 MiB sendall into a reader thread over
  127.0.0.1), MB/s per round.

Why both writes: on this machine (a Firecracker VM whose free memory goes back to the host a few seconds
after it is freed) the first write of a page of memory the guest has not used lately costs a fault on
the host, charged to whoever copies into the page -- for a file write, the writer's `write` call. A
128 MiB burst lands in memory the guest used a moment ago (0.2-0.7 s of CPU per GB here); a round of
several GB runs out of it after about 3 GB and then pays ~2.5 s of system CPU per GB in
`copy_folio_from_iter_atomic` alone (measured with perf, the broker under produce and a plain Python
write loop alike). The sustained writer pays the same, so a broker compared with it is compared with
what the kernel charges for the same bytes in the same conditions. Dropping the pages behind the writes
frees them for the next writes before the host takes them back: the second sustained writer measures that.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from exactly.bench.broker import raw_disk_write_mb_s, raw_loopback_mb_s
from exactly.storage.drop_behind import DropBehind

MiB = 1 << 20
#: the drop-behind window of the report's second sustained writer and of its drop-behind broker
DROP_BEHIND_WINDOW = 64 * MiB


@dataclass(frozen=True, slots=True)
class Bounds:
    fsync_seconds: tuple[float, ...]  # write(4 KiB) + fsync, each
    seq_write_mb_s: tuple[float, ...]  # per round
    seq_write_bytes: int  # per round
    loopback_mb_s: tuple[float, ...]  # per round
    loopback_bytes: int  # per round
    sustained: tuple[SustainedWrite, ...]  # per round
    sustained_drop_behind: tuple[SustainedWrite, ...]  # per round, DROP_BEHIND_WINDOW
    directory: str
    filesystem: str


@dataclass(frozen=True, slots=True)
class SustainedWrite:
    """One round of `sustained_write`: bytes written in each second of the round (warm-up included) and
    over the measured seconds, and the writer thread's CPU (user + system) over the measured seconds."""

    window_bytes: tuple[int, ...]  # index = second since the round began
    measured_bytes: int
    measured_seconds: float
    cpu_seconds: float

    @property
    def mb_s(self) -> float:
        return self.measured_bytes / self.measured_seconds / 1e6 if self.measured_seconds else math.nan

    @property
    def cpu_s_per_gb(self) -> float:
        return self.cpu_seconds / (self.measured_bytes / 1e9) if self.measured_bytes else math.nan


def sustained_write(
    directory: Path,
    warmup_s: float,
    seconds: float,
    files: int = 6,
    chunk: int = MiB,
    clock: Callable[[], float] = time.perf_counter,
    cpu: Callable[[], float] = time.thread_time,
    drop_behind: int = -1,
) -> SustainedWrite:
    """Write `chunk`-byte blocks to `files` files in turn, an fdatasync after each, for `warmup_s` +
    `seconds`; measure the last `seconds`. The files are deleted at the end. `drop_behind` >= 0: after
    each fdatasync drop what lies that far behind the file's end from the page cache, as the broker's
    segments do with `exactly.log.drop.behind.bytes`."""
    data = os.urandom(chunk)
    paths = [directory / f"sustained-{i}.bin" for i in range(files)]
    fds = [os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) for path in paths]
    dropper = DropBehind(drop_behind)
    sizes, dropped = [0] * files, [0] * files
    windows: list[int] = []
    measured = writes = 0
    started: tuple[float, float] | None = None  # (clock, thread CPU) when the measured seconds began
    try:
        begin = clock()
        while (now := clock()) < begin + warmup_s + seconds:
            if started is None and now >= begin + warmup_s:
                started = (now, cpu())
            i = writes % files
            fd = fds[i]
            writes += 1
            written = os.write(fd, data)
            os.fdatasync(fd)
            sizes[i] += written
            dropped[i] = dropper.after_sync(fd, dropped[i], sizes[i])
            second = int(clock() - begin)
            windows.extend([0] * (second + 1 - len(windows)))
            windows[second] += written
            if started is not None:
                measured += written
        stopped = (clock(), cpu())
    finally:
        for fd in fds:
            os.close(fd)
        for path in paths:
            path.unlink(missing_ok=True)
    whole = tuple(windows[: int(warmup_s + seconds)])  # the seconds that ran to their end
    if started is None:
        return SustainedWrite(whole, 0, 0.0, 0.0)
    return SustainedWrite(whole, measured, stopped[0] - started[0], stopped[1] - started[1])


def fsync_latencies(directory: Path, count: int) -> list[float]:
    """Seconds of each write of 4 KiB + fsync, appended to one file (as a log append is)."""
    path = directory / "fsync-latency.bin"
    data = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    samples = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            samples.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    return samples


def measure_bounds(
    directory: Path,
    fsyncs: int,
    seq_write_bytes: int,
    loopback_bytes: int,
    rounds: int,
    sustained_s: tuple[float, float],
) -> Bounds:
    """`sustained_s`: the warm-up and measured seconds of each sustained-write round (a produce
    round's)."""
    fsync = fsync_latencies(directory, fsyncs)
    seq = [raw_disk_write_mb_s(directory, seq_write_bytes, 6 * 64 * 1024) for _ in range(rounds)]
    loop = [raw_loopback_mb_s(loopback_bytes, MiB) for _ in range(rounds)]
    sustained, dropping = [], []
    for _ in range(rounds):
        sustained.append(sustained_write(directory, *sustained_s))
        dropping.append(sustained_write(directory, *sustained_s, drop_behind=DROP_BEHIND_WINDOW))
    return Bounds(
        tuple(fsync),
        tuple(seq),
        seq_write_bytes,
        tuple(loop),
        loopback_bytes,
        tuple(sustained),
        tuple(dropping),
        str(directory),
        filesystem(directory),
    )


def filesystem(path: Path) -> str:
    """`<type> on <device> (<mount point>)` of the mount holding `path`."""
    best = ("", "?", "?")
    resolved = str(path.resolve())
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    for line in lines:
        device, mount, kind = line.split()[:3]
        inside = resolved == mount or resolved.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[0]):
            best = (mount, device, kind)
    return f"{best[2]} on {best[1]} ({best[0]})"


@dataclass(frozen=True, slots=True)
class Machine:
    cpu_model: str
    cores: int
    memory_gib: float
    kernel: str
    python: str
    libraries: tuple[tuple[str, str], ...]  # (name, version)
    java: str


def describe_machine() -> Machine:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = float("nan")
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    libraries: list[tuple[str, str]] = []
    try:
        import confluent_kafka

        libraries.append(("librdkafka", confluent_kafka.libversion()[0]))
    except ImportError:
        libraries.append(("librdkafka", "not installed"))
    for name in ("confluent-kafka", "kafka-python", "aiokafka", "pyspark", "matplotlib", "uvloop"):
        try:
            libraries.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            libraries.append((name, "not installed"))
    return Machine(
        cpu_model=model,
        cores=os.cpu_count() or 0,
        memory_gib=memory,
        kernel=platform.platform(),
        python=sys.version.split()[0],
        libraries=tuple(libraries),
        java=java_version(),
    )


def java_version() -> str:
    java = shutil.which("java")
    if java is None:
        return "not found"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "found, did not answer"
    lines = (done.stderr or done.stdout).splitlines()
    return lines[0].strip() if lines else "found"


def git_commit(directory: Path) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"
