"""A transactional producer at the protocol level, speaking transaction version 2 (KIP-890 part 2) or 1.

No Python or Go Kafka client speaks transaction version 2 yet (librdkafka has it planned:
confluentinc/librdkafka#5423; kafka-python stops at EndTxn v3), so exactly's tests and benchmarks drive
it with this one. What a TV2 transaction costs a client, per the Java producer's TransactionManager:

* `init()`: FindCoordinator (key type 1) for the transactional id, then InitProducerId v5 to it.
* `send(topic, partition, values)`: Produce v12 (acks=all) to the partition's leader: the leader adds the
  partition to the transaction itself. TV1: AddPartitionsToTxn v3 to the coordinator first (once per
  partition per transaction), then Produce v11.
* `send_offsets(group, offsets)`: TxnOffsetCommit v5 to the group's coordinator (the group's partition is
  added implicitly). TV1: AddOffsetsToTxn v4 to the transaction coordinator first, then v4.
* `commit()` / `abort()`: EndTxn v5 — the answer names the producer id and epoch of the next
  transaction (the epoch bumped; a new producer id at epoch 0 when it was exhausted), and the
  sequences start again at 0. TV1: EndTxn v4, same producer id and epoch.

Retriable answers (CONCURRENT_TRANSACTIONS while the previous transaction's markers are written,
NOT_ENOUGH_REPLICAS from a leader whose coordinator is busy, NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER
after a move, which look the coordinator or leader up again) are retried until `timeout_s`; anything else
raises `TransactionError`. `round_trips` counts the requests sent (FindCoordinator and Metadata included)
and `last_end_request` is the last EndTxn sent, so a test can send it again (a delayed or duplicated
EndTxn). Blocking connections (`KafkaConnection`), one per broker, opened lazily. Not thread-safe.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from exactly.client.connection import ConnectionPool
from exactly.errors import ErrorCode, ProtocolError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from exactly.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from exactly.protocol.messages.add_share_acks_to_txn import (
    AcknowledgementBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    AddShareAcksToTxnRequest,
    AddShareAcksToTxnResponse,
)
from exactly.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from exactly.records.builder import BatchBuilder

__all__ = ["EndResult", "TransactionError", "TransactionalProducer"]

_GROUP_KEY, _TRANSACTION_KEY = 0, 1
_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)
_MOVED = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)
_BACKOFF_S = (0.01, 0.02, 0.05, 0.1, 0.2)


class TransactionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code


@dataclass(frozen=True, slots=True)
class EndResult:
    """The answer to one EndTxn: the producer id and epoch the next transaction uses."""

    producer_id: int
    producer_epoch: int
    round_trips: int  # requests the end took (retries included)


class TransactionalProducer:
    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        *,
        transaction_version: int = 2,
        transaction_timeout_ms: int = 60_000,
        timeout_s: float = 30.0,
        client_id: str = "exactly-txn",
    ) -> None:
        if transaction_version not in (1, 2):
            raise ValueError("transaction_version is 1 or 2")
        self.transactional_id = transactional_id
        self.transaction_version = transaction_version
        self.producer_id = -1
        self.producer_epoch = -1
        self.round_trips = 0
        self.last_end_request: EndTxnRequest | None = None
        self._bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        self._timeout_ms = transaction_timeout_ms
        self._timeout_s = timeout_s
        self._client_id = client_id
        self._connections = ConnectionPool(client_id=client_id)
        self._coordinators: dict[tuple[int, str], str] = {}
        self._leaders: dict[tuple[str, int], str] = {}
        self._sequences: dict[tuple[str, int], int] = {}
        self._added: set[tuple[str, int]] = set()  # TV1: partitions added to the open transaction
        self._offsets_added: set[str] = set()

    # --- the transaction ------------------------------------------------------------------------------

    def init(self) -> None:
        request = InitProducerIdRequest(self.transactional_id, self._timeout_ms, -1, -1)
        response = self._until_done(
            "InitProducerId", lambda: self._txn_call(ApiKey.INIT_PRODUCER_ID, 5, request), _code
        )
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self._new_transaction()

    def send(self, topic: str, partition: int, values: Sequence[bytes]) -> int:
        """Append `values` in the transaction (one batch); returns the batch's base offset."""
        tp = (topic, partition)
        if self.transaction_version == 1 and tp not in self._added:
            self._add_partitions(tp)
        sequence = self._sequences.get(tp, 0)
        builder = BatchBuilder(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        now = int(time.time() * 1000)
        for value in values:
            builder.append(now, None, value)
        request = ProduceRequest(
            self.transactional_id,
            -1,
            int(self._timeout_s * 1000),
            [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, builder.build())])],
        )
        version = 12 if self.transaction_version == 2 else 11

        def call() -> Any:
            return self._call(ApiKey.PRODUCE, version, request, self._leader(tp), lambda: self._forget(tp))

        response = self._until_done(
            f"Produce to {topic}-{partition}",
            call,
            lambda r: ErrorCode.of(r.responses[0].partition_responses[0].error_code),
        )
        self._sequences[tp] = sequence + len(values)
        offset: int = response.responses[0].partition_responses[0].base_offset
        return offset

    def send_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit the consumer offsets of `group_id` in the transaction (a producer outside the group)."""
        if self.transaction_version == 1 and group_id not in self._offsets_added:
            add = AddOffsetsToTxnRequest(
                self.transactional_id, self.producer_id, self.producer_epoch, group_id
            )
            self._until_done(
                "AddOffsetsToTxn", lambda: self._txn_call(ApiKey.ADD_OFFSETS_TO_TXN, 4, add), _code
            )
            self._offsets_added.add(group_id)
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(partition, offset))
        request = TxnOffsetCommitRequest(
            self.transactional_id,
            group_id,
            self.producer_id,
            self.producer_epoch,
            topics=[TxnOffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()],
        )
        version = 5 if self.transaction_version == 2 else 4
        route = (_GROUP_KEY, group_id)

        def call() -> Any:
            address = self._coordinator(route)
            return self._call(
                ApiKey.TXN_OFFSET_COMMIT,
                version,
                request,
                address,
                lambda: self._coordinators.pop(route, None),
            )

        self._until_done("TxnOffsetCommit", call, _first_partition_code)

    def send_share_acks(
        self,
        group_id: str,
        member_id: str,
        acks: Mapping[tuple[uuid.UUID, int], Sequence[tuple[int, int, Sequence[int]]]],
    ) -> None:
        """Acknowledge, in the open transaction, records `member_id` of share group `group_id` holds
        acquired: (topic id, partition) -> [(first offset, last offset, types)] (exactly's extension,
        AddShareAcksToTxn v0; docs/share-transactional-acks.md). Sent to a bootstrap broker, which must
        lead the partitions."""
        request = AddShareAcksToTxnRequest(
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
            group_id,
            member_id,
            [
                AcknowledgeTopic(
                    topic_id,
                    [
                        AcknowledgePartition(
                            index, [AcknowledgementBatch(f, last, list(t)) for f, last, t in batches]
                        )
                        for (tid, index), batches in sorted(acks.items(), key=lambda kv: kv[0][1])
                        if tid == topic_id
                    ],
                )
                for topic_id in sorted({t for t, _ in acks}, key=str)
            ],
        )

        def code_of(response: AddShareAcksToTxnResponse) -> ErrorCode:
            if response.error_code:
                return ErrorCode.of(response.error_code)
            codes = [ErrorCode.of(p.error_code) for t in response.responses for p in t.partitions]
            return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)

        self._until_done(
            "AddShareAcksToTxn", lambda: self._call(ApiKey.ADD_SHARE_ACKS_TO_TXN, 0, request), code_of
        )

    def commit(self) -> EndResult:
        return self._end(True)

    def abort(self) -> EndResult:
        return self._end(False)

    def _end(self, commit: bool) -> EndResult:
        before = self.round_trips
        version = 5 if self.transaction_version == 2 else 4
        request = EndTxnRequest(self.transactional_id, self.producer_id, self.producer_epoch, commit)
        self.last_end_request = request
        response: EndTxnResponse = self._until_done(
            "EndTxn", lambda: self._txn_call(ApiKey.END_TXN, version, request), _code
        )
        if version >= 5:
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self._new_transaction()
        return EndResult(self.producer_id, self.producer_epoch, self.round_trips - before)

    def end_txn(self, request: EndTxnRequest, version: int = 5) -> EndTxnResponse:
        """Send one EndTxn as it is, once (a delayed or duplicated copy); its answer, whatever it is."""
        response: EndTxnResponse = self._txn_call(ApiKey.END_TXN, version, request)
        return response

    def _new_transaction(self) -> None:
        self._added.clear()
        self._offsets_added.clear()
        if self.transaction_version == 2:
            self._sequences.clear()  # a new epoch (or producer id) starts every sequence at 0

    def _add_partitions(self, tp: tuple[str, int]) -> None:
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(tp[0], [tp[1]])],
        )
        self._until_done(
            "AddPartitionsToTxn",
            lambda: self._txn_call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, request),
            _first_partition_code_v3,
        )
        self._added.add(tp)

    # --- routing --------------------------------------------------------------------------------------

    def _txn_call(self, key: ApiKey, version: int, request: Any) -> Any:
        route = (_TRANSACTION_KEY, self.transactional_id)
        address = self._coordinator(route)
        return self._call(key, version, request, address, lambda: self._coordinators.pop(route, None))

    def _coordinator(self, route: tuple[int, str]) -> str:
        known = self._coordinators.get(route)
        if known is not None:
            return known
        request = FindCoordinatorRequest(route[1], route[0])
        response: FindCoordinatorResponse = self._until_done(
            "FindCoordinator", lambda: self._call(ApiKey.FIND_COORDINATOR, 3, request), _code
        )
        address = f"{response.host}:{response.port}"
        self._coordinators[route] = address
        return address

    def _leader(self, tp: tuple[str, int]) -> str:
        known = self._leaders.get(tp)
        if known is not None:
            return known
        request = MetadataRequest([MetadataRequestTopic(name=tp[0])], allow_auto_topic_creation=False)

        def leader_code(response: MetadataResponse) -> ErrorCode:
            for topic in response.topics:
                for p in topic.partitions:
                    if p.partition_index == tp[1]:
                        return (
                            ErrorCode.LEADER_NOT_AVAILABLE if p.leader_id < 0 else ErrorCode.of(p.error_code)
                        )
                return ErrorCode.of(topic.error_code) or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        response: MetadataResponse = self._until_done(
            "Metadata", lambda: self._call(ApiKey.METADATA, 9, request), leader_code
        )
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        for p in response.topics[0].partitions:
            if p.leader_id in brokers:
                self._leaders[(tp[0], p.partition_index)] = brokers[p.leader_id]
        return self._leaders[tp]

    def _forget(self, tp: tuple[str, int]) -> None:
        self._leaders.pop(tp, None)

    # --- requests -------------------------------------------------------------------------------------

    def _until_done(self, what: str, call: Any, code_of: Any) -> Any:
        """`call()` until its answer's code (`code_of`) is NONE; retriable codes and lost connections are
        retried with a short backoff until `timeout_s`."""
        deadline = time.monotonic() + self._timeout_s
        attempt = 0
        while True:
            try:
                response = call()
            except (OSError, ConnectionError, ProtocolError) as e:
                code, message = ErrorCode.NETWORK_EXCEPTION, str(e)
            else:
                code = code_of(response)
                if code == ErrorCode.NONE:
                    return response
                message = code.name
            if code not in _RETRIABLE and code != ErrorCode.NETWORK_EXCEPTION:
                raise TransactionError(code, f"{what} of {self.transactional_id!r}: {message}")
            if time.monotonic() >= deadline:
                raise TransactionError(code, f"{what} of {self.transactional_id!r} timed out: {message}")
            time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1

    def _call(
        self, key: ApiKey, version: int, request: Any, address: str | None = None, moved: Any = None
    ) -> Any:
        target = address or self._bootstrap[self.round_trips % len(self._bootstrap)]
        self.round_trips += 1
        try:
            deadline = time.monotonic() + self._timeout_s
            connection = self._connections.get(target, deadline)
            response = connection.request(key, version, request, deadline=deadline)
        except (OSError, ConnectionError, ProtocolError):
            self._connections.drop(target)
            if moved is not None:
                moved()
            raise
        if moved is not None and _codes(response) & _MOVED:
            moved()
        return response

    def close(self) -> None:
        self._connections.close()

    def __enter__(self) -> TransactionalProducer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _code(response: Any) -> ErrorCode:
    return ErrorCode.of(response.error_code)


def _first_partition_code(response: Any) -> ErrorCode:
    codes = [ErrorCode.of(p.error_code) for t in response.topics for p in t.partitions]
    return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)


def _first_partition_code_v3(response: Any) -> ErrorCode:
    codes = [
        ErrorCode.of(p.partition_error_code)
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]
    return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)


def _codes(response: Any) -> set[ErrorCode]:
    """Every error code of a response this client reads (to notice a moved coordinator or leader)."""
    out = set()
    if hasattr(response, "error_code"):
        out.add(ErrorCode.of(response.error_code))
    for topic in getattr(response, "responses", ()):  # Produce
        for p in topic.partition_responses:
            out.add(ErrorCode.of(p.error_code))
    return out
