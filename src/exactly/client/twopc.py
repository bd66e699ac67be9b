"""A synchronous client of exactly's two-phase commit extension (docs/two-phase-commit.md).

Used by the Spark sink (design (b) of the Spark notes): each task produces its rows with a confluent-kafka
transactional producer whose `transactional.id` comes from its query's bounded pool
(`exactly.spark.txn_ids`), flushes, calls `prepare(tid, query, batch, partition, producer_id, epoch)` and
drops the producer without commit or abort; the driver's `commit(messages, batchId)` calls
`commit_batch(query, batch, tids)` and its `abort` calls `abort_batch(query, batch)`. librdkafka does not
expose producer ids and epochs, so the task asks the coordinator (`producer_of`, DescribeTransactions)
right after `init_transactions`: the instance it names is the task's own (one that took the id over later
fences the task's AddPartitionsToTxn, so the task never gets to prepare), and PrepareTxn names it so a
zombie cannot prepare the transaction of the instance that took its pooled id over.

Blocking connections (`exactly.client.connection.KafkaConnection`), opened lazily: the first reachable
address of `bootstrap`, and one to each coordinator. Every operation goes to the coordinator of its key
(the query id; PrepareTxn: the transactional id, which the broker places with its query), found with
FindCoordinator (key type 1) and asked again after NOT_COORDINATOR or a lost connection: a single broker is
every coordinator; in a cluster the coordinator moves with its `__transaction_state` partition's leader.
`list_prepared()` of every query asks every broker (Metadata) and merges. `config` takes the
librdkafka security settings (`security.protocol`, `sasl.*`, `ssl.*`: exactly.client.security) and the
connections do TLS and SASL as the confluent-kafka clients given the same settings would. Every operation
is idempotent, so a lost connection or a retriable error (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_
PROGRESS, ...) is retried on a fresh connection until `timeout` seconds have passed; a retried
`commit_batch` whose first attempt had already decided answers `already_decided=True` with the same
winners. Errors raise `TwoPhaseCommitError`. Not thread-safe: one client per thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from exactly.client.connection import ConnectionPool, KafkaConnection
from exactly.client.security import ClientSecurity, SaslRefusedError
from exactly.errors import ErrorCode, ProtocolError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.abort_batch import AbortBatchRequest, AbortBatchResponse
from exactly.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from exactly.protocol.messages.commit_batch import CommitBatchRequest, CommitBatchResponse
from exactly.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from exactly.protocol.messages.list_prepared_txns import (
    ListPreparedTxnsRequest,
)
from exactly.protocol.messages.metadata import MetadataRequest, MetadataResponse
from exactly.protocol.messages.prepare_txn import PrepareTxnRequest

__all__ = [
    "BatchDecision",
    "PreparedTransaction",
    "TwoPhaseClient",
    "TwoPhaseCommitError",
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
_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)
_TRANSACTION_KEY = 1  # FindCoordinator key type


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
        self._connections = ConnectionPool(client_id=client_id, security=self._security)
        self._coordinators: dict[str, str] = {}  # key -> the address of its coordinator

    # --- the extension ---------------------------------------------------------------------------------

    def supported(self) -> bool:
        """True if the broker advertises the extension (and so has it enabled)."""
        response: ApiVersionsResponse = self._call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        if response.error_code:
            return False
        keys = {key.api_key for key in response.api_keys}
        return all(int(key) in keys for key in _REQUIRED)

    def prepare(
        self,
        transactional_id: str,
        query_id: str,
        batch_id: int,
        partition: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        """Move the id's Ongoing transaction to Prepared for (query, batch, partition); durable on return.
        `producer_id`/`producer_epoch` (-1: unchecked): the instance whose transaction is meant
        (INVALID_PRODUCER_EPOCH if another instance holds the id now)."""
        request = PrepareTxnRequest(
            transactional_id, query_id, batch_id, partition, producer_id, producer_epoch
        )
        self._until_done(ApiKey.PREPARE_TXN, request, f"PrepareTxn of {transactional_id!r}", transactional_id)

    def producer_of(self, transactional_id: str) -> tuple[int, int]:
        """The producer id and epoch the transactional id has now (DescribeTransactions)."""
        response: DescribeTransactionsResponse = self._until_done(
            ApiKey.DESCRIBE_TRANSACTIONS,
            DescribeTransactionsRequest([transactional_id]),
            f"DescribeTransactions of {transactional_id!r}",
            transactional_id,
            error_of=lambda r: r.transaction_states[0].error_code,
        )
        state = response.transaction_states[0]
        return state.producer_id, state.producer_epoch

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
        """The Prepared transactions and the recorded decisions (of one query: asked of its coordinator; or
        of all: asked of every broker)."""
        request = ListPreparedTxnsRequest(query_id)
        if query_id is not None:
            responses = [self._until_done(ApiKey.LIST_PREPARED_TXNS, request, "ListPreparedTxns", query_id)]
        else:
            responses = [
                self._until_done(ApiKey.LIST_PREPARED_TXNS, request, "ListPreparedTxns", address=address)
                for address in self._brokers()
            ]
        return _prepared([t for r in responses for t in r.transactions]), [
            BatchDecision(d.query_id, d.batch_id, tuple(d.winners), True)
            for r in responses
            for d in r.decisions
        ]

    def _brokers(self) -> list[str]:
        """Every broker's address, from Metadata."""
        response: MetadataResponse = self._call(ApiKey.METADATA, 1, MetadataRequest([]))
        return [f"{b.host}:{b.port}" for b in response.brokers] or [self._addresses[0]]

    def _abort(self, query_id: str, batch_id: int) -> AbortBatchResponse:
        request = AbortBatchRequest(query_id, batch_id)
        what = f"AbortBatch ({query_id!r}, {batch_id if batch_id >= 0 else 'all'})"
        response: AbortBatchResponse = self._until_done(ApiKey.ABORT_BATCH, request, what, query_id)
        return response

    # --- plumbing --------------------------------------------------------------------------------------

    def _until_done(
        self,
        key: ApiKey,
        request: Any,
        what: str,
        route: str | None = None,
        *,
        address: str | None = None,
        error_of: Callable[[Any], int] = lambda response: int(response.error_code),
    ) -> Any:
        """Send (to the coordinator of `route`, or to `address`) until answered without a retriable error
        (or `timeout` passes); `error_of` reads a response's error (by default its `error_code`)."""
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            try:
                target = address if route is None else self._coordinator(route, deadline)
                response = self._call(key, 0, request, deadline, target)
                code = ErrorCode.of(error_of(response))
            except TwoPhaseCommitError as e:  # no coordinator yet (FindCoordinator's error), or unreachable
                moving = route is not None and e.code == ErrorCode.NETWORK_EXCEPTION  # it may have died
                if (e.code not in _RETRIABLE and not moving) or time.monotonic() >= deadline:
                    raise
                code, response = e.code, None
            if code == ErrorCode.NONE:
                return response
            lost = route is not None and (code in _MOVED or response is None)
            if lost:
                assert route is not None
                self._coordinators.pop(route, None)  # asked again: it may have moved
            message = getattr(response, "error_message", None) or code.name
            if (code not in _RETRIABLE and not lost) or time.monotonic() >= deadline:
                raise TwoPhaseCommitError(code, f"{what}: {message}")
            backoff = _BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)]
            time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            attempt += 1

    def _coordinator(self, route: str, deadline: float) -> str | None:
        """The address of the coordinator of `route` (FindCoordinator, remembered until it moves); None
        (the bootstrap broker, which then answers for itself) when FindCoordinator is not authorized: a
        principal may hold ACLs for its transactional ids and not for a query id."""
        known = self._coordinators.get(route)
        if known is not None:
            return known
        request = FindCoordinatorRequest(route, _TRANSACTION_KEY)
        response: FindCoordinatorResponse = self._call(ApiKey.FIND_COORDINATOR, 1, request, deadline)
        code = ErrorCode.of(response.error_code)
        if code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return None
        if code != ErrorCode.NONE:
            raise TwoPhaseCommitError(
                code, f"FindCoordinator of {route!r}: {response.error_message or code.name}"
            )
        address = f"{response.host}:{response.port}"
        self._coordinators[route] = address
        return address

    def _call(
        self,
        key: ApiKey,
        version: int,
        request: Any,
        deadline: float | None = None,
        address: str | None = None,
    ) -> Any:
        """One request and its response (to `address`, or to the first reachable bootstrap address); a lost
        connection is reopened and the request sent again."""
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        last: Exception | None = None
        attempt = 0
        while True:
            used = address
            try:
                used, connection = self._connect(deadline, address)
                return connection.request(key, version, request, deadline=deadline)
            except (OSError, ConnectionError, ProtocolError) as e:
                if used is not None:
                    self._connections.drop(used)
                last = e
            if time.monotonic() >= deadline or (address is not None and attempt >= 2):
                timed_out = isinstance(last, TimeoutError)
                code = ErrorCode.REQUEST_TIMED_OUT if timed_out else ErrorCode.NETWORK_EXCEPTION
                where = address or ",".join(self._addresses)
                raise TwoPhaseCommitError(code, f"{key.name} to {where} failed: {last}") from last
            time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1

    def _connect(self, deadline: float, address: str | None) -> tuple[str, KafkaConnection]:
        """The connection to `address` (None: any open one, else the first reachable bootstrap address),
        opened if needed, and its address."""
        if address is None and (some := self._connections.any_open()) is not None:
            return some
        candidates = self._addresses if address is None else [address]
        for candidate in candidates:
            if self._connections.is_open(candidate):
                return candidate, self._connections.get(candidate, deadline)
        errors: list[str] = []
        for candidate in candidates:
            try:
                connection = self._connections.get(candidate, deadline)
            except SaslRefusedError as e:  # the credentials: no retry helps
                raise TwoPhaseCommitError(e.code, f"authentication to {candidate} failed: {e}") from None
            except (ValueError, OSError, ConnectionError, ProtocolError) as e:
                errors.append(f"{candidate}: {e}")
                continue
            return candidate, connection
        raise ConnectionError("cannot connect to " + "; ".join(errors))

    def close(self) -> None:
        self._connections.close()

    def __enter__(self) -> TwoPhaseClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _prepared(transactions: Sequence[Any]) -> list[PreparedTransaction]:
    return [
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
        for t in transactions
    ]
