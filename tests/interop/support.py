"""Shared helpers for the interop tests: a module-scoped broker, a raw reader of a partition's log,
raw topic creation and ListOffsets (the fault-injecting TCP proxy lives in
`exactly.verify.proxy`).

Everything here talks to the broker with our own codecs (`RawClient`), so a test that checks what a
real client did reads the result back independently of that client.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from exactly.cluster.metadata import ClusterMetadata
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
from exactly.security.sasl import make_scram_credential
from exactly.testing.processes import BrokerProcess
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


# --- SCRAM users --------------------------------------------------------------------------------------


def scram_settings(user: str, password: str) -> dict[str, str]:
    """confluent-kafka settings of a client authenticated as `user` (SASL_PLAINTEXT, SCRAM-SHA-256)."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def add_scram_users(
    bootstrap: str,
    users: dict[str, str],
    mechanism: ScramMechanism,
    iterations: int = 8192,
    client_conf: dict[str, str] | None = None,
) -> None:
    """Store `users` (name -> password) with confluent-kafka's AlterUserScramCredentials; `client_conf`
    reaches a SASL listener as an existing user."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client_conf or {})})
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password.encode())
            for user, password in users.items()
        ]
    )
    for future in futures.values():
        future.result(30)


def store_scram_users(data_dir: Path, users: dict[str, str], mechanism: str = "SCRAM-SHA-256") -> None:
    """Store `users` (name -> password, 4096 iterations) in a broker's metadata log before it starts, as
    `exactly users add --data-dir` does (the way to make the first users of a SASL-only broker)."""
    metadata = ClusterMetadata(data_dir)
    try:
        for user, password in users.items():
            metadata.set_scram_credential(user, mechanism, make_scram_credential(mechanism, password, 4096))
    finally:
        metadata.close()
