"""Micro-benchmarks for `exactly.records`: CRC-verify throughput and header-parse cost.

Run: ``python -m exactly.bench.records`` (from a checkout: ``PYTHONPATH=src .venv/bin/python -m ...``).
"""

from __future__ import annotations

import statistics
import time

from exactly.records import BatchBuilder, RecordBatch


def _batch_of_size(target: int) -> bytes:
    """An uncompressed batch of roughly ``target`` bytes made of 1 KiB values."""
    builder = BatchBuilder(producer_id=1, producer_epoch=0, base_sequence=0)
    value = bytes(range(256)) * 4
    timestamp = 1_700_000_000_000
    while builder.size_estimate < target - 1100:
        builder.append(timestamp, None, value)
    return builder.build()


def _median_seconds(fn: object, loops: int, runs: int) -> float:
    assert callable(fn)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - start) / loops)
    return statistics.median(samples)


def bench_crc(size: int, runs: int = 7) -> float:
    """CRC-verify throughput in MB/s (10**6 bytes per second) for one batch of about ``size`` bytes."""
    data = _batch_of_size(size)
    batch = RecordBatch(data)
    loops = max(1, (64 * 1024 * 1024) // len(data))  # ~64 MiB per run
    seconds = _median_seconds(batch.verify_crc, loops, runs)
    return len(data) / seconds / 1e6


def bench_header_parse(runs: int = 7) -> tuple[float, float]:
    """Microseconds for RecordBatch(buf) + 6 hot properties, and for header() (all fields)."""
    data = bytearray(_batch_of_size(4096))

    def parse() -> None:
        batch = RecordBatch(data)
        _ = (
            batch.base_offset,
            batch.last_offset_delta,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            batch.attributes,
        )

    def full() -> None:
        RecordBatch(data).header()

    loops = 100_000
    return (
        _median_seconds(parse, loops, runs) * 1e6,
        _median_seconds(full, loops, runs) * 1e6,
    )


def main() -> None:
    for size, label in ((64 * 1024, "64 KiB"), (1024 * 1024, "1 MiB")):
        print(f"CRC-32C verify, {label} batch: {bench_crc(size):8.0f} MB/s (median of 7 runs)")
    parse_us, header_us = bench_header_parse()
    print(f"RecordBatch(buf) + 6 properties: {parse_us:.3f} us")
    print(f"RecordBatch(buf).header():       {header_us:.3f} us")


if __name__ == "__main__":
    main()
