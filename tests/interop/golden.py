"""Golden request frames from the real clients, decoded and answered with OUR codec.

`GoldenServer` is a threaded fake broker on 127.0.0.1 (a free port). Every request frame is decoded with
`exactly.protocol.api.decode_request` and recorded as a `Captured` (client label, api key, version, raw
frame without its size prefix, decode error if any); the answer is built from our generated response
classes and written with `encode_response`. It answers just enough for the clients to get through
producing (plain, idempotent, transactional), group consumption with offset commits,
`send_offsets_to_transaction`, and admin topic creation:

* ApiVersions: the "Verified profile" of kafka-wire.md §1.3 (`ADVERTISED`); an ApiVersions version we
  do not decode gets a v0 body with UNSUPPORTED_VERSION (35) and the ranges, as Kafka does.
* Metadata: one broker (node 0 = this server); every requested or known topic has one partition led by
  node 0, and a stable topic id (uuid5 of the name).
* FindCoordinator: this server, for groups and transactional ids, batched (v4+) or not.
* InitProducerId: producer id 1000, epoch 0 (epoch + 1 when the client asks for a KIP-360 bump).
* Produce: success; offsets are assigned per partition and the batches are kept (base offset rewritten,
  it is outside the CRC) so Fetch can serve them back.
* Fetch: the stored batches from the fetch offset on (high watermark = LSO = log end); when there is
  nothing to return it waits min(max_wait_ms, 200 ms), like a broker's long poll.
* ListOffsets, CreateTopics, JoinGroup (the joining member leads generation 1), SyncGroup (the leader's
  assignment), Heartbeat, LeaveGroup, OffsetCommit/OffsetFetch (kept in memory), AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn, TxnOffsetCommit: success.
* anything else we can decode: the default (all-success, empty) response body.

Scenarios (`SCENARIOS`) drive confluent-kafka (librdkafka), kafka-python and aiokafka against a
server with short timeouts; `capture(client)` runs one and returns its frames.

Script mode saves the frames of all three clients as golden files::

    python -m tests.interop.golden --record tests/protocol/golden

writes `<dir>/<client>/<api>_v<version>_<n>.bin` (the raw frame without size prefix), keeping at most two
frames per (client, api, version): one that does not re-encode to the same bytes if any (librdkafka's
"all topics" Metadata), then the first and the last one seen. Old `*.bin` files of a client are replaced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly.errors import ProtocolError
from exactly.protocol.api import (
    API_SPECS,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    encode_request,
    encode_response,
)
from exactly.protocol.messages import MODULES, ApiKey
from exactly.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from exactly.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from exactly.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from exactly.protocol.messages.create_topics import CreatableTopicResult, CreateTopicsResponse
from exactly.protocol.messages.end_txn import EndTxnResponse
from exactly.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from exactly.protocol.messages.find_coordinator import Coordinator, FindCoordinatorResponse
from exactly.protocol.messages.heartbeat import HeartbeatResponse
from exactly.protocol.messages.init_producer_id import InitProducerIdResponse
from exactly.protocol.messages.join_group import JoinGroupResponse, JoinGroupResponseMember
from exactly.protocol.messages.leave_group import LeaveGroupResponse, MemberResponse
from exactly.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from exactly.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from exactly.protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from exactly.protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from exactly.protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from exactly.protocol.messages.sync_group import SyncGroupResponse
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

UNSUPPORTED_VERSION = 35
PRODUCER_ID = 1000
NODE_ID = 0
CLUSTER_ID = "golden-cluster"
TOPIC = "golden"
ADMIN_TOPIC = "golden-admin"
GROUP = "golden-group"
TIMEOUT_S = 10.0

#: kafka-wire.md §1.3 "Verified profile"; the other APIs at the ranges we generate codecs for.
VERIFIED_PROFILE: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 8),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
}
ADVERTISED: dict[int, tuple[int, int]] = {
    **{key: (spec.min_version, spec.max_version) for key, spec in API_SPECS.items()},
    **VERIFIED_PROFILE,
}


@dataclass(frozen=True, slots=True)
class Captured:
    """One request as a client sent it: `raw` is the frame without its 4-byte size prefix."""

    client: str
    api_key: int
    api_version: int
    raw: bytes
    error: str | None = None

    @property
    def api_name(self) -> str:
        return ApiKey(self.api_key).name.lower() if self.api_key in API_SPECS else f"api{self.api_key}"

    @property
    def file_stem(self) -> str:
        return f"{self.api_name}_v{self.api_version}"


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"exactly-golden:{name}")


def _response_class(key: int) -> type[Any]:
    name = "".join(part.capitalize() for part in ApiKey(key).name.split("_")) + "Response"
    cls: type[Any] = getattr(MODULES[ApiKey(key)], name)
    return cls


@dataclass
class _Log:
    next_offset: int = 0
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # (base, last, batch bytes)

    def append(self, records: bytes | memoryview | None) -> int:
        """Assign offsets to every v2 batch in `records`; returns the base offset of the first."""
        first = self.next_offset
        data = bytes(records or b"")
        pos = 0
        while pos + 61 <= len(data):
            end = pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
            batch = bytearray(data[pos:end])
            last_delta = int.from_bytes(batch[23:27], "big", signed=True)
            batch[0:8] = self.next_offset.to_bytes(8, "big", signed=True)
            last = self.next_offset + last_delta
            self.batches.append((self.next_offset, last, bytes(batch)))
            self.next_offset = last + 1
            pos = end
        return first

    def read(self, offset: int, max_bytes: int) -> bytes:
        out = b""
        for _base, last, batch in self.batches:
            if last >= offset and (not out or len(out) + len(batch) <= max_bytes):
                out += batch
        return out


class GoldenServer:
    """Threaded fake broker that records every request of one client (see the module docstring)."""

    def __init__(self, client: str, topics: tuple[str, ...] = ()) -> None:
        self.client = client
        self.frames: list[Captured] = []
        self.handler_errors: list[str] = []
        self._topics: set[str] = set(topics)
        self._logs: dict[tuple[str, int], _Log] = {}
        self._offsets: dict[tuple[str, str, int], int] = {}
        self._members = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._connections: list[socket.socket] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- lifecycle --

    def __enter__(self) -> GoldenServer:
        self._listener.listen(32)
        self._listener.settimeout(0.1)
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
        self._listener.close()

    def captured(self) -> list[Captured]:
        with self._lock:
            return list(self.frames)

    def seen(self, api_key: int) -> bool:
        with self._lock:
            return any(f.api_key == api_key for f in self.frames)

    def wait_for(self, api_key: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.seen(api_key):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._connections.append(conn)
            self._spawn(self._serve, conn)

    @staticmethod
    def _read_exact(conn: socket.socket, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            while not self._stopping.is_set():
                size = self._read_exact(conn, 4)
                if size is None:
                    return
                raw = self._read_exact(conn, int.from_bytes(size, "big", signed=True))
                if raw is None:
                    return
                response = self._handle(raw)
                if response is not None:
                    conn.sendall(response)

    # -- requests --

    def _record(self, api_key: int, api_version: int, raw: bytes, error: str | None) -> None:
        with self._lock:
            self.frames.append(Captured(self.client, api_key, api_version, raw, error))

    def _handle(self, raw: bytes) -> bytes | None:
        api_key = int.from_bytes(raw[0:2], "big", signed=True) if len(raw) >= 2 else -1
        api_version = int.from_bytes(raw[2:4], "big", signed=True) if len(raw) >= 4 else -1
        try:
            header, body = decode_request(raw)
        except UnsupportedVersionError as e:
            self._record(api_key, api_version, raw, f"unsupported: {e}")
            if e.header.api_key != ApiKey.API_VERSIONS:
                return None
            # Kafka answers an ApiVersions version it cannot parse with a v0 body: error 35 + ranges.
            reply = self._api_versions()
            reply.error_code = UNSUPPORTED_VERSION
            return b"".join(encode_response(e.header._replace(api_version=0), reply))
        except ProtocolError as e:
            self._record(api_key, api_version, raw, f"malformed: {e}")
            return None
        self._record(header.api_key, header.api_version, raw, None)
        try:
            reply = self._respond(header, body)
        except Exception as e:  # noqa: BLE001 - keep serving; the test reports handler bugs
            with self._lock:
                self.handler_errors.append(f"{ApiKey(header.api_key).name} v{header.api_version}: {e!r}")
            return None
        if reply is None:
            return None
        return b"".join(encode_response(header, reply))

    def _respond(self, header: RequestHeader, req: Any) -> Any:
        handler = _HANDLERS.get(header.api_key)
        if handler is None:
            return _response_class(header.api_key)()
        return handler(self, header, req)

    # -- handlers --

    def _api_versions(self, *_: Any) -> ApiVersionsResponse:
        return ApiVersionsResponse(
            error_code=0, api_keys=[ApiVersion(key, lo, hi) for key, (lo, hi) in sorted(ADVERTISED.items())]
        )

    def _broker(self) -> MetadataResponseBroker:
        return MetadataResponseBroker(NODE_ID, "127.0.0.1", self.port, None)

    def _topic_metadata(self, name: str) -> MetadataResponseTopic:
        partition = MetadataResponsePartition(0, 0, NODE_ID, 0, [NODE_ID], [NODE_ID], [])
        return MetadataResponseTopic(0, name, topic_id(name), False, [partition])

    def _metadata(self, _header: RequestHeader, req: Any) -> MetadataResponse:
        with self._lock:
            if req.topics is not None:
                by_id = {topic_id(name): name for name in self._topics}
                for t in req.topics:
                    name = t.name if t.name is not None else by_id.get(t.topic_id)
                    if name:
                        self._topics.add(name)
                names = [t.name if t.name is not None else by_id.get(t.topic_id, "") for t in req.topics]
            else:
                names = sorted(self._topics)
        return MetadataResponse(
            brokers=[self._broker()],
            cluster_id=CLUSTER_ID,
            controller_id=NODE_ID,
            topics=[self._topic_metadata(name) for name in names if name],
        )

    def _find_coordinator(self, _header: RequestHeader, req: Any) -> FindCoordinatorResponse:
        keys = req.coordinator_keys or [req.key]
        return FindCoordinatorResponse(
            error_message=None,
            node_id=NODE_ID,
            host="127.0.0.1",
            port=self.port,
            coordinators=[Coordinator(k, NODE_ID, "127.0.0.1", self.port, 0, None) for k in keys],
        )

    def _init_producer_id(self, _header: RequestHeader, req: Any) -> InitProducerIdResponse:
        epoch = req.producer_epoch + 1 if req.producer_id == PRODUCER_ID else 0
        return InitProducerIdResponse(producer_id=PRODUCER_ID, producer_epoch=epoch)

    def _produce(self, _header: RequestHeader, req: Any) -> ProduceResponse | None:
        responses = []
        with self._lock:
            for topic in req.topic_data:
                self._topics.add(topic.name)
                parts = []
                for p in topic.partition_data:
                    log = self._logs.setdefault((topic.name, p.index), _Log())
                    parts.append(PartitionProduceResponse(p.index, 0, log.append(p.records), -1, 0))
                responses.append(TopicProduceResponse(topic.name, topic_id(topic.name), parts))
        return None if req.acks == 0 else ProduceResponse(responses=responses)

    def _fetch(self, _header: RequestHeader, req: Any) -> FetchResponse:
        deadline = time.monotonic() + min(req.max_wait_ms, 200) / 1000
        while True:
            responses = []
            found = False
            with self._lock:
                for topic in req.topics:
                    parts = []
                    for p in topic.partitions:
                        log = self._logs.get((topic.topic, p.partition), _Log())
                        records = log.read(p.fetch_offset, p.partition_max_bytes)
                        found = found or bool(records)
                        parts.append(
                            PartitionData(
                                p.partition,
                                0,
                                high_watermark=log.next_offset,
                                last_stable_offset=log.next_offset,
                                log_start_offset=0,
                                aborted_transactions=[] if req.isolation_level else None,
                                records=records,
                            )
                        )
                    responses.append(FetchableTopicResponse(topic.topic, topic.topic_id, parts))
            if found or time.monotonic() >= deadline or self._stopping.is_set():
                return FetchResponse(session_id=0, responses=responses)
            time.sleep(0.02)

    def _list_offsets(self, _header: RequestHeader, req: Any) -> ListOffsetsResponse:
        topics = []
        with self._lock:
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    end = self._logs.get((t.name, p.partition_index), _Log()).next_offset
                    offset = 0 if p.timestamp == -2 else end
                    parts.append(ListOffsetsPartitionResponse(p.partition_index, 0, [offset], -1, offset, 0))
                topics.append(ListOffsetsTopicResponse(t.name, parts))
        return ListOffsetsResponse(topics=topics)

    def _create_topics(self, _header: RequestHeader, req: Any) -> CreateTopicsResponse:
        results = []
        with self._lock:
            for t in req.topics:
                self._topics.add(t.name)
                partitions = t.num_partitions if t.num_partitions > 0 else 1
                results.append(CreatableTopicResult(t.name, topic_id(t.name), 0, None, 0, partitions, 1, []))
        return CreateTopicsResponse(topics=results)

    def _join_group(self, _header: RequestHeader, req: Any) -> JoinGroupResponse:
        member_id = req.member_id
        if not member_id:
            with self._lock:
                self._members += 1
                member_id = f"{req.group_id}-member-{self._members}"
        protocol = req.protocols[0] if req.protocols else None
        return JoinGroupResponse(
            generation_id=1,
            protocol_type=req.protocol_type,
            protocol_name=protocol.name if protocol else None,
            leader=member_id,
            member_id=member_id,
            members=[
                JoinGroupResponseMember(
                    member_id, req.group_instance_id, protocol.metadata if protocol else b""
                )
            ],
        )

    def _sync_group(self, _header: RequestHeader, req: Any) -> SyncGroupResponse:
        assignment = next((a.assignment for a in req.assignments if a.member_id == req.member_id), b"")
        return SyncGroupResponse(
            protocol_type=req.protocol_type, protocol_name=req.protocol_name, assignment=assignment
        )

    def _heartbeat(self, *_: Any) -> HeartbeatResponse:
        return HeartbeatResponse()

    def _leave_group(self, _header: RequestHeader, req: Any) -> LeaveGroupResponse:
        return LeaveGroupResponse(
            members=[MemberResponse(m.member_id, m.group_instance_id, 0) for m in req.members]
        )

    def _offset_commit(self, _header: RequestHeader, req: Any) -> OffsetCommitResponse:
        topics = []
        with self._lock:
            for t in req.topics:
                for p in t.partitions:
                    self._offsets[(req.group_id, t.name, p.partition_index)] = p.committed_offset
                parts = [OffsetCommitResponsePartition(p.partition_index, 0) for p in t.partitions]
                topics.append(OffsetCommitResponseTopic(t.name, t.topic_id, parts))
        return OffsetCommitResponse(topics=topics)

    def _committed(
        self, group: str, topics: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, int]]]]:
        with self._lock:
            if topics is None:
                found: dict[str, list[int]] = {}
                for g, name, partition in self._offsets:
                    if g == group:
                        found.setdefault(name, []).append(partition)
                topics = sorted(found.items())
            return [
                (name, [(p, self._offsets.get((group, name, p), -1)) for p in partitions])
                for name, partitions in topics
            ]

    def _offset_fetch(self, _header: RequestHeader, req: Any) -> OffsetFetchResponse:
        if req.groups:
            groups = []
            for g in req.groups:
                wanted = None if g.topics is None else [(t.name, t.partition_indexes) for t in g.topics]
                groups.append(
                    OffsetFetchResponseGroup(
                        g.group_id,
                        [
                            OffsetFetchResponseTopics(
                                name,
                                topic_id(name),
                                [OffsetFetchResponsePartitions(p, off, -1, "", 0) for p, off in parts],
                            )
                            for name, parts in self._committed(g.group_id, wanted)
                        ],
                        0,
                    )
                )
            return OffsetFetchResponse(groups=groups)
        wanted = None if req.topics is None else [(t.name, t.partition_indexes) for t in req.topics]
        return OffsetFetchResponse(
            topics=[
                OffsetFetchResponseTopic(
                    name, [OffsetFetchResponsePartition(p, off, -1, "", 0) for p, off in parts]
                )
                for name, parts in self._committed(req.group_id, wanted)
            ]
        )

    def _add_partitions_to_txn(self, _header: RequestHeader, req: Any) -> AddPartitionsToTxnResponse:
        return AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[
                AddPartitionsToTxnTopicResult(
                    t.name, [AddPartitionsToTxnPartitionResult(p, 0) for p in t.partitions]
                )
                for t in req.v3_and_below_topics
            ]
        )

    def _add_offsets_to_txn(self, *_: Any) -> AddOffsetsToTxnResponse:
        return AddOffsetsToTxnResponse()

    def _end_txn(self, *_: Any) -> EndTxnResponse:
        return EndTxnResponse()

    def _txn_offset_commit(self, _header: RequestHeader, req: Any) -> TxnOffsetCommitResponse:
        return TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponseTopic(
                    t.name, [TxnOffsetCommitResponsePartition(p.partition_index, 0) for p in t.partitions]
                )
                for t in req.topics
            ]
        )


_HANDLERS: dict[int, Callable[[GoldenServer, RequestHeader, Any], Any]] = {
    ApiKey.API_VERSIONS: GoldenServer._api_versions,
    ApiKey.METADATA: GoldenServer._metadata,
    ApiKey.FIND_COORDINATOR: GoldenServer._find_coordinator,
    ApiKey.INIT_PRODUCER_ID: GoldenServer._init_producer_id,
    ApiKey.PRODUCE: GoldenServer._produce,
    ApiKey.FETCH: GoldenServer._fetch,
    ApiKey.LIST_OFFSETS: GoldenServer._list_offsets,
    ApiKey.CREATE_TOPICS: GoldenServer._create_topics,
    ApiKey.JOIN_GROUP: GoldenServer._join_group,
    ApiKey.SYNC_GROUP: GoldenServer._sync_group,
    ApiKey.HEARTBEAT: GoldenServer._heartbeat,
    ApiKey.LEAVE_GROUP: GoldenServer._leave_group,
    ApiKey.OFFSET_COMMIT: GoldenServer._offset_commit,
    ApiKey.OFFSET_FETCH: GoldenServer._offset_fetch,
    ApiKey.ADD_PARTITIONS_TO_TXN: GoldenServer._add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: GoldenServer._add_offsets_to_txn,
    ApiKey.END_TXN: GoldenServer._end_txn,
    ApiKey.TXN_OFFSET_COMMIT: GoldenServer._txn_offset_commit,
}


# --- client scenarios -------------------------------------------------------------------------------------
# Each: admin create_topics; plain produce; idempotent produce; a group consumer (subscribe, fetch, commit)
# that stays in the group while a transactional producer does init/begin/produce/send_offsets/commit.

MESSAGES = [(b"k%d" % i, b"value-%d" % i) for i in range(3)]


def run_librdkafka(server: GoldenServer) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    bootstrap = server.bootstrap
    common: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 5000,
        "api.version.request.timeout.ms": 5000,
    }
    admin = AdminClient(common)
    for future in admin.create_topics([NewTopic(ADMIN_TOPIC, 1, 1)], operation_timeout=5).values():
        future.result(timeout=TIMEOUT_S)
    # An "all topics" Metadata request (topics = null): librdkafka 2.16 leaves a 4-byte array-count
    # placeholder in it, so its body is followed by 3 stray bytes (see exactly.protocol.api.decode_request).
    assert TOPIC in admin.list_topics(timeout=TIMEOUT_S).topics

    for extra in ({"acks": "all"}, {"enable.idempotence": True}):
        producer = Producer({**common, "linger.ms": 5, "message.timeout.ms": 10000, **extra})
        for key, value in MESSAGES:
            producer.produce(TOPIC, value=value, key=key, partition=0)
        assert producer.flush(TIMEOUT_S) == 0

    consumer = Consumer(
        {
            **common,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.subscribe([TOPIC])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 2 * len(MESSAGES) and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append(msg)
        assert len(got) >= 2 * len(MESSAGES), len(got)
        consumer.commit(asynchronous=False)
        deadline = time.monotonic() + TIMEOUT_S
        while not server.seen(ApiKey.HEARTBEAT) and time.monotonic() < deadline:
            consumer.poll(0.05)  # stay in the group until the first heartbeat

        producer = Producer({**common, "transactional.id": "golden-txn", "transaction.timeout.ms": 10000})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        for key, value in MESSAGES:
            producer.produce(TOPIC, value=value, key=key, partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(TOPIC, 0, got[-1].offset() + 1)], consumer.consumer_group_metadata(), TIMEOUT_S
        )
        producer.commit_transaction(TIMEOUT_S)
    finally:
        consumer.close()


def run_kafka_python(server: GoldenServer) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.structs import OffsetAndMetadata, TopicPartition

    bootstrap = server.bootstrap

    timeouts = {"request_timeout_ms": 5000}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **timeouts)
    try:
        admin.create_topics([NewTopic(ADMIN_TOPIC, 1, 1)], timeout_ms=5000)
    finally:
        admin.close()

    for extra in ({"acks": "all"}, {"enable_idempotence": True}):
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **timeouts, **extra)
        try:
            futures = [producer.send(TOPIC, value=v, key=k, partition=0) for k, v in MESSAGES]
            producer.flush(TIMEOUT_S)
            for f in futures:
                f.get(TIMEOUT_S)
        finally:
            producer.close(TIMEOUT_S)

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        session_timeout_ms=6000,
        heartbeat_interval_ms=100,
        isolation_level="read_committed",
        **timeouts,
    )
    try:
        consumer.subscribe([TOPIC])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 2 * len(MESSAGES) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=100).values():
                got.extend(records)
        assert len(got) >= 2 * len(MESSAGES), len(got)
        consumer.commit()
        deadline = time.monotonic() + TIMEOUT_S
        while not server.seen(ApiKey.HEARTBEAT) and time.monotonic() < deadline:
            consumer.poll(timeout_ms=50)  # stay in the group until the first heartbeat

        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id="golden-txn",
            transaction_timeout_ms=10000,
            **timeouts,
        )
        try:
            producer.init_transactions()
            producer.begin_transaction()
            for key, value in MESSAGES:
                producer.send(TOPIC, value=value, key=key, partition=0)
            producer.send_offsets_to_transaction(
                {TopicPartition(TOPIC, 0): OffsetAndMetadata(got[-1].offset + 1, "", -1)},
                consumer.group_metadata(),
            )
            producer.commit_transaction()
        finally:
            producer.close(TIMEOUT_S)
    finally:
        consumer.close()


def run_aiokafka(server: GoldenServer) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    bootstrap = server.bootstrap

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(ADMIN_TOPIC, 1, 1)], timeout_ms=5000)
        finally:
            await admin.close()

        for extra in ({"acks": "all"}, {"enable_idempotence": True}):
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=5000, **extra
            )
            await producer.start()
            try:
                for key, value in MESSAGES:
                    await producer.send_and_wait(TOPIC, value=value, key=key, partition=0)
            finally:
                await producer.stop()

        consumer = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            session_timeout_ms=6000,
            heartbeat_interval_ms=100,
            isolation_level="read_committed",
            request_timeout_ms=5000,
        )
        await consumer.start()
        try:
            got: list[Any] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 2 * len(MESSAGES) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    got.extend(records)
            assert len(got) >= 2 * len(MESSAGES), len(got)
            await consumer.commit()
            # Stay in the group until the first heartbeat (aiokafka sends it from its own task).
            await asyncio.to_thread(server.wait_for, ApiKey.HEARTBEAT, TIMEOUT_S)

            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap, transactional_id="golden-txn", request_timeout_ms=5000
            )
            await producer.start()
            try:
                async with producer.transaction():
                    for key, value in MESSAGES:
                        await producer.send_and_wait(TOPIC, value=value, key=key, partition=0)
                    await producer.send_offsets_to_transaction(
                        {TopicPartition(TOPIC, 0): got[-1].offset + 1}, GROUP
                    )
            finally:
                await producer.stop()
        finally:
            await consumer.stop()

    asyncio.run(run())


SCENARIOS: dict[str, Callable[[GoldenServer], None]] = {
    "librdkafka": run_librdkafka,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


@contextlib.contextmanager
def golden_server(client: str) -> Iterator[GoldenServer]:
    with GoldenServer(client, topics=(TOPIC,)) as server:
        yield server


def capture(client: str) -> list[Captured]:
    """Run `client`'s scenario against a fresh server and return every request frame it sent."""
    with golden_server(client) as server:
        SCENARIOS[client](server)
        time.sleep(0.05)  # let the last in-flight request (e.g. LeaveGroup on close) be recorded
        if server.handler_errors:
            raise AssertionError(f"golden server handler errors: {server.handler_errors}")
        return server.captured()


def reencode(raw: bytes) -> bytes:
    """`raw` decoded with our codec and encoded again (without size prefix)."""
    header, body = decode_request(raw)
    frame = encode_request(header.api_key, header.api_version, header.correlation_id, header.client_id, body)
    return frame[4:]


def select(frames: list[Captured], per_kind: int = 2) -> list[Captured]:
    """At most `per_kind` frames per (client, api, version): a frame that does not re-encode to the same
    bytes if there is one (librdkafka's "all topics" Metadata), then the first and the last one seen."""
    groups: dict[tuple[str, int, int], list[Captured]] = {}
    for f in frames:
        groups.setdefault((f.client, f.api_key, f.api_version), []).append(f)
    chosen: list[Captured] = []
    for group in groups.values():
        irregular = [f for f in group if reencode(f.raw) != f.raw]
        picks: list[Captured] = []
        for f in [*irregular[:1], group[0], group[-1]]:
            if f not in picks:
                picks.append(f)
        chosen.extend(picks[:per_kind])
    return chosen


def record(directory: Path, clients: list[str]) -> list[Path]:
    written: list[Path] = []
    for client in clients:
        frames = capture(client)
        bad = [f for f in frames if f.error is not None]
        if bad:
            raise SystemExit(f"{client}: frames that do not decode: {[(f.file_stem, f.error) for f in bad]}")
        out = directory / client
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.bin"):
            old.unlink()
        counts: dict[str, int] = {}
        for f in select(frames):
            n = counts.get(f.file_stem, 0)
            counts[f.file_stem] = n + 1
            path = out / f"{f.file_stem}_{n}.bin"
            path.write_bytes(f.raw)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--record", type=Path, required=True, help="directory for <client>/<api>_v<ver>_<n>.bin"
    )
    parser.add_argument("--client", action="append", choices=sorted(SCENARIOS), help="default: all clients")
    args = parser.parse_args(argv)
    written = record(args.record, args.client or list(SCENARIOS))
    total = sum(p.stat().st_size for p in written)
    print(f"wrote {len(written)} frames, {total} bytes, under {args.record}")


if __name__ == "__main__":
    main()
