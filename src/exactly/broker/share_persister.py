"""The share-group state persister (Kafka's `DefaultStatePersister` with its `PersisterStateManager`):
how the leader of a share partition's data reaches the share coordinator that stores its state.

The state of share partition (group, topic id, partition) lives in the `__share_group_state` partition
its key hashes to (exactly.broker.share_coordinator); the broker leading that partition is its share
coordinator. For every operation the persister

* finds the coordinator: the leader of the key's state partition in the cluster's metadata cache (the
  answer FindCoordinator with key type SHARE gives, without the round trip); on one broker, this broker;
* calls the coordinator in process when it is this broker, or sends the share coordinator RPC
  (Initialize/Read/Write/DeleteShareGroupState, ReadShareGroupStateSummary, v0) to it on the
  inter-broker listener, with the inter-broker security, one connection per coordinator broker
  (requests pipelined on it);
* retries — after `retry_backoff_s`, doubling to 1 s, looking the coordinator up again — while the
  answer is NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE or the request
  could not be answered (no leader known, a connection that failed or timed out: NETWORK_EXCEPTION /
  REQUEST_TIMED_OUT), until `timeout_s` has passed; then (and for any other code) the outcome is the
  last answer.

A state partition that changes leader is therefore followed by the persister, and a data partition
whose leader changes reads its state from wherever it is stored now.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from exactly.broker.peer_connections import EndpointOf, PeerConnections
from exactly.broker.share_coordinator import ShareCoordinatorService
from exactly.client.security import ClientSecurity
from exactly.errors import ErrorCode, KafkaError
from exactly.group.share.coordinator import Outcome, StateWrite
from exactly.group.share.partition import RecordState, ShareState, StateBatch
from exactly.group.share.records import SharePartitionKey, StoredShareState
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages import delete_share_group_state as delete_msg
from exactly.protocol.messages import initialize_share_group_state as init_msg
from exactly.protocol.messages import read_share_group_state as read_msg
from exactly.protocol.messages import read_share_group_state_summary as summary_msg
from exactly.protocol.messages import write_share_group_state as write_msg

__all__ = ["RETRIABLE", "SharePersister"]

log = logging.getLogger(__name__)

RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_REQUEST_TIMEOUT_S = 40.0  # the coordinator waits up to 30 s for its ISR before it answers
_MAX_BACKOFF_S = 1.0

CoordinatorOf = Callable[[SharePartitionKey], int]  # key -> the broker id of its share coordinator (-1: none)


class SharePersister:
    def __init__(
        self,
        local_id: int,
        coordinator: ShareCoordinatorService,
        *,
        timeout_s: float = 30.0,
        retry_backoff_s: float = 0.1,
    ) -> None:
        """Without `route` (one broker) every operation runs on this broker's coordinator."""
        self.local_id = local_id
        self.coordinator = coordinator
        self.timeout_s = timeout_s
        self.retry_backoff_s = retry_backoff_s
        self._coordinator_of: CoordinatorOf | None = None
        # without `route` (one broker) no key is another broker's: nothing is ever opened
        self._peers = PeerConnections(f"exactly-share-persister-{local_id}", lambda broker: None, None)
        self.remote_requests = 0  # sent to another broker's coordinator (tests, metrics)

    def route(
        self, coordinator_of: CoordinatorOf, endpoint_of: EndpointOf, security: ClientSecurity | None
    ) -> None:
        """In a cluster: where each key's coordinator is and how to reach it."""
        self._coordinator_of = coordinator_of
        self._peers = PeerConnections(f"exactly-share-persister-{self.local_id}", endpoint_of, security)

    # --- operations ---------------------------------------------------------------------------------------

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Outcome:
        request = init_msg.InitializeShareGroupStateRequest(
            key.group_id,
            [
                init_msg.InitializeStateData(
                    key.topic_id, [init_msg.PartitionData(key.partition, state_epoch, start_offset)]
                )
            ],
        )
        return await self._call(
            key,
            lambda: self.coordinator.initialize(key, state_epoch, start_offset),
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            request,
            _plain,
        )

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        request = read_msg.ReadShareGroupStateRequest(
            key.group_id,
            [read_msg.ReadStateData(key.topic_id, [read_msg.PartitionData(key.partition, leader_epoch)])],
        )
        return await self._call(
            key,
            lambda: self.coordinator.read(key, leader_epoch),
            ApiKey.READ_SHARE_GROUP_STATE,
            request,
            _read,
        )

    async def write(self, key: SharePartitionKey, write: StateWrite) -> Outcome:
        batches = [
            write_msg.StateBatch(b.first_offset, b.last_offset, int(b.state), b.delivery_count)
            for b in write.batches
        ]
        entry = write_msg.PartitionData(
            key.partition, write.state_epoch, write.leader_epoch, write.start_offset, batches
        )
        request = write_msg.WriteShareGroupStateRequest(
            key.group_id, [write_msg.WriteStateData(key.topic_id, [entry])]
        )
        return await self._call(
            key, lambda: self.coordinator.write(key, write), ApiKey.WRITE_SHARE_GROUP_STATE, request, _plain
        )

    async def delete(self, key: SharePartitionKey) -> Outcome:
        request = delete_msg.DeleteShareGroupStateRequest(
            key.group_id,
            [delete_msg.DeleteStateData(key.topic_id, [delete_msg.PartitionData(key.partition)])],
        )
        return await self._call(
            key, lambda: self.coordinator.delete(key), ApiKey.DELETE_SHARE_GROUP_STATE, request, _plain
        )

    async def summary(self, key: SharePartitionKey, leader_epoch: int = -1) -> Outcome:
        request = summary_msg.ReadShareGroupStateSummaryRequest(
            key.group_id,
            [
                summary_msg.ReadStateSummaryData(
                    key.topic_id, [summary_msg.PartitionData(key.partition, leader_epoch)]
                )
            ],
        )
        return await self._call(
            key,
            lambda: self.coordinator.summary(key, leader_epoch),
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            request,
            _summary,
        )

    # --- the retry loop -----------------------------------------------------------------------------------

    async def _call(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[Outcome]],
        api: ApiKey,
        request: Any,
        answer: Callable[[Any], Outcome],
    ) -> Outcome:
        deadline = time.monotonic() + self.timeout_s
        backoff = self.retry_backoff_s
        while True:
            broker = self._where(key)
            if broker == self.local_id:
                outcome = await local()
            elif broker < 0:
                await self._ensure_topic()
                outcome = Outcome(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, message=f"no share coordinator for {key}"
                )
            else:
                outcome = await self._remote(broker, api, request, answer)
            if outcome.code not in RETRIABLE or time.monotonic() + backoff > deadline:
                if outcome.code in RETRIABLE:
                    log.warning(
                        "%s: share coordinator still unavailable after %.0f s: %s",
                        key,
                        self.timeout_s,
                        outcome.code.name,
                    )
                return outcome
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    def _where(self, key: SharePartitionKey) -> int:
        if self._coordinator_of is None:
            return self.local_id
        return self._coordinator_of(key)

    async def _ensure_topic(self) -> None:
        try:
            await self.coordinator.runtime.ensure_topic()
        except KafkaError as e:
            log.info("cannot create the share state topic yet: %s", e)

    async def _remote(
        self, broker: int, api: ApiKey, request: Any, answer: Callable[[Any], Outcome]
    ) -> Outcome:
        peers = self._peers
        try:
            async with asyncio.timeout(_REQUEST_TIMEOUT_S):
                connection = await peers.get(broker)
                self.remote_requests += 1
                response = await connection.request(api, 0, request)
        except TimeoutError as e:
            peers.close(broker)
            return Outcome(ErrorCode.REQUEST_TIMED_OUT, message=f"broker {broker}: {e}")
        except (OSError, ConnectionError, KafkaError) as e:
            log.info("share coordinator request to broker %d failed (%s); will retry", broker, e)
            peers.close(broker)
            return Outcome(ErrorCode.NETWORK_EXCEPTION, message=f"broker {broker}: {e}")
        try:
            return answer(response)
        except (IndexError, ValueError) as e:
            return Outcome(ErrorCode.UNKNOWN_SERVER_ERROR, message=f"broker {broker}: malformed answer ({e})")

    def stop(self) -> None:
        self._peers.close_all()


def _only(response: Any) -> Any:
    """The one partition result of a one-partition request's response."""
    return response.results[0].partitions[0]


def _plain(response: Any) -> Outcome:
    result = _only(response)
    return Outcome(ErrorCode.of(result.error_code), message=result.error_message)


def _read(response: read_msg.ReadShareGroupStateResponse) -> Outcome:
    result = _only(response)
    code = ErrorCode.of(result.error_code)
    if code != ErrorCode.NONE or result.state_epoch < 0:  # no state: answered with state epoch -1
        return Outcome(code, message=result.error_message)
    batches = tuple(
        StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
        for b in result.state_batches
    )
    state = StoredShareState(ShareState(result.start_offset, batches), state_epoch=result.state_epoch)
    return Outcome(code, state=state)


def _summary(response: summary_msg.ReadShareGroupStateSummaryResponse) -> Outcome:
    result = _only(response)
    code = ErrorCode.of(result.error_code)
    if code != ErrorCode.NONE or result.state_epoch < 0:
        return Outcome(code, message=result.error_message)
    state = StoredShareState(
        ShareState(result.start_offset), state_epoch=result.state_epoch, leader_epoch=result.leader_epoch
    )
    return Outcome(code, state=state)
