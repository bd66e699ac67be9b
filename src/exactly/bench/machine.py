"""The machine a benchmark report ran on: what it is, and its own bounds measured in the same run.

Bounds (what no broker on this machine can beat, measured next to the broker's figures):
- fsync latency: write 4 KiB + fsync, one after the other, on the filesystem of the brokers' data
  directories (a temporary directory, like every benchmark's data directory); one sample per fsync;
- sequential write with fsync: `exactly.bench.broker.raw_disk_write_mb_s` (384 KiB writes, an fsync
  after each: the broker's pattern for 6 partitions x 64 KiB), MB/s per round;
- loopback TCP copy: `exactly.bench.broker.raw_loopback_mb_s` (1 MiB sendall into a reader thread over
  127.0.0.1), MB/s per round.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from exactly.bench.broker import raw_disk_write_mb_s, raw_loopback_mb_s

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Bounds:
    fsync_seconds: tuple[float, ...]  # write(4 KiB) + fsync, each
    seq_write_mb_s: tuple[float, ...]  # per round
    seq_write_bytes: int  # per round
    loopback_mb_s: tuple[float, ...]  # per round
    loopback_bytes: int  # per round
    directory: str
    filesystem: str


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
    directory: Path, fsyncs: int, seq_write_bytes: int, loopback_bytes: int, rounds: int
) -> Bounds:
    fsync = fsync_latencies(directory, fsyncs)
    seq = [raw_disk_write_mb_s(directory, seq_write_bytes, 6 * 64 * 1024) for _ in range(rounds)]
    loop = [raw_loopback_mb_s(loopback_bytes, MiB) for _ in range(rounds)]
    return Bounds(
        tuple(fsync),
        tuple(seq),
        seq_write_bytes,
        tuple(loop),
        loopback_bytes,
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
