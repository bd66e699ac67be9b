"""Protocol codec benchmark (issue 2).

    python -m exactly.bench.codec

Measures, as medians of CPU time (this thread's) over several runs:
- µs per decode of a Produce v9 request carrying 6 partitions x 64 KiB record batches;
- µs per encode of a Fetch v12 response carrying 6 partitions x 1 MiB of records (records are appended
  to the chunk list as they are: the encoder never copies them);
- CRC-32C verify throughput of record batches in MB/s (64 KiB and 1 MiB batches).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from exactly.protocol.api import decode_request, encode_request, encode_response
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.batch import RecordBatch
from exactly.records.builder import BatchBuilder


def _batch(size: int) -> bytes:
    builder = BatchBuilder(producer_id=1000, producer_epoch=0, base_sequence=0)
    value = b"v" * 1000
    for _ in range(size // 1012):  # ~1012 bytes per record with its varint framing
        builder.append(1_700_000_000_000, None, value)
    return builder.build()


def _time_per_call(fn: Callable[[], object], repeat: int = 15, min_time: float = 0.2) -> float:
    """Median CPU seconds per call over `repeat` runs, each long enough to be measured."""
    return statistics.median(_samples_per_call(fn, repeat, min_time))


def _samples_per_call(fn: Callable[[], object], repeat: int = 15, min_time: float = 0.2) -> list[float]:
    """CPU seconds per call of each of `repeat` runs, each long enough to be measured.

    CPU time of this thread (`time.thread_time`), not wall time: on a shared 2-core machine the wall clock
    also counts the time other processes held the core.
    """
    n = 1
    while True:
        start = time.thread_time()
        for _ in range(n):
            fn()
        elapsed = time.thread_time() - start
        if elapsed >= min_time / 4:
            break
        n *= 2
    runs = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(n):
            fn()
        runs.append((time.thread_time() - start) / n)
    return runs


@dataclass(frozen=True, slots=True)
class CodecResult:
    """CPU seconds per call of each run."""

    produce_decode: tuple[float, ...]  # Produce v9, 6 partitions x 64 KiB
    fetch_encode: tuple[float, ...]  # Fetch v12, 6 partitions x 1 MiB
    crc: tuple[tuple[int, tuple[float, ...]], ...]  # (batch bytes, seconds per verify)

    @staticmethod
    def mb_s(batch_bytes: int, seconds: float) -> float:
        return batch_bytes / seconds / 1e6


def measure(repeat: int = 15, min_time: float = 0.2) -> CodecResult:
    crc = []
    for size in (64 * 1024, 1024 * 1024):
        batch = _batch(size)
        view = RecordBatch(batch)
        view.verify_crc()
        crc.append((len(batch), tuple(_samples_per_call(view.verify_crc, repeat, min_time))))
    return CodecResult(
        produce_decode=tuple(_samples_per_call(_produce_decode_call(), repeat, min_time)),
        fetch_encode=tuple(_samples_per_call(_fetch_encode_call(), repeat, min_time)),
        crc=tuple(crc),
    )


def produce_decode_us() -> float:
    return _time_per_call(_produce_decode_call()) * 1e6


def _produce_decode_call() -> Callable[[], object]:
    batch = _batch(64 * 1024)
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(name="bench", partition_data=[PartitionProduceData(i, batch) for i in range(6)])
        ],
    )
    frame = encode_request(ApiKey.PRODUCE, 9, 1, "bench", request)[4:]
    _, decoded = decode_request(frame)
    assert decoded == request
    return lambda: decode_request(frame)


def fetch_encode_us() -> float:
    return _time_per_call(_fetch_encode_call()) * 1e6


def _fetch_encode_call() -> Callable[[], object]:
    records = b"r" * (1024 * 1024)
    body = FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            FetchableTopicResponse(
                topic="bench",
                partitions=[
                    PartitionData(
                        partition_index=i,
                        error_code=0,
                        high_watermark=10_000,
                        last_stable_offset=10_000,
                        log_start_offset=0,
                        aborted_transactions=[],
                        preferred_read_replica=-1,
                        records=records,
                    )
                    for i in range(6)
                ],
            )
        ],
    )
    header, _ = decode_request(encode_request(ApiKey.FETCH, 12, 1, "bench", _fetch_request())[4:])
    chunks = encode_response(header, body)
    assert sum(1 for c in chunks if c is records) == 6, "records must be passed through, not copied"
    return lambda: encode_response(header, body)


def _fetch_request() -> object:
    from exactly.protocol.messages.fetch import FetchRequest

    return FetchRequest()


def crc_mb_per_s(size: int) -> float:
    batch = _batch(size)
    view = RecordBatch(batch)
    view.verify_crc()
    seconds = _time_per_call(view.verify_crc)
    return len(batch) / seconds / 1e6


def main() -> None:
    print(f"Produce v9 request decode, 6 partitions x 64 KiB : {produce_decode_us():8.2f} us (target <= 15)")
    print(f"Fetch v12 response encode, 6 partitions x 1 MiB  : {fetch_encode_us():8.2f} us (target <= 20)")
    for size in (64 * 1024, 1024 * 1024):
        label = f"CRC-32C verify, {size // 1024} KiB batches"
        print(f"{label:<49}: {crc_mb_per_s(size):8.0f} MB/s (target >= 1000)")


if __name__ == "__main__":
    main()
