"""A synchronous client of exactly's two-phase commit extension (docs/two-phase-commit.md).

Used by the Spark sink (design (b) of the Spark notes): each task produces its rows with a confluent-kafka
transactional producer whose `transactional.id` is unique per task attempt, flushes, calls
`prepare(tid, query, batch, partition)` and drops the producer without commit or abort; the driver's
`commit(messages, batchId)` calls `commit_batch(query, batch, tids)` and its `abort` calls
`abort_batch(query, batch)`. librdkafka does not expose producer ids and epochs, so the transactional id
alone names a transaction.

Requests go to the transaction coordinator of their key (PrepareTxn: the transactional id; CommitBatch,
AbortBatch: the query id; ListPreparedTxns: the bootstrap broker), found with FindCoordinator (key type 1)
through the first reachable address of `bootstrap`; a single-node broker is every coordinator. An answer
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, or a lost connection, forgets the coordinator and the next
attempt finds it again (a cluster's coordinator moved with its `__transaction_state` partition). In a
cluster a batch is decided by its query id's coordinator, which must also coordinate the batch's
transactions: the Spark sink picks transactional ids in the query id's partition (`colocated_id`). If
FindCoordinator is refused (an ACL), the request goes to the bootstrap broker. Connections are blocking
(`exactly.client.connection.KafkaConnection`), one per broker, opened lazily; `config` takes the
librdkafka security settings (`security.protocol`, `sasl.*`, `ssl.*`: exactly.client.security) and the
connection does TLS and SASL as the confluent-kafka clients given the same settings would. Every operation
is idempotent, so a lost connection or a retriable error (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_
PROGRESS, ...) is retried on a fresh connection until `timeout` seconds have passed; a retried
`commit_batch` whose first attempt had already decided answers `already_decided=True` with the same
winners. Errors raise `TwoPhaseCommitError`. Not thread-safe: one client per thread.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from exactly.client.connection import KafkaConnection
from exactly.client.security import ClientSecurity, SaslRefusedError
from exactly.errors import ErrorCode, ProtocolError
from exactly.group.partitioning import partition_for
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.abort_batch import AbortBatchRequest, AbortBatchResponse
from exactly.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from exactly.protocol.messages.commit_batch import CommitBatchRequest, CommitBatchResponse
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from exactly.protocol.messages.list_prepared_txns import (
    ListPreparedTxnsRequest,
    ListPreparedTxnsResponse,
)
from exactly.protocol.messages.prepare_txn import PrepareTxnRequest

__all__ = [
    "BatchDecision",
    "PreparedTransaction",
    "TwoPhaseClient",
    "TwoPhaseCommitError",
    "colocated_id",
]

_REQUIRED = (ApiKey.PREPARE_TXN, ApiKey.COMMIT_BATCH, ApiKey.ABORT_BATCH)
_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)
_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
FIND_COORDINATOR_VERSION = 3  # one key per request, flexible
# Kafka's default transaction.state.log.num.partitions; colocated_id is right only for brokers using it
TRANSACTION_STATE_PARTITIONS = 50


def colocated_id(prefix: str, query_id: str, partitions: int = TRANSACTION_STATE_PARTITIONS) -> str:
    """``<prefix>.<uuid4 hex>`` whose `__transaction_state` partition is the query id's (of `partitions`),
    so that the broker deciding the query's batches coordinates the transaction too (about `partitions`
    draws; a single node coordinates every id anyway)."""
    target = partition_for(query_id, partitions)
    while True:
        candidate = f"{prefix}.{uuid.uuid4().hex}"
        if partition_for(candidate, partitions) == target:
            return candidate


class TwoPhaseCommitError(Exception):
    """The broker refused an operation (or could not be reached: NETWORK_EXCEPTION / REQUEST_TIMED_OUT)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class BatchDecision:
    """The decision of one batch: the transactional ids that commit."""

    query_id: str
    batch_id: int
    winners: tuple[str, ...]
    already_decided: bool


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    """A transaction waiting for its batch's decision (ListPreparedTxns)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    query_id: str
    batch_id: int
    partition: int
    prepared_timestamp_ms: int
    partitions: tuple[tuple[str, int], ...]


def _code(raw: int) -> ErrorCode:
    try:
        return ErrorCode(raw)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class TwoPhaseClient:
    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float = 30.0,
        client_id: str = "exactly-2pc",
        config: Mapping[str, object] | None = None,
    ) -> None:
        """`config`: librdkafka settings; only the security ones are read (ValueError if they are bad)."""
        self._security = ClientSecurity.from_config(config or {})
        self._addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
        if not self._addresses:
            raise ValueError("bootstrap names no broker address")
        self._timeout = timeout
        self._client_id = client_id
        self._connections: dict[str, KafkaConnection] = {}  # by "host:port"
        self._coordinators: dict[str, str] = {}  # key -> "host:port" of its coordinator

    # --- the extension ---------------------------------------------------------------------------------

    def supported(self) -> bool:
        """True if the broker advertises the extension (and so has it enabled)."""
        response: ApiVersionsResponse = self._call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        if response.error_code:
            return False
        keys = {key.api_key for key in response.api_keys}
        return all(int(key) in keys for key in _REQUIRED)

    def prepare(self, transactional_id: str, query_id: str, batch_id: int, partition: int) -> None:
        """Move the id's Ongoing transaction to Prepared for (query, batch, partition); durable on return."""
        request = PrepareTxnRequest(transactional_id, query_id, batch_id, partition)
        self._until_done(ApiKey.PREPARE_TXN, request, f"PrepareTxn of {transactional_id!r}", transactional_id)

    def commit_batch(self, query_id: str, batch_id: int, winners: Sequence[str]) -> BatchDecision:
        """Decide the batch (once): `winners` commit, every other transaction prepared for it aborts. A
        batch decided before answers its stored winners with `already_decided=True`."""
        request = CommitBatchRequest(query_id, batch_id, list(winners))
        response: CommitBatchResponse = self._until_done(
            ApiKey.COMMIT_BATCH, request, f"CommitBatch ({query_id!r}, {batch_id})", query_id
        )
        return BatchDecision(query_id, batch_id, tuple(response.winners), response.already_decided)

    def abort_batch(self, query_id: str, batch_id: int) -> BatchDecision | None:
        """Abort the batch's prepared work unless it is decided; returns the decision if there is one
        (nothing was aborted: roll forward), else None."""
        response = self._abort(query_id, batch_id)
        if not response.decided:
            return None
        return BatchDecision(query_id, batch_id, tuple(response.winners), True)

    # --- operators (`exactly txn`) ---------------------------------------------------------------------

    def abort_query(self, query_id: str) -> list[str]:
        """Abort the prepared work of every undecided batch of the query; returns the aborted ids."""
        return list(self._abort(query_id, -1).aborted)

    def abort_batch_ids(self, query_id: str, batch_id: int) -> tuple[BatchDecision | None, list[str]]:
        """`abort_batch`, also returning the transactional ids it aborted."""
        response = self._abort(query_id, batch_id)
        if not response.decided:
            return None, list(response.aborted)
        decision = BatchDecision(query_id, batch_id, tuple(response.winners), True)
        return decision, list(response.aborted)

    def list_prepared(
        self, query_id: str | None = None
    ) -> tuple[list[PreparedTransaction], list[BatchDecision]]:
        """The Prepared transactions and the recorded decisions (of one query, or of all)."""
        response: ListPreparedTxnsResponse = self._until_done(
            ApiKey.LIST_PREPARED_TXNS, ListPreparedTxnsRequest(query_id), "ListPreparedTxns"
        )
        prepared = [
            PreparedTransaction(
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                t.query_id,
                t.batch_id,
                t.partition,
                t.prepared_timestamp_ms,
                tuple((tp.topic, p) for tp in t.topic_partitions for p in tp.partitions),
            )
            for t in response.transactions
        ]
        decisions = [
            BatchDecision(d.query_id, d.batch_id, tuple(d.winners), True) for d in response.decisions
        ]
        return prepared, decisions

    def _abort(self, query_id: str, batch_id: int) -> AbortBatchResponse:
        request = AbortBatchRequest(query_id, batch_id)
        what = f"AbortBatch ({query_id!r}, {batch_id if batch_id >= 0 else 'all'})"
        response: AbortBatchResponse = self._until_done(ApiKey.ABORT_BATCH, request, what, query_id)
        return response

    # --- plumbing --------------------------------------------------------------------------------------

    def _until_done(self, key: ApiKey, request: Any, what: str, route: str | None = None) -> Any:
        """Send (to the coordinator of `route`, if given) until answered without a retriable error (or
        `timeout` passes)."""
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            response = self._call(key, 0, request, deadline, route)
            code = _code(response.error_code)
            if code == ErrorCode.NONE:
                return response
            if code in _MOVED and route is not None:
                self._coordinators.pop(route, None)
            message = getattr(response, "error_message", None) or code.name
            if code not in _RETRIABLE or time.monotonic() >= deadline:
                raise TwoPhaseCommitError(code, f"{what}: {message}")
            backoff = _BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)]
            time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            attempt += 1

    def _call(
        self, key: ApiKey, version: int, request: Any, deadline: float | None = None, route: str | None = None
    ) -> Any:
        """One request and its response; a lost connection is reopened and the request sent again."""
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        last: Exception | None = None
        attempt = 0
        while True:
            address = None
            try:
                address = self._address_for(route, deadline)
                return self._exchange(key, version, request, deadline, address)
            except (OSError, ConnectionError, ProtocolError) as e:
                self._drop(address)
                if route is not None:
                    self._coordinators.pop(route, None)
                last = e
            if time.monotonic() >= deadline:
                timed_out = isinstance(last, TimeoutError)
                code = ErrorCode.REQUEST_TIMED_OUT if timed_out else ErrorCode.NETWORK_EXCEPTION
                raise TwoPhaseCommitError(
                    code, f"{key.name} to {','.join(self._addresses)} failed: {last}"
                ) from last
            time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1

    def _address_for(self, route: str | None, deadline: float) -> str | None:
        """The coordinator of `route` ("host:port"; found once, then remembered), None: the bootstrap
        broker (no route, or FindCoordinator refused for good: an old broker, an ACL)."""
        if route is None:
            return None
        known = self._coordinators.get(route)
        if known is not None:
            return known
        response: FindCoordinatorResponse = self._exchange(
            ApiKey.FIND_COORDINATOR,
            FIND_COORDINATOR_VERSION,
            FindCoordinatorRequest(key=route, key_type=TRANSACTION_KEY_TYPE),
            deadline,
            None,
        )
        code = _code(response.error_code)
        if code == ErrorCode.NONE:
            address = f"{response.host}:{response.port}"
            self._coordinators[route] = address
            return address
        if code in _RETRIABLE:
            raise ConnectionError(f"FindCoordinator of {route!r}: {code.name}")
        return None

    def _exchange(self, key: ApiKey, version: int, request: Any, deadline: float, address: str | None) -> Any:
        return self._connect(deadline, address).request(key, version, request, deadline=deadline)

    def _connect(self, deadline: float, address: str | None = None) -> KafkaConnection:
        """A connection to `address`, or to the first reachable bootstrap address (None)."""
        if address is not None:
            candidates = [address]
        else:
            candidates = [a for a in self._addresses if a in self._connections][:1] or self._addresses
        errors: list[str] = []
        for candidate in candidates:
            existing = self._connections.get(candidate)
            if existing is not None:
                return existing
            host, _, port = candidate.rpartition(":")
            name = host.strip("[]") or "localhost"
            try:
                port_number = int(port)
            except ValueError as e:
                errors.append(f"{candidate}: {e}")
                continue
            try:
                connection = KafkaConnection.open(
                    name,
                    port_number,
                    security=self._security,
                    client_id=self._client_id,
                    deadline=deadline,
                )
            except SaslRefusedError as e:  # the credentials: no retry helps
                raise TwoPhaseCommitError(e.code, f"authentication to {candidate} failed: {e}") from None
            except (OSError, ConnectionError, ProtocolError) as e:
                errors.append(f"{candidate}: {e}")
                continue
            self._connections[candidate] = connection
            return connection
        raise ConnectionError("cannot connect to " + "; ".join(errors))

    def _drop(self, address: str | None = None) -> None:
        """Close the connection to `address` (None: every connection)."""
        for name in [address] if address is not None else list(self._connections):
            connection = self._connections.pop(name, None)
            if connection is not None:
                connection.close()

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> TwoPhaseClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
