"""Replica fetchers (Kafka's `ReplicaFetcherManager` and `ReplicaFetcherThread`): one task per leader
broker, fetching every partition this broker follows from it with the Fetch API, as a follower.

Each round sends one Fetch (v12: replica id, `current_leader_epoch`, `last_fetched_epoch`) for all the
partitions followed from that leader, from each partition's log end offset. The answer, per partition:

- records: stored as they are (`Partition.append_records_as_follower`: byte for byte, the same storage
  code as client appends), then the leader's high watermark is taken (clamped to what we have);
- a diverging epoch (the leader's log differs from ours from some offset on, KIP-101/KIP-279 by way of
  KAFKA-10554's fields): truncate to where the two logs agree, Kafka's `getOffsetTruncationState`, and
  fetch again (it may take several rounds after back-to-back failovers);
- OFFSET_OUT_OF_RANGE: our log end is below the leader's log start (start over empty at its log start),
  or above what the leader has (truncate to its high watermark, which every ISR member has);
- UNKNOWN_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER (the leader has not applied the new partition state
  yet: both learn it from ZooKeeper at about the same time): the partition tries again after 50 ms;
  FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION and the rest: it rests for `replica.fetch.backoff.ms`,
  and the new state arrives from ZooKeeper meanwhile.

- TOPIC_AUTHORIZATION_FAILED: the leader's authorizer refused our principal CLUSTER_ACTION (a WARNING);
  the partition rests as above.

Connections go to the leader's endpoint on `inter.broker.listener.name` with that listener's security
(`ClusterConfig.inter_broker_security`, exactly.security.inter_broker: TLS with the broker's own trust
and key stores, SASL PLAIN or SCRAM with its own credentials). A refused SASL login is a WARNING and a
retry after the backoff, like any failed connection.

A partition's answer is used only if it still follows the same leader in the same epoch from the same
offset (its state may have changed while the fetch was out). A failed connection is retried after the
backoff. Only this module and the ZooKeeper shell touch sockets for the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from exactly.broker.event_waits import wait_event
from exactly.client.connection import AsyncKafkaConnection
from exactly.client.security import ClientSecurity, SaslRefusedError
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from exactly.replication.partition import Partition

log = logging.getLogger(__name__)

_LEADER_CATCH_UP_S = 0.05  # the wait after a leader that is behind on the partition's state
FETCH_VERSION = 12  # replica id in the body, last fetched epoch and diverging epochs, topics by name
EndpointOf = Callable[[int], tuple[str, int] | None]  # broker id -> its inter-broker (host, port)


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms


class ReplicaFetchers:
    def __init__(
        self,
        local_id: int,
        endpoint_of: EndpointOf,
        appended: Callable[[], None],
        config: FetcherConfig | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.local_id = local_id
        self.security = security  # the inter-broker listener's TLS / SASL (None: PLAINTEXT)
        self._endpoint_of = endpoint_of
        self._appended = appended
        self.config = config or FetcherConfig()
        self._fetchers: dict[int, _LeaderFetcher] = {}

    def follow(self, partition: Partition) -> None:
        leader = partition.leader_id
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = self._fetchers[leader] = _LeaderFetcher(self, leader)
        fetcher.add(partition)

    def unfollow(self, partition: Partition) -> None:
        for leader, fetcher in list(self._fetchers.items()):
            if fetcher.remove(partition) and not fetcher.partitions:
                fetcher.stop()
                del self._fetchers[leader]

    def following(self) -> dict[int, list[Partition]]:
        return {leader: list(f.partitions.values()) for leader, f in self._fetchers.items()}

    def broker_changed(self, broker_id: int) -> None:
        """A broker re-registered (maybe on another port): reconnect to it."""
        fetcher = self._fetchers.get(broker_id)
        if fetcher is not None:
            fetcher.reconnect()

    async def stop(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        for fetcher in fetchers:
            fetcher.stop()
        for fetcher in fetchers:
            await fetcher.wait_stopped()


class _LeaderFetcher:
    """The fetch loop for the partitions one leader broker leads and we follow."""

    def __init__(self, owner: ReplicaFetchers, leader: int) -> None:
        self.owner = owner
        self.leader = leader
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._resting: dict[tuple[str, int], float] = {}  # partition -> loop time it may fetch again
        self._changed = asyncio.Event()
        self._connection: AsyncKafkaConnection | None = None
        self._refused = False  # a TOPIC_AUTHORIZATION_FAILED was logged
        self._stopped = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{leader}")

    def add(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        self.partitions[key] = partition
        self._resting.pop(key, None)
        self._changed.set()

    def remove(self, partition: Partition) -> bool:
        key = (partition.topic, partition.index)
        if self.partitions.get(key) is not partition:
            return False
        del self.partitions[key]
        self._resting.pop(key, None)
        return True

    def reconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._changed.set()

    def stop(self) -> None:
        # the flag as well as the cancellation: asyncio.wait_for (Python 3.11) returns the inner result
        # instead of raising when the cancellation comes as the inner await completes, and a loop that
        # went on after a swallowed cancellation kept fetching forever (the broker never stopped)
        self._stopped = True
        self._changed.set()
        self._task.cancel()
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def wait_stopped(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        config = self.owner.config
        try:
            while self.partitions and not self._stopped:
                try:
                    if not await self._fetch_once():
                        await self._rest(self._until_next_fetchable(config.backoff_ms / 1000))
                except asyncio.CancelledError:
                    raise
                except SaslRefusedError as e:  # our credentials: a configuration error, said loudly
                    log.warning(
                        "broker %d refused this broker's inter-broker credentials: %s", self.leader, e
                    )
                    self.reconnect()
                    await self._rest(config.backoff_ms / 1000)
                except (OSError, ConnectionError, TimeoutError, KafkaError) as e:
                    log.info("fetching from broker %d failed (%s); retrying", self.leader, e)
                    self.reconnect()
                    await self._rest(config.backoff_ms / 1000)
                except Exception:
                    log.exception("the replica fetcher for broker %d failed; retrying", self.leader)
                    self.reconnect()
                    await self._rest(config.backoff_ms / 1000)
        finally:
            if self._connection is not None:  # one opened after stop() closed the last
                self._connection.close()
                self._connection = None

    async def _rest(self, seconds: float) -> None:
        self._changed.clear()
        await wait_event(self._changed, seconds)

    async def _connect(self) -> AsyncKafkaConnection:
        if self._connection is None:
            endpoint = self.owner._endpoint_of(self.leader)
            if endpoint is None:
                raise ConnectionError(f"broker {self.leader} is not registered")
            host, port = endpoint
            self._connection = await asyncio.wait_for(
                AsyncKafkaConnection.open(
                    host,
                    port,
                    client_id=f"exactly-replica-fetcher-{self.owner.local_id}",
                    security=self.owner.security,
                ),
                self.owner.config.socket_timeout_ms / 1000,
            )
        return self._connection

    def _until_next_fetchable(self, longest: float) -> float:
        """How long until a resting partition may fetch again (at most `longest`)."""
        now = asyncio.get_running_loop().time()
        waits = [until - now for key, until in self._resting.items() if key in self.partitions]
        return max(0.0, min([longest, *waits]))

    def _fetchable(self) -> dict[tuple[str, int], Partition]:
        now = asyncio.get_running_loop().time()
        return {
            key: p
            for key, p in self.partitions.items()
            if self._resting.get(key, 0.0) <= now and not p.is_leader and p.leader_id == self.leader
        }

    async def _fetch_once(self) -> bool:
        """One Fetch round; False when there was nothing to fetch (rest a while)."""
        fetchable = self._fetchable()
        if not fetchable:
            return False
        config = self.owner.config
        sent: dict[tuple[str, int], tuple[int, int]] = {}  # what each partition asked: (epoch, offset)
        topics: dict[str, FetchTopic] = {}
        for (topic, index), fp in fetchable.items():
            p = fp
            latest = p.log.leader_epochs.latest_epoch
            sent[(topic, index)] = (p.leader_epoch, p.log_end_offset)
            topics.setdefault(topic, FetchTopic(topic=topic)).partitions.append(
                FetchPartition(
                    partition=index,
                    current_leader_epoch=p.leader_epoch,
                    fetch_offset=p.log_end_offset,
                    last_fetched_epoch=-1 if latest is None else latest,
                    log_start_offset=p.log_start_offset,
                    partition_max_bytes=config.partition_max_bytes,
                )
            )
        request = FetchRequest(
            replica_id=self.owner.local_id,
            max_wait_ms=config.max_wait_ms,
            min_bytes=config.min_bytes,
            max_bytes=config.max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=list(topics.values()),
        )
        connection = await self._connect()
        response: FetchResponse = await asyncio.wait_for(
            connection.request(ApiKey.FETCH, FETCH_VERSION, request), config.socket_timeout_ms / 1000
        )
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), "the leader refused the replica fetch")
        appended = False
        for topic_response in response.responses:
            for data in topic_response.partitions:
                key = (topic_response.topic, data.partition_index)
                found = self.partitions.get(key)
                if found is None:
                    continue
                p = found
                if p.is_leader or p.leader_id != self.leader:
                    continue
                if sent.get(key) != (p.leader_epoch, p.log_end_offset):
                    continue  # its state moved while the fetch was out
                appended |= self._process(key, p, data)
        if appended:
            self.owner._appended()
        return True

    def _process(self, key: tuple[str, int], p: Partition, data: PartitionData) -> bool:
        """Apply one partition's answer; True when this replica appended or its high watermark moved
        (consumers parked on this follower, KIP-392, may read further)."""
        code = ErrorCode(data.error_code)
        if code == ErrorCode.NONE:
            if data.diverging_epoch is not None:
                self._truncate_on_divergence(p, data.diverging_epoch.epoch, data.diverging_epoch.end_offset)
                return False
            records = data.records
            high_watermark = p.high_watermark
            try:
                if records:
                    info = p.append_records_as_follower(records, data.high_watermark)
                    return info.last_offset >= info.first_offset or p.high_watermark != high_watermark
                p.log.update_follower_high_watermark(data.high_watermark)
                return p.high_watermark != high_watermark
            except KafkaError as e:
                log.error("%s-%d: cannot store what leader %d sent: %s", p.topic, p.index, self.leader, e)
                self._rest_partition(key)
            return False
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(p, data)
            return False
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and not self._refused:
            self._refused = True  # Kafka's answer to a fetch without CLUSTER_ACTION: said once per leader
            log.warning(
                "%s-%d: leader %d refused the replica fetch (TOPIC_AUTHORIZATION_FAILED): this broker's "
                "inter-broker principal needs CLUSTER_ACTION on the cluster (super.users)",
                p.topic,
                p.index,
                self.leader,
            )
        else:
            log.debug("%s-%d: leader %d answered %s", p.topic, p.index, self.leader, code.name)
        # the leader has not applied the new partition state yet (both learn it from ZooKeeper at about
        # the same time): try again soon, not after the full backoff, which would hold the new leader's
        # high watermark (and every acks=all write) back for a second after a failover
        behind = code in (ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._rest_partition(key, _LEADER_CATCH_UP_S if behind else None)
        return False

    def _rest_partition(self, key: tuple[str, int], seconds: float | None = None) -> None:
        backoff = self.owner.config.backoff_ms / 1000
        rest = backoff if seconds is None else min(seconds, backoff)
        self._resting[key] = asyncio.get_running_loop().time() + rest

    @staticmethod
    def _truncate_on_divergence(p: Partition, leader_epoch: int, leader_end: int) -> None:
        """Kafka's `getOffsetTruncationState` for a diverging epoch (leader_epoch, leader_end)."""
        log_ = p.log
        leo = log_.log_end_offset
        local_epoch, local_end = log_.leader_epochs.end_offset_for(leader_epoch, leo)
        if leader_end < 0:
            target = log_.high_watermark
        elif local_epoch < 0:
            target = min(leader_end, leo)
        elif local_epoch == leader_epoch:
            target = min(leader_end, local_end)
        else:  # we have only a lower epoch: go to its end and ask again
            target = min(local_end, leo)
        log.info(
            "%s-%d: truncating from %d to %d (the leader's epoch %d ends at %d)",
            p.topic,
            p.index,
            leo,
            target,
            leader_epoch,
            leader_end,
        )
        log_.truncate_to(target)

    @staticmethod
    def _out_of_range(p: Partition, data: PartitionData) -> None:
        log_ = p.log
        if data.log_start_offset > log_.log_end_offset:
            log.info(
                "%s-%d: starting over at the leader's log start %d", p.topic, p.index, data.log_start_offset
            )
            log_.truncate_fully_and_start_at(data.log_start_offset)
        elif data.high_watermark >= 0 and data.high_watermark < log_.log_end_offset:
            log.info(
                "%s-%d: truncating to the leader's high watermark %d", p.topic, p.index, data.high_watermark
            )
            log_.truncate_to(data.high_watermark)
