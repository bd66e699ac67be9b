"""The transaction marker channel (Kafka's `TransactionMarkerChannelManager`): how the transaction
coordinator gets a COMMIT/ABORT marker into each partition of a transaction, wherever it is led.

`send(markers, partitions)` makes one attempt for every partition and returns each partition's code
(`exactly.txn.markers.marker_outcome` says what the coordinator does with it):

* partitions this broker leads (and, on a single broker, every partition) are appended locally through
  `write_local` — the code the WriteTxnMarkers API runs, which waits until the markers are durable and
  committed in the ISR (acks=all);
* the others go to their current leader (from the cluster's metadata cache, looked up afresh at every
  attempt) as WriteTxnMarkers v1 requests on the inter-broker listener, with the inter-broker security
  (TLS, SASL), one connection per destination broker. Each destination has one request in flight: the
  markers of every transaction queued for it meanwhile go in the next request together (Kafka's
  per-broker queue, drained by one send);
* a partition with no known leader, a broker with no endpoint, a failed connection or a request that
  got no answer within `request_timeout_s` answer NOT_LEADER_OR_FOLLOWER or NETWORK_EXCEPTION: retried.

Connections are closed on any failure and reopened by the next request; `stop()` closes them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from exactly.client.connection import AsyncKafkaConnection
from exactly.client.security import ClientSecurity
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from exactly.txn.markers import NO_LEADER, TopicPartition, group_by_leader

__all__ = ["WRITE_TXN_MARKERS_VERSION", "MarkerChannel", "Markers"]

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1  # flexible; the version Kafka 3.x brokers send each other
_REQUEST_TIMEOUT_S = 40.0  # the leader waits up to 30 s for its ISR before it answers

EndpointOf = Callable[[int], tuple[str, int] | None]  # broker id -> its inter-broker (host, port)
LeaderOf = Callable[[str, int], int]  # partition -> its leader's broker id (-1: none known)
Codes = dict[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class Markers:
    """The markers of one transaction: what every partition gets."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


class WriteLocal(Protocol):
    """Writes markers to partitions this broker leads (`behind_answer`: see `TransactionService.run`)."""

    def __call__(
        self, markers: Markers, partitions: Sequence[TopicPartition], *, behind_answer: bool = False
    ) -> Awaitable[Codes]: ...


@dataclass(slots=True)
class _Queued:
    markers: Markers
    partitions: list[TopicPartition]
    answer: asyncio.Future[Codes] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class MarkerChannel:
    def __init__(
        self,
        local_id: int,
        write_local: WriteLocal,
        *,
        leader_of: LeaderOf | None = None,
        endpoint_of: EndpointOf | None = None,
        security: ClientSecurity | None = None,
        request_timeout_s: float = _REQUEST_TIMEOUT_S,
    ) -> None:
        """Without `leader_of` (a single broker) every marker is written locally."""
        self.local_id = local_id
        self._write_local = write_local
        self._leader_of = leader_of
        self._endpoint_of = endpoint_of
        self.security = security
        self.request_timeout_s = request_timeout_s
        self._destinations: dict[int, _Destination] = {}

    def route(self, leader_of: LeaderOf, endpoint_of: EndpointOf, security: ClientSecurity | None) -> None:
        """In a cluster: where partitions are led and how to reach their leaders."""
        self._leader_of = leader_of
        self._endpoint_of = endpoint_of
        self.security = security

    def destinations(self, partitions: Sequence[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """The partitions by the broker their markers go to now (this broker's id: written locally)."""
        leader_of = self._leader_of
        if leader_of is None:
            return {self.local_id: sorted(set(partitions))}
        return group_by_leader(partitions, leader_of)

    async def send(
        self, markers: Markers, partitions: Sequence[TopicPartition], *, behind_answer: bool = False
    ) -> Codes:
        """One attempt for every partition: each partition's code (NONE: written and committed).
        `behind_answer` goes to the local writes (`TransactionService.run`'s `answered_first`)."""
        waits: list[Awaitable[Codes]] = []
        codes: Codes = {}
        for broker, group in self.destinations(partitions).items():
            if broker == self.local_id:
                waits.append(self._write_local(markers, group, behind_answer=behind_answer))
            elif broker == NO_LEADER:
                codes.update(dict.fromkeys(group, ErrorCode.NOT_LEADER_OR_FOLLOWER))
            else:
                destination = self._destinations.get(broker)
                if destination is None:
                    destination = self._destinations[broker] = _Destination(self, broker)
                waits.append(destination.enqueue(markers, group))
        if len(waits) == 1 and not codes:  # one destination (always, on one broker): no task for it
            return await waits[0]
        for answer in await asyncio.gather(*waits):
            codes.update(answer)
        return codes

    async def stop(self) -> None:
        destinations = list(self._destinations.values())
        self._destinations.clear()
        for destination in destinations:
            await destination.stop()

    def endpoint(self, broker: int) -> tuple[str, int] | None:
        return None if self._endpoint_of is None else self._endpoint_of(broker)


def marker_request(queued: Sequence[tuple[Markers, Sequence[TopicPartition]]]) -> WriteTxnMarkersRequest:
    """One WriteTxnMarkers request: one entry per transaction, its partitions grouped by topic."""
    entries: list[WritableTxnMarker] = []
    for markers, partitions in queued:
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        entries.append(
            WritableTxnMarker(
                producer_id=markers.producer_id,
                producer_epoch=markers.producer_epoch,
                transaction_result=markers.commit,
                topics=[WritableTxnMarkerTopic(name, indexes) for name, indexes in topics.items()],
                coordinator_epoch=markers.coordinator_epoch,
            )
        )
    return WriteTxnMarkersRequest(entries)


def response_codes(
    queued: Sequence[tuple[Markers, Sequence[TopicPartition]]], response: WriteTxnMarkersResponse
) -> list[Codes]:
    """Each queued transaction's codes from the response (entries answer in the request's order; a
    partition the answer does not name is retried: NETWORK_EXCEPTION)."""
    out: list[Codes] = []
    for i, (markers, partitions) in enumerate(queued):
        codes: Codes = dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if i < len(response.markers) and response.markers[i].producer_id == markers.producer_id:
            for topic in response.markers[i].topics:
                for p in topic.partitions:
                    key = (topic.name, p.partition_index)
                    if key in codes:
                        codes[key] = ErrorCode.of(p.error_code)
        out.append(codes)
    return out


class _Destination:
    """One broker the markers go to: its queue, its connection, its one request in flight."""

    def __init__(self, channel: MarkerChannel, broker: int) -> None:
        self.channel = channel
        self.broker = broker
        self._queue: list[_Queued] = []
        self._wakeup = asyncio.Event()
        self._connection: AsyncKafkaConnection | None = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"txn-markers-{broker}")

    def enqueue(self, markers: Markers, partitions: list[TopicPartition]) -> asyncio.Future[Codes]:
        queued = _Queued(markers, partitions)
        self._queue.append(queued)
        self._wakeup.set()
        return queued.answer

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._close()
        for queued in self._queue:
            if not queued.answer.done():
                queued.answer.cancel()

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch = [q for q in self._queue if not q.answer.done()]  # a cancelled waiter is gone
            self._queue = []
            if not batch:
                continue
            items = [(q.markers, q.partitions) for q in batch]
            try:
                answers = await self._request(items)
            except asyncio.CancelledError:
                for q in batch:
                    q.answer.cancel()
                raise
            for q, codes in zip(batch, answers, strict=True):
                if not q.answer.done():
                    q.answer.set_result(codes)

    async def _request(self, items: Sequence[tuple[Markers, Sequence[TopicPartition]]]) -> list[Codes]:
        channel = self.channel
        try:
            async with asyncio.timeout(channel.request_timeout_s):
                if self._connection is None:
                    endpoint = channel.endpoint(self.broker)
                    if endpoint is None:
                        return [dict.fromkeys(p, ErrorCode.NOT_LEADER_OR_FOLLOWER) for _, p in items]
                    self._connection = await AsyncKafkaConnection.open(
                        *endpoint,
                        client_id=f"exactly-txn-markers-{channel.local_id}",
                        security=channel.security,
                    )
                response = await self._connection.request(
                    ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, marker_request(items)
                )
        except (OSError, ConnectionError, TimeoutError, KafkaError) as e:
            log.info("sending transaction markers to broker %d failed (%s); will retry", self.broker, e)
            self._close()
            return [dict.fromkeys(p, ErrorCode.NETWORK_EXCEPTION) for _, p in items]
        except Exception:
            log.exception("sending transaction markers to broker %d failed; will retry", self.broker)
            self._close()
            return [dict.fromkeys(p, ErrorCode.NETWORK_EXCEPTION) for _, p in items]
        assert isinstance(response, WriteTxnMarkersResponse)
        return response_codes(items, response)
