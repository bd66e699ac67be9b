"""The replica manager (Kafka's `ReplicaManager`): the only way handlers and coordinators reach partition
data. It finds a partition's `Partition` (exactly.replication.partition) over the log manager's logs,
appends through it (leadership, leader epoch, high watermark), waits for the durability an ack needs
(the `Flusher`'s group commit), and wakes parked fetches after every append (`FetchWakeups`).

Partitions are made on first use, over logs the log manager loads lazily; `stop_replica` forgets one when
its topic is deleted.

In a cluster (`cluster=True`) a partition leads nothing until its state arrives from ZooKeeper:
`become_leader_or_follower` applies it (Kafka's `becomeLeaderOrFollower`), moving the partition in or out
of the replica fetchers and telling the coordinators (`leadership_listeners`). The leader side of
replication lives here too: a follower's fetch moves its state (`follower_fetched`), which may move the
high watermark and answer parked acks=all produces (`wait_replicated`, Kafka's delayed produce), or
propose a larger ISR; `shrink_isrs` runs every `replica.lag.time.max.ms / 2`. ISR changes go through
`isr_writer`, the cluster shell's conditional write to ZooKeeper.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from exactly.broker.fetch_wakeups import FetchWakeups
from exactly.broker.flusher import Flusher
from exactly.errors import ErrorCode, KafkaError
from exactly.records.control import ControlRecordType, EndTxnMarker
from exactly.replication.partition import AppendResult, Partition
from exactly.storage.log import Buffer, VerificationGuard
from exactly.storage.log_manager import LogManager
from exactly.storage.producer_state import AppendOrigin

__all__ = ["DurableTarget", "ReplicaManager"]

log = logging.getLogger(__name__)

DurableTarget = tuple[Partition, int]  # the partition must be fsynced below this offset
# writes a proposed ISR conditionally on the partition epoch: the new partition epoch, or None (refused)
IsrWriter = Callable[[Partition, tuple[int, ...]], Awaitable[int | None]]
LeadershipListener = Callable[[Partition], None]  # called after a partition became leader or follower
# called after a COMMIT/ABORT marker was appended as the leader: (partition, producer id, committed)
MarkerListener = Callable[[Partition, int, bool], None]


class Fetchers(Protocol):
    """The replica fetchers (exactly.broker.replica_fetcher): which partitions follow which leader."""

    def follow(self, partition: Partition) -> None: ...
    def unfollow(self, partition: Partition) -> None: ...


class ReplicaManager:
    def __init__(
        self,
        logs: LogManager,
        flusher: Flusher,
        *,
        local_id: int = 0,
        cluster: bool = False,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.logs = logs
        self.flusher = flusher
        self.wakeups = FetchWakeups()
        self.local_id = local_id
        self.cluster = cluster
        self._now_ms = now_ms or logs.clock.monotonic_ms
        self._partitions: dict[tuple[str, int], Partition] = {}
        # the cluster's hooks (set by the cluster shell)
        self.fetchers: Fetchers | None = None
        self.isr_writer: IsrWriter | None = None
        # may this broker join the partition's ISR (live, not drained, not being reassigned away)?
        self.isr_eligible: Callable[[Partition, int], bool] = lambda partition, broker_id: True
        self.leadership_listeners: list[LeadershipListener] = []
        # is this broker's view of who leads what current? (the cluster: its ZooKeeper session is
        # connected and, after a new session, the coordinators' partitions were read again) A leader whose
        # view may be stale still appends, but its coordinators answer no client (CoordinatorRuntime)
        self.leadership_current: Callable[[], bool] = lambda: True
        # the group coordinator learns of markers on `__consumer_offsets` here, whoever wrote them (the
        # local transaction coordinator, or another broker's through WriteTxnMarkers)
        self.marker_listeners: list[MarkerListener] = []
        self._replication_waiters: dict[Partition, list[tuple[int, asyncio.Future[ErrorCode]]]] = {}
        self._isr_tasks: set[asyncio.Task[None]] = set()
        # set when a replica is to be moved to another log dir; the broker then runs `move_replicas`
        self.moves_wanted = asyncio.Event()
        # ISR changes of the partitions it leads, since start (Kafka's IsrShrinksPerSec, IsrExpandsPerSec)
        self.isr_shrinks = 0
        self.isr_expands = 0

    def partition(self, topic: str, index: int) -> Partition | None:
        """The partition, or None when this broker has no such partition (or its log is offline)."""
        log = self.logs.get_log(topic, index)
        if log is None:
            return None
        key = (topic, index)
        partition = self._partitions.get(key)
        if partition is None or partition.log is not log:
            partition = self._partitions[key] = Partition(log, local_id=self.local_id)
            if self.cluster:  # leads nothing until ZooKeeper says so
                partition.is_leader = False
                partition.leader_id = -1
        return partition

    def online_partition(self, topic: str, index: int) -> Partition:
        partition = self.partition(topic, index)
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist")
        return partition

    def stop_replica(self, topic: str, index: int) -> None:
        """Forget the partition and delete its log (its topic was deleted, or its creation undone)."""
        partition = self._partitions.pop((topic, index), None)
        if partition is not None:
            partition.is_leader = False
            if self.fetchers is not None:
                self.fetchers.unfollow(partition)
            self._complete_replication_waiters(partition)
            for listener in self.leadership_listeners:
                listener(partition)
        self.logs.delete_log(topic, index)

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    # --- moving replicas between log dirs (AlterReplicaLogDirs) --------------------------------------------

    def alter_log_dir(self, topic: str, index: int, log_dir: str) -> None:
        """Move the partition's replica to `log_dir` (KafkaError as `ReplicaMoves.alter_log_dir`)."""
        if self.logs.moves.alter_log_dir(topic, index, log_dir):
            self.moves_wanted.set()

    def move_replicas(self) -> bool:
        """One copy step of every move under way (`ReplicaMoves.copy_to_future`); a future log that caught up
        replaces its partition's log at once, nothing appended in between (Kafka does it under the
        partition's lock; here the event loop runs this in one go). True while moves remain."""
        moves = self.logs.moves
        for (topic, index), _future in moves.future_logs():
            try:
                if not moves.copy_to_future(topic, index):
                    continue
                new = moves.replace_current_with_future(topic, index)
            except (KafkaError, OSError) as e:
                log.warning(
                    "moving %s-%d to another log dir failed, it stays where it is: %s", topic, index, e
                )
                moves.abandon(topic, index)
                continue
            partition = self._partitions.get((topic, index))
            if partition is not None:
                partition.log = new
            self.wakeups.appended()  # parked fetches read the new log
        return bool(moves.future_logs())

    # --- the cluster: leadership from ZooKeeper ----------------------------------------------------------

    def become_leader_or_follower(
        self,
        topic: str,
        index: int,
        *,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        replicas: Sequence[int],
        partition_epoch: int,
    ) -> Partition | None:
        """Apply a partition's state from ZooKeeper (Kafka's `becomeLeaderOrFollower`): a state older than
        what this replica has (by leader epoch, then partition epoch) is ignored. Returns the partition, or
        None when this broker is not one of its replicas."""
        if self.local_id not in replicas:
            return None
        partition = self.partition(topic, index)
        if partition is None:
            partition = Partition(self.logs.get_or_create_log(topic, index), local_id=self.local_id)
            partition.is_leader = False
            partition.leader_id = -1
            self._partitions[(topic, index)] = partition
        if leader_epoch < partition.leader_epoch or (
            leader_epoch == partition.leader_epoch
            and partition_epoch < partition.partition_epoch
            and partition.leader_id != -1
        ):
            return partition  # stale
        if leader == self.local_id:
            was_leader = partition.is_leader
            if partition.make_leader(leader_epoch, isr, replicas, partition_epoch, self._now_ms()):
                log.info("%s-%d: leader in epoch %d, ISR %s", topic, index, leader_epoch, list(isr))
            if self.fetchers is not None:
                self.fetchers.unfollow(partition)
            if not was_leader:
                self._notify(partition)
        else:
            if partition.make_follower(leader, leader_epoch, isr, replicas, partition_epoch):
                log.info("%s-%d: follower of %d in epoch %d", topic, index, leader, leader_epoch)
                if self.fetchers is not None:
                    self.fetchers.unfollow(partition)
                    if leader >= 0:
                        self.fetchers.follow(partition)
                self._notify(partition)
            self.wakeups.appended()  # parked fetches see NOT_LEADER_OR_FOLLOWER
        self._complete_replication_waiters(partition)
        return partition

    def _notify(self, partition: Partition) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(partition)
            except Exception:
                log.exception("a leadership listener failed for %s-%d", partition.topic, partition.index)

    # --- the leader: follower fetches, ISR, acks=all -----------------------------------------------------

    def follower_fetched(
        self, partition: Partition, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetched `partition` from `fetch_offset` (Kafka's `updateFollowerFetchState`)."""
        if partition.update_follower_fetch_state(replica_id, fetch_offset, self._now_ms(), log_start_offset):
            self._complete_replication_waiters(partition)
            self.wakeups.appended()  # consumers may read further
        expanded = partition.isr_to_expand(lambda broker_id: self.isr_eligible(partition, broker_id))
        if expanded is not None:
            self._change_isr(partition, expanded)

    def shrink_isrs(self, max_lag_ms: int) -> None:
        """Drop the followers that stopped keeping up from the ISR of every partition this broker leads."""
        now = self._now_ms()
        for partition in list(self._partitions.values()):
            if partition.is_leader and partition.followers:
                shrunk = partition.isr_to_shrink(now, max_lag_ms)
                if shrunk is not None:
                    self._change_isr(partition, shrunk)

    def _change_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        if self.isr_writer is None:
            return
        partition.pending_isr = isr  # at once: no second proposal while this one is written
        log.info(
            "%s-%d: proposing ISR %s (was %s)",
            partition.topic,
            partition.index,
            list(isr),
            list(partition.isr),
        )
        task = asyncio.get_running_loop().create_task(self.write_isr(partition, isr))
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)

    async def write_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        """Propose `isr` for a partition this broker leads: pending until `isr_writer` has it committed
        (the partition takes it with its new partition epoch) or refused (it stays as it was)."""
        writer = self.isr_writer
        if writer is None:
            return
        partition.pending_isr = isr
        try:
            partition_epoch = await writer(partition, isr)
        except Exception:
            log.exception("writing the ISR of %s-%d failed", partition.topic, partition.index)
            partition_epoch = None
        if partition_epoch is not None:
            self._update_isr(partition, isr, partition_epoch)
        else:
            if partition.pending_isr == isr:
                partition.pending_isr = None
            partition.maybe_increment_high_watermark()  # a pending expansion no longer counts
        self._complete_replication_waiters(partition)
        self.wakeups.appended()

    def isr_updated(self, partition: Partition, isr: Sequence[int], partition_epoch: int) -> None:
        """ZooKeeper holds a newer ISR for a partition this broker leads in the same leader epoch (the
        controller's change, or our own seen through the watch)."""
        self._update_isr(partition, isr, partition_epoch)
        self._complete_replication_waiters(partition)
        self.wakeups.appended()

    def _update_isr(self, partition: Partition, isr: Sequence[int], partition_epoch: int) -> None:
        """A committed ISR change, counted once (our own change read back from ZooKeeper is no change)."""
        before = len(partition.isr)
        partition.update_isr(isr, partition_epoch)
        after = len(partition.isr)
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1

    async def wait_replicated(self, targets: list[DurableTarget], timeout_s: float) -> list[ErrorCode]:
        """acks=all in a cluster: each target's outcome once the ISR has it (Kafka's delayed produce).
        REQUEST_TIMED_OUT when the high watermark did not get there in time."""
        futures: list[asyncio.Future[ErrorCode]] = []
        loop = asyncio.get_running_loop()
        for partition, end in targets:
            future: asyncio.Future[ErrorCode] = loop.create_future()
            outcome = partition.replication_outcome(end)
            if outcome is not None:
                future.set_result(outcome)
            else:
                self._replication_waiters.setdefault(partition, []).append((end, future))
            futures.append(future)
        pending = [f for f in futures if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        results = []
        for future in futures:
            if future.done():
                results.append(future.result())
            else:
                future.cancel()
                results.append(ErrorCode.REQUEST_TIMED_OUT)
        for partition, _ in targets:
            waiters = self._replication_waiters.get(partition)
            if waiters is not None:
                waiters[:] = [(end, f) for end, f in waiters if not f.done()]
                if not waiters:
                    del self._replication_waiters[partition]
        return results

    def _complete_replication_waiters(self, partition: Partition) -> None:
        waiters = self._replication_waiters.get(partition)
        if not waiters:
            return
        left = []
        for end, future in waiters:
            if future.done():
                continue
            outcome = partition.replication_outcome(end)
            if outcome is None:
                left.append((end, future))
            else:
                future.set_result(outcome)
        if left:
            waiters[:] = left
        else:
            del self._replication_waiters[partition]

    # --- appends -----------------------------------------------------------------------------------------

    def append_records(
        self,
        partition: Partition,
        records: Buffer,
        *,
        required_acks: int = -1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append to `partition` as its leader (KafkaError: the client's code); parked fetches wake up."""
        if partition.followers:
            partition.check_enough_replicas(required_acks)
        result = partition.append_records_to_leader(
            records, required_acks=required_acks, origin=origin, verification_guard=verification_guard
        )
        if not result.info.duplicate:
            self.wakeups.appended()
        return result

    def append_end_txn_marker(
        self, topic: str, index: int, producer_id: int, producer_epoch: int, marker: EndTxnMarker
    ) -> AppendResult:
        """One COMMIT/ABORT marker (the WriteTxnMarkers path, acks=all). KafkaError: the marker's code. The
        `marker_listeners` hear of it once it is in the log."""
        partition = self.online_partition(topic, index)
        if partition.followers:  # as any acks=all append: refused while the ISR is below its minimum
            partition.check_enough_replicas(-1)
        try:
            result = partition.append_end_txn_marker(producer_id, producer_epoch, marker)
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e
        self.wakeups.appended()
        committed = marker.type == ControlRecordType.COMMIT
        for listener in self.marker_listeners:
            try:
                listener(partition, producer_id, committed)
            except Exception:
                log.exception("a marker listener failed for %s-%d", topic, index)
        return result

    # --- durability --------------------------------------------------------------------------------------

    async def wait_durable(self, targets: list[DurableTarget]) -> None:
        """Every target fsynced below its offset (raises the first KafkaError)."""
        await self.flusher.wait_durable([(partition.log, offset) for partition, offset in targets])

    async def wait_durable_each(self, targets: list[DurableTarget]) -> list[KafkaError | None]:
        """Like `wait_durable`, but each target's own outcome: None, or its KafkaError."""
        return await self.flusher.wait_durable_each(
            [(partition.log, offset) for partition, offset in targets]
        )

    async def wait_end_durable(self, partition: Partition) -> None:
        """Everything appended to `partition` so far is durable (when its flush policy asks for it)."""
        end = partition.durable_offset(partition.log_end_offset)
        if end is not None:
            await self.wait_durable([(partition, end)])
