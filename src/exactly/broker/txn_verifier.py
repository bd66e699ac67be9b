"""KIP-890 part 1 across brokers (Kafka's `AddPartitionsToTxnManager`): before a partition leader appends a
producer's first transactional batch, it asks the transaction coordinator of the batch's transactional id
whether the partition is in the producer's ongoing transaction.

When this broker coordinates the id, `TransactionService.verification_guard` checks in process. Otherwise
`verify(...)` sends AddPartitionsToTxn v4 with `VerifyOnly` to the coordinator — the leader of the id's
`__transaction_state` partition, from the cluster's metadata cache — on the inter-broker listener, one
connection per coordinator broker (requests pipelined on it). The coordinator's per-partition code is
the answer (NONE: verified). Anything that stops the question from being answered — no coordinator
known, a connection or request failure, a timeout, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
COORDINATOR_NOT_AVAILABLE — answers NOT_ENOUGH_REPLICAS, as Kafka maps them: retriable, so the producer
sends the batch again and the leader asks again.

The answer only holds until the transaction ends: `VerifiedProducers` (one per partition, kept by the
produce handler's caller) records a successful verification with the producer's epoch, a marker for the
producer clears it, and the append requires it (see `TransactionService.remote_guard`); a marker that
arrives between the question and the append makes the batch fail with the retriable code instead of
starting a transaction the coordinator does not know.

Transaction version 2 (KIP-890 part 2): for a TV2 client's Produce v12 / TxnOffsetCommit v5, `verify(...,
add=True)` sends AddPartitionsToTxn v5 without VerifyOnly: the coordinator adds the partition to the
transaction (durably) instead of checking it, as Kafka's AddPartitionsToTxnManager does for
`ADD_PARTITION`. CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written) is
retriable like the others and answers NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from exactly.broker.peer_connections import EndpointOf, PeerConnections
from exactly.client.security import ClientSecurity
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)

__all__ = ["ADD_VERSION", "VERIFY_VERSION", "TransactionVerifier"]

log = logging.getLogger(__name__)

VERIFY_VERSION = 4  # the first version with VerifyOnly batches (Kafka 3.6+ brokers send it)
ADD_VERSION = 5  # the implicit add of a transaction version 2 client (Kafka 4 brokers send it)
_REQUEST_TIMEOUT_S = 30.0
_UNANSWERED = ErrorCode.NOT_ENOUGH_REPLICAS
_MOVED = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)

CoordinatorOf = Callable[[str], int]  # transactional id -> the broker id of its coordinator (-1: none)


class TransactionVerifier:
    def __init__(
        self,
        local_id: int,
        coordinator_of: CoordinatorOf,
        endpoint_of: EndpointOf,
        security: ClientSecurity | None,
        *,
        request_timeout_s: float = _REQUEST_TIMEOUT_S,
    ) -> None:
        self.local_id = local_id
        self._coordinator_of = coordinator_of
        self._timeout = request_timeout_s
        self._peers = PeerConnections(f"exactly-txn-verify-{local_id}", endpoint_of, security)

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topic: str,
        partition: int,
        *,
        add: bool = False,
    ) -> ErrorCode:
        """The coordinator's answer for one partition (NONE: the partition is in the ongoing transaction;
        with `add`, it has been added to it)."""
        broker = self._coordinator_of(transactional_id)
        if broker < 0:
            return _UNANSWERED
        request = AddPartitionsToTxnRequest(
            [
                AddPartitionsToTxnTransaction(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    not add,
                    [AddPartitionsToTxnTopic(topic, [partition])],
                )
            ]
        )
        try:
            async with asyncio.timeout(self._timeout):
                connection = await self._peers.get(broker)
                version = ADD_VERSION if add else VERIFY_VERSION
                response = await connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
        except (OSError, ConnectionError, TimeoutError, KafkaError) as e:
            log.info("verifying %r on broker %d failed (%s)", transactional_id, broker, e)
            self._peers.close(broker)
            return _UNANSWERED
        assert isinstance(response, AddPartitionsToTxnResponse)
        code = _answer(response, transactional_id, topic, partition)
        return _UNANSWERED if code in _MOVED else code

    def stop(self) -> None:
        self._peers.close_all()


def _answer(
    response: AddPartitionsToTxnResponse, transactional_id: str, topic: str, partition: int
) -> ErrorCode:
    if response.error_code:
        return ErrorCode.of(response.error_code)
    for result in response.results_by_transaction:
        if result.transactional_id != transactional_id:
            continue
        for topic_result in result.topic_results:
            if topic_result.name != topic:
                continue
            for p in topic_result.results_by_partition:
                if p.partition_index == partition:
                    return ErrorCode.of(p.partition_error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR
