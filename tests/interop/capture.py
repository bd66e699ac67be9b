"""A tiny fake Kafka broker that lets real producers send, and records every request frame.

It speaks just enough of the protocol for a producer to deliver: ApiVersions, Metadata (one broker =
itself, the configured topics with one leader each), InitProducerId (for idempotent producers) and
Produce (success, increasing base offsets). Every other request is recorded and left unanswered.
Everything is hand-encoded with `struct` so this helper does not depend on `exactly.protocol`.

Framing (all big-endian)::

    Request  => size int32, header, body
        header v1 => api_key int16, api_version int16, correlation_id int32, client_id nullable string
        header v2 => header v1 + tagged fields          (flexible request versions)
    Response => size int32, header, body
        header v0 => correlation_id int32
        header v1 => correlation_id int32, tagged fields (flexible versions, except ApiVersions: always v0)

Flexible versions (KIP-482) write strings as ``uvarint(len + 1)`` + bytes (0 = null), arrays as
``uvarint(count + 1)`` + items, records as ``uvarint(len + 1)`` + bytes, and end every struct with a
tagged-field section (``uvarint`` count; we write 0 and skip whatever we read).

Usage::

    with CaptureServer(topics=("t",)) as server:
        producer = Producer({"bootstrap.servers": server.bootstrap, ...})
        ...
        for partition in server.produced():
            batch = RecordBatch(partition.records)
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "DEFAULT_API_VERSIONS",
    "NON_FLEXIBLE_API_VERSIONS",
    "ApiKey",
    "CaptureServer",
    "Frame",
    "ProducePartition",
    "ProduceRequest",
    "Reader",
    "parse_produce_request",
]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    INIT_PRODUCER_ID = 22


#: First flexible version of each API we may see (request header v2 / response header v1 from here on).
FLEXIBLE_FROM: Mapping[int, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 6,
    ApiKey.METADATA: 9,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.API_VERSIONS: 3,
    ApiKey.INIT_PRODUCER_ID: 2,
}

#: Advertised (min, max) per API. Produce min 0 (librdkafka 2.0.2 bug KAFKA-18659); Fetch is advertised
#: (librdkafka needs Fetch >= 4 for v2 batches, >= 10 for zstd) but never answered, and so is
#: FindCoordinator (librdkafka enables LZ4 only if the broker has it, as a "Kafka >= 0.8.2" probe).
DEFAULT_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.METADATA: (0, 9),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
}

#: Only non-flexible Produce/Metadata versions: exercises the classic (int16/int32 length) encodings.
NON_FLEXIBLE_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    **DEFAULT_API_VERSIONS,
    ApiKey.PRODUCE: (0, 8),
    ApiKey.METADATA: (0, 8),
}

_UNSUPPORTED_VERSION = 35


# --- decoding --------------------------------------------------------------------------------------------


class Reader:
    """Sequential reader for the classic and compact (flexible) Kafka encodings."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def int8(self) -> int:
        return self._unpack(">b")

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"need {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self.raw(n).decode()

    def string(self) -> str:
        value = self.nullable_string()
        assert value is not None
        return value

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n).decode()

    def compact_string(self) -> str:
        value = self.compact_nullable_string()
        assert value is not None
        return value

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.raw(n)

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n)

    def array_length(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.int32()

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.raw(self.uvarint())


@dataclass(frozen=True, slots=True)
class Frame:
    """One request as received (``raw`` is the frame without its size prefix)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    raw: bytes
    body_offset: int

    @property
    def flexible(self) -> bool:
        return self.api_version >= FLEXIBLE_FROM.get(self.api_key, 1 << 15)

    @property
    def body(self) -> bytes:
        return self.raw[self.body_offset :]


def parse_frame(raw: bytes) -> Frame:
    reader = Reader(raw)
    api_key = reader.int16()
    api_version = reader.int16()
    correlation_id = reader.int32()
    client_id = reader.nullable_string()
    if api_version >= FLEXIBLE_FROM.get(api_key, 1 << 15):
        reader.skip_tagged_fields()  # request header v2
    return Frame(api_key, api_version, correlation_id, client_id, raw, reader.pos)


@dataclass(frozen=True, slots=True)
class ProducePartition:
    topic: str
    partition: int
    records: bytes | None


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    api_version: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    partitions: tuple[ProducePartition, ...]


def parse_produce_request(api_version: int, body: bytes) -> ProduceRequest:
    """Decode a Produce request body, versions 3-9 (9 is flexible)."""
    if not 3 <= api_version <= 9:
        raise ValueError(f"Produce v{api_version} is not handled by the capture helper")
    flexible = api_version >= 9
    r = Reader(body)
    transactional_id = r.compact_nullable_string() if flexible else r.nullable_string()
    acks = r.int16()
    timeout_ms = r.int32()
    partitions: list[ProducePartition] = []
    for _ in range(r.array_length(flexible)):
        topic = r.compact_string() if flexible else r.string()
        for _ in range(r.array_length(flexible)):
            index = r.int32()
            records = r.compact_nullable_bytes() if flexible else r.nullable_bytes()
            if flexible:
                r.skip_tagged_fields()
            partitions.append(ProducePartition(topic, index, records))
        if flexible:
            r.skip_tagged_fields()
    if flexible:
        r.skip_tagged_fields()
    if r.pos != len(body):
        raise ValueError(f"{len(body) - r.pos} trailing bytes after Produce v{api_version} body")
    return ProduceRequest(api_version, transactional_id, acks, timeout_ms, tuple(partitions))


# --- encoding --------------------------------------------------------------------------------------------


class Writer:
    """Builds a response body; ``flexible`` switches strings/arrays to the compact forms."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.out = bytearray()

    def int8(self, v: int) -> Writer:
        self.out += struct.pack(">b", v)
        return self

    def int16(self, v: int) -> Writer:
        self.out += struct.pack(">h", v)
        return self

    def int32(self, v: int) -> Writer:
        self.out += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> Writer:
        self.out += struct.pack(">q", v)
        return self

    def uvarint(self, v: int) -> Writer:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)
        return self

    def string(self, s: str | None) -> Writer:
        if s is None:
            return self.uvarint(0) if self.flexible else self.int16(-1)
        data = s.encode()
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.int16(len(data))
        self.out += data
        return self

    def array_length(self, n: int) -> Writer:
        return self.uvarint(n + 1) if self.flexible else self.int32(n)

    def int32_array(self, values: Iterable[int]) -> Writer:
        items = list(values)
        self.array_length(len(items))
        for v in items:
            self.int32(v)
        return self

    def tags(self) -> Writer:
        """An empty tagged-field section (flexible versions only)."""
        if self.flexible:
            self.uvarint(0)
        return self


# --- the server ------------------------------------------------------------------------------------------


@dataclass
class CaptureServer:
    """Threaded fake broker on 127.0.0.1 (a free port); use as a context manager."""

    topics: tuple[str, ...] = ("test",)
    producer_id: int = 1000
    producer_epoch: int = 0
    api_versions: Mapping[int, tuple[int, int]] = field(default_factory=lambda: dict(DEFAULT_API_VERSIONS))
    node_id: int = 0

    frames: list[Frame] = field(default_factory=list, init=False)
    errors: list[BaseException] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _listener: socket.socket | None = field(default=None, init=False)
    _threads: list[threading.Thread] = field(default_factory=list, init=False)
    _connections: list[socket.socket] = field(default_factory=list, init=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False)
    _next_offset: dict[tuple[str, int], int] = field(default_factory=dict, init=False)

    # -- lifecycle --

    def __enter__(self) -> CaptureServer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(0.1)
        self._listener = listener
        self._spawn(self._accept_loop)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        for thread in self._threads:
            thread.join(timeout=2)
        if self._listener is not None:
            self._listener.close()

    @property
    def port(self) -> int:
        assert self._listener is not None, "server not started"
        return int(self._listener.getsockname()[1])

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- what was captured --

    def captured(self, api_key: int | None = None) -> list[Frame]:
        with self._lock:
            return [f for f in self.frames if api_key is None or f.api_key == api_key]

    def produce_requests(self) -> list[ProduceRequest]:
        return [parse_produce_request(f.api_version, f.body) for f in self.captured(ApiKey.PRODUCE)]

    def produced(self) -> list[ProducePartition]:
        """Every (topic, partition, records) entry of every captured Produce request, in arrival order."""
        return [p for request in self.produce_requests() for p in request.partitions]

    # -- internals --

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._lock:
                self._connections.append(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self._stopping.is_set():
                size_bytes = _recv_exact(conn, 4)
                if size_bytes is None:
                    return
                (size,) = struct.unpack(">i", size_bytes)
                raw = _recv_exact(conn, size)
                if raw is None:
                    return
                frame = parse_frame(raw)
                with self._lock:
                    self.frames.append(frame)
                response = self._respond(frame)
                if response is not None:
                    conn.sendall(struct.pack(">i", len(response)) + response)
        except OSError:
            return
        except Exception as exc:  # noqa: BLE001 -- keep any failure for the test to report
            with self._lock:
                self.errors.append(exc)
        finally:
            conn.close()

    def _respond(self, frame: Frame) -> bytes | None:
        """Header + body of the response to ``frame``, or None to stay silent."""
        key, version = frame.api_key, frame.api_version
        if key == ApiKey.API_VERSIONS:
            # Always response header v0. An unsupported version gets a v0 body with error 35.
            low, high = self.api_versions[ApiKey.API_VERSIONS]
            if not low <= version <= high:
                body = self._api_versions_body(0, _UNSUPPORTED_VERSION)
            else:
                body = self._api_versions_body(version, 0)
            return struct.pack(">i", frame.correlation_id) + body
        if key == ApiKey.METADATA:
            body = self._metadata_body(version)
        elif key == ApiKey.INIT_PRODUCER_ID:
            body = self._init_producer_id_body(version)
        elif key == ApiKey.PRODUCE:
            request = parse_produce_request(version, frame.body)
            if request.acks == 0:
                return None
            body = self._produce_body(version, request)
        else:
            return None
        header = struct.pack(">i", frame.correlation_id)
        if frame.flexible:
            header += b"\x00"  # response header v1: empty tagged fields
        return header + body

    def _api_versions_body(self, version: int, error_code: int) -> bytes:
        w = Writer(flexible=version >= 3)
        w.int16(error_code)
        w.array_length(len(self.api_versions))
        for api_key, (low, high) in sorted(self.api_versions.items()):
            w.int16(api_key).int16(low).int16(high).tags()
        if version >= 1:
            w.int32(0)  # throttle_time_ms
        w.tags()
        return bytes(w.out)

    def _metadata_body(self, version: int) -> bytes:
        if not 1 <= version <= 9:
            raise ValueError(f"Metadata v{version} is not handled by the capture helper")
        w = Writer(flexible=version >= 9)
        if version >= 3:
            w.int32(0)  # throttle_time_ms
        w.array_length(1)  # brokers
        w.int32(self.node_id).string("127.0.0.1").int32(self.port).string(None).tags()  # rack v1+
        if version >= 2:
            w.string("capture-cluster")
        w.int32(self.node_id)  # controller_id
        w.array_length(len(self.topics))
        for topic in self.topics:
            w.int16(0).string(topic).int8(0)  # error_code, name, is_internal
            w.array_length(1)  # partitions
            w.int16(0).int32(0).int32(self.node_id)  # error_code, partition_index, leader_id
            if version >= 7:
                w.int32(0)  # leader_epoch
            w.int32_array([self.node_id]).int32_array([self.node_id])  # replicas, isr
            if version >= 5:
                w.int32_array([])  # offline_replicas
            w.tags()
            if version >= 8:
                w.int32(-2147483648)  # topic_authorized_operations: not requested
            w.tags()
        if version >= 8:
            w.int32(-2147483648)  # cluster_authorized_operations
        w.tags()
        return bytes(w.out)

    def _init_producer_id_body(self, version: int) -> bytes:
        w = Writer(flexible=version >= 2)
        w.int32(0).int16(0).int64(self.producer_id).int16(self.producer_epoch).tags()
        return bytes(w.out)

    def _produce_body(self, version: int, request: ProduceRequest) -> bytes:
        w = Writer(flexible=version >= 9)
        by_topic: dict[str, list[ProducePartition]] = {}
        for p in request.partitions:
            by_topic.setdefault(p.topic, []).append(p)
        w.array_length(len(by_topic))
        for topic, parts in by_topic.items():
            w.string(topic)
            w.array_length(len(parts))
            for p in parts:
                with self._lock:
                    base = self._next_offset.get((topic, p.partition), 0)
                    self._next_offset[(topic, p.partition)] = base + _count_records(p.records)
                w.int32(p.partition).int16(0).int64(base)  # index, error_code, base_offset
                w.int64(-1)  # log_append_time_ms (v2+)
                if version >= 5:
                    w.int64(0)  # log_start_offset
                if version >= 8:
                    w.array_length(0)  # record_errors
                    w.string(None)  # error_message
                w.tags()
            w.tags()
        w.int32(0)  # throttle_time_ms
        w.tags()
        return bytes(w.out)


def _count_records(records: bytes | None) -> int:
    """Offsets taken by the batches in ``records`` (sum of lastOffsetDelta + 1), read by hand."""
    total, pos = 0, 0
    data = records or b""
    while pos + 61 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (last_offset_delta,) = struct.unpack_from(">i", data, pos + 23)
        total += last_offset_delta + 1
        pos += 12 + length
    return total


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = conn.recv(n - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)
