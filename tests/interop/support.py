"""Shared helpers for the interop tests: a module-scoped broker, a raw reader of a partition's log,
raw topic creation and ListOffsets, and a fault-injecting TCP proxy.

Everything here talks to the broker with our own codecs (`RawClient`), so a test that checks what a
real client did reads the result back independently of that client.
"""

from __future__ import annotations

import collections
import contextlib
import random
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from exactly.records.batch import RecordBatch, iter_batches
from exactly.records.record import Record
from tests.interop.broker import BrokerProcess
from tests.interop.client import RawClient

EARLIEST = -2
LATEST = -1


# --- broker lifetime ------------------------------------------------------------------------------------


@contextlib.contextmanager
def running_broker(data_dir: Path, *settings: str, port: int | None = None) -> Iterator[BrokerProcess]:
    """A broker that is SIGKILLed if a test leaves it running after a failure (no hanging process)."""
    proc = BrokerProcess(data_dir, *settings, port=port)
    proc.start()
    try:
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            try:
                proc.stop(timeout=15)
            except Exception:  # noqa: BLE001 - a hung shutdown must not hide the test's own failure
                proc.kill()


# --- raw reading of a partition ---------------------------------------------------------------------


@dataclass
class StoredBatch:
    """One batch as the broker serves it, with its decoded records."""

    base_offset: int
    last_offset: int
    attributes: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    crc_ok: bool
    raw: bytes
    records: list[Record] = field(default_factory=list)


@dataclass
class PartitionDump:
    error_code: int
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    batches: list[StoredBatch]

    @property
    def records(self) -> list[Record]:
        return [r for b in self.batches for r in b.records]

    @property
    def values(self) -> list[bytes | None]:
        return [r.value for r in self.records]


def fetch_partition(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int = 0,
    *,
    isolation_level: int = 0,
    version: int = 12,
    max_bytes: int = 4 << 20,
    timeout: float = 20.0,
) -> PartitionDump:
    """Every batch of `topic`/`partition` from `start` to the high watermark, by repeated Fetch requests."""
    client = RawClient(bootstrap, timeout=timeout)
    try:
        offset = start
        batches: list[StoredBatch] = []
        deadline = time.monotonic() + timeout
        while True:
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=max_bytes,
                isolation_level=isolation_level,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchTopic(topic, partitions=[FetchPartition(partition, -1, offset, -1, -1, max_bytes)])
                ],
            )
            response = client.request(ApiKey.FETCH, version, request)
            assert response.error_code == ErrorCode.NONE, response
            data = response.responses[0].partitions[0]
            if data.error_code != ErrorCode.NONE:
                return PartitionDump(
                    data.error_code,
                    data.high_watermark,
                    data.log_start_offset,
                    data.last_stable_offset,
                    batches,
                )
            raw = bytes(data.records or b"")
            progressed = False
            for batch in iter_batches(raw, allow_partial=True):
                blob = bytes(batch.buffer)
                stored = StoredBatch(
                    batch.base_offset,
                    batch.last_offset,
                    batch.attributes,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    batch.records_count,
                    batch.is_valid_crc(),
                    blob,
                    list(RecordBatch(blob).records()),
                )
                if stored.last_offset < offset:
                    continue  # a batch that starts before the fetch offset is served whole
                batches.append(stored)
                offset = stored.last_offset + 1
                progressed = True
            if offset >= data.high_watermark:
                return PartitionDump(
                    data.error_code,
                    data.high_watermark,
                    data.log_start_offset,
                    data.last_stable_offset,
                    batches,
                )
            if not progressed:
                assert time.monotonic() < deadline, f"fetch made no progress at offset {offset}"
    finally:
        client.close()


def list_offset(
    bootstrap: str, topic: str, partition: int, timestamp: int, version: int = 7
) -> tuple[int, int, int]:
    """ListOffsets for one partition: (error_code, offset, timestamp)."""
    client = RawClient(bootstrap)
    try:
        response = client.request(
            ApiKey.LIST_OFFSETS,
            version,
            ListOffsetsRequest(
                -1, 0, [ListOffsetsTopic(topic, [ListOffsetsPartition(partition, -1, timestamp)])]
            ),
        )
        p = response.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp
    finally:
        client.close()


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    """CreateTopics v7 with our codecs; asserts success."""
    client = RawClient(bootstrap)
    try:
        topic = CreatableTopic(
            name,
            partitions,
            1,
            [],
            [CreatableTopicConfig(k, v) for k, v in (configs or {}).items()],
        )
        response = client.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest([topic], 10_000, False))
        result = response.topics[0]
        assert result.error_code == ErrorCode.NONE, (result.error_code, result.error_message)
    finally:
        client.close()


# --- fault-injecting proxy ---------------------------------------------------------------------------


class FaultProxy:
    """A TCP proxy on 127.0.0.1 between clients and a broker that injects seeded faults.

    For every response frame read from the broker, with probability `drop_response` the frame is
    swallowed and both sides of that connection are closed (the request was processed, the client never
    hears about it). For every chunk of request bytes from the client, with probability `reset` the chunk
    is not forwarded and the connection is reset (RST to the client via SO_LINGER 0, close to the broker),
    so the broker never sees (the rest of) that request. `after_frames` exempts the first response
    frames of each connection (the ApiVersions/Metadata handshake) from drops, and resets start after
    the first response, so that clients get going.
    """

    def __init__(
        self,
        upstream: tuple[str, int],
        seed: int,
        drop_response: float = 0.0,
        reset: float = 0.0,
        after_frames: int = 2,
    ) -> None:
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.drop_response = drop_response
        self.reset = reset
        self.after_frames = after_frames
        self.enabled = True
        self.dropped = 0
        self.resets = 0
        self.forwarded = 0
        self.connections = 0
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: set[socket.socket] = set()
        #: the last events (monotonic time, connection number, what), for failure messages
        self.events: collections.deque[tuple[float, int, str]] = collections.deque(maxlen=60)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        t = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self.lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _chance(self, p: float) -> bool:
        with self.lock:
            return self.enabled and p > 0 and self.rng.random() < p

    def _accept_loop(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self.connections += 1
                self._socks.update((client, server))
                number = self.connections
            t = threading.Thread(target=self._pump, args=(client, server, number), daemon=True)
            t.start()
            self._threads.append(t)

    def _event(self, conn: int, what: str) -> None:
        self.events.append((time.monotonic(), conn, what))

    def describe(self) -> str:
        """Counters and the last events, for assertion messages."""
        now = time.monotonic()
        lines = [
            f"proxy: {self.connections} connections, {self.forwarded} responses forwarded, "
            f"{self.dropped} dropped, {self.resets} resets"
        ]
        lines += [f"  {t - now:+.3f}s conn {c}: {what}" for t, c, what in list(self.events)]
        return "\n".join(lines)

    def _pump(self, client: socket.socket, server: socket.socket, conn: int = 0) -> None:
        """Requests: forwarded as bytes. Responses: forwarded frame by frame, with faults."""
        buf = bytearray()
        requests = bytearray()
        frames = 0
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([client, server], [], [], 0.2)
                if client in readable:
                    data = client.recv(1 << 16)
                    if not data:
                        self._event(conn, "client closed")
                        return
                    if frames >= 1 and self._chance(self.reset):
                        with self.lock:
                            self.resets += 1
                        self._event(conn, f"reset while the client sent {len(data)} bytes")
                        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        return
                    server.sendall(data)
                    requests += data
                    while len(requests) >= 12:
                        (size,) = struct.unpack_from(">i", requests)
                        if len(requests) < 4 + size:
                            break
                        api_key, version, correlation_id = struct.unpack_from(">hhi", requests, 4)
                        del requests[: 4 + size]
                        self._event(
                            conn, f"request key {api_key} v{version} corr {correlation_id} ({size} bytes)"
                        )
                if server in readable:
                    data = server.recv(1 << 16)
                    if not data:
                        self._event(conn, "broker closed")
                        return
                    buf += data
                    while len(buf) >= 4:
                        (size,) = struct.unpack_from(">i", buf)
                        if len(buf) < 4 + size:
                            break
                        frame = bytes(buf[: 4 + size])
                        del buf[: 4 + size]
                        frames += 1
                        (correlation_id,) = struct.unpack_from(">i", frame, 4)
                        if frames > self.after_frames and self._chance(self.drop_response):
                            with self.lock:
                                self.dropped += 1
                            self._event(conn, f"dropped response corr {correlation_id} ({size} bytes)")
                            return
                        client.sendall(frame)
                        with self.lock:
                            self.forwarded += 1
                        self._event(conn, f"forwarded response corr {correlation_id} ({size} bytes)")
        except OSError as e:
            self._event(conn, f"socket error {e!r}")
            return
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()
            with self.lock:
                self._socks.discard(client)
                self._socks.discard(server)
