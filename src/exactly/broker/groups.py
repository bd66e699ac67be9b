"""The asyncio side of the group coordinator: append its records, wait for them, answer parked requests.

`exactly.group.GroupCoordinator` is synchronous and never touches a socket or a file; this module is
the only thing that drives it in the broker:

* `call(op)` runs one coordinator operation, then — before anything else can run on the event loop —
  appends the records it returned to the group's partition of `__consumer_offsets` as one batch and
  replays them (so the coordinator's state changes only through its own log, ARCHITECTURE invariant 2).
  It then waits until that partition is durable up to its end (fsync, shared with concurrent appends by
  the broker's `Flusher`), delivers the completions (responses of JoinGroup/SyncGroup requests parked
  earlier) and returns the caller's response, or waits for the caller's own completion when it was
  parked. Responses therefore never reveal state that a crash could take back.
* `read(group_id, op)` is the same for read-only operations (OffsetFetch, DescribeGroups): the answer
  is computed at once and sent when everything it could have seen is durable.
* A timer task sleeps until the coordinator's next deadline (session, join, sync) and runs `tick`;
  another runs offset expiry every `offsets.retention.check.interval.ms`.
* `load()` replays every partition of `__consumer_offsets` at start-up, before the broker listens.

`__consumer_offsets` (compacted, `offsets.topic.num.partitions` partitions) is created on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from exactly.broker.context import RequestContext
from exactly.errors import ErrorCode, KafkaError
from exactly.group import ClientInfo, GroupConfig, GroupCoordinator, Parked, Result, build_batch
from exactly.protocol.messages.join_group import JoinGroupResponse
from exactly.protocol.messages.sync_group import SyncGroupResponse
from exactly.storage.log import PartitionLog, VerificationGuard, scan_batches
from exactly.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from exactly.broker.server import Broker

__all__ = ["OFFSETS_TOPIC", "GroupService", "append_error"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_MAX_SLEEP_S = 1.0

T = TypeVar("T")


def append_error(code: ErrorCode) -> ErrorCode:
    """The code a client gets when a coordinator append failed (Kafka's
    `appendGroupMetadataErrorToResponseError`)."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


class GroupService:
    def __init__(self, broker: Broker) -> None:
        config = broker.config
        self._broker = broker
        existing = broker.metadata.topics.get(OFFSETS_TOPIC)
        partitions = existing.partitions if existing is not None else config.offsets_topic_num_partitions
        if existing is not None and existing.partitions != config.offsets_topic_num_partitions:
            log.warning(
                "%s has %d partitions; offsets.topic.num.partitions=%d is ignored",
                OFFSETS_TOPIC,
                existing.partitions,
                config.offsets_topic_num_partitions,
            )
        self.coordinator = GroupCoordinator(
            GroupConfig(
                num_partitions=partitions,
                offsets_retention_ms=config.offsets_retention_ms,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            ),
            broker.clock,
        )
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._wakeup = asyncio.Event()
        self._sleep_until: int | None = None
        self._deliveries: set[asyncio.Task[None]] = set()
        self.loaded_records = 0
        self.load_seconds = 0.0

    # --- lifecycle ---------------------------------------------------------------------------------------

    def load(self) -> None:
        """Replay every partition of `__consumer_offsets` (start-up, before the broker listens)."""
        self.loaded_records, self.load_seconds = self._broker.load_internal_topic(
            OFFSETS_TOPIC, lambda plog: load_partition(self.coordinator, plog)
        )
        log.info(
            "loaded %d groups (%d records) from %s in %.3f s",
            len(self.coordinator.groups),
            self.loaded_records,
            OFFSETS_TOPIC,
            self.load_seconds,
        )

    def start(self) -> list[asyncio.Task[None]]:
        """Load, then start the timer and offset-expiry tasks (the broker owns and cancels them)."""
        self.load()
        return [
            asyncio.create_task(self._run_timers()),
            asyncio.create_task(
                self._broker._every(
                    self._broker.config.offsets_retention_check_interval_ms, self.expire_offsets
                )
            ),
        ]

    async def stop(self) -> None:
        for task in list(self._deliveries):
            task.cancel()
        await asyncio.gather(*self._deliveries, return_exceptions=True)
        for future in self._waiters.values():
            if not future.done():
                future.cancel()
        self._waiters.clear()

    # --- the internal topic ------------------------------------------------------------------------------

    async def ensure_topic(self) -> None:
        """Create `__consumer_offsets` on first use (compacted, one partition per coordinator shard)."""
        broker = self._broker
        await broker.ensure_internal_topic(
            OFFSETS_TOPIC, self.coordinator.config.num_partitions, broker.config.offsets_topic_segment_bytes
        )

    def partition_log(self, group_id: str) -> PartitionLog | None:
        return self._broker.log(OFFSETS_TOPIC, self.coordinator.partition_for(group_id))

    @staticmethod
    def client(ctx: RequestContext) -> ClientInfo:
        host = ctx.peer.rsplit(":", 1)[0] if ":" in ctx.peer else ctx.peer
        return ClientInfo(ctx.header.client_id or "", f"/{host}", ctx.version)

    # --- running operations ------------------------------------------------------------------------------

    async def call(
        self,
        op: Callable[[GroupCoordinator], Result[T]],
        verification_guard: VerificationGuard | None = None,
    ) -> T:
        """Run a coordinator operation: append + replay its records, wait for durability, answer.

        A transactional offset commit's records are appended as one transactional batch of its producer
        (checked by `verification_guard`, KIP-890 part 1) and replayed as pending offsets."""
        await self.ensure_topic()
        result = op(self.coordinator)
        future: asyncio.Future[Any] | None = None
        if isinstance(result.response, Parked):
            future = asyncio.get_running_loop().create_future()
            self._waiters[result.response.waiter] = future
        try:
            plog = self._append(result, verification_guard)
        except KafkaError:
            if future is not None and isinstance(result.response, Parked):
                self._waiters.pop(result.response.waiter, None)
            raise
        self._kick()
        await self._deliver(result, plog)
        if future is not None:
            response: T = await future
            return response
        assert not isinstance(result.response, Parked)
        assert result.response is not None
        return result.response

    async def read(self, group_id: str, op: Callable[[GroupCoordinator], T]) -> T:
        """A read-only operation, answered once everything it could have seen is durable."""
        response = op(self.coordinator)
        await self._durable(self.partition_log(group_id))
        return response

    def _append(
        self, result: Result[Any], verification_guard: VerificationGuard | None = None
    ) -> PartitionLog | None:
        """Append and replay `result`'s records (synchronously); on failure answer its completions with
        the error and let the coordinator fall back, then raise KafkaError with the client's code."""
        plog = self.partition_log(result.group_id) if result.group_id else None
        if not result.records:
            return plog
        try:
            if plog is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{OFFSETS_TOPIC} does not exist")
            pid = result.producer_id
            batch = build_batch(
                result.records,
                self._broker.clock.milliseconds(),
                producer_id=pid,
                producer_epoch=result.producer_epoch,
                transactional=pid >= 0,
            )
            info = plog.append_as_leader(
                batch, origin=AppendOrigin.COORDINATOR, verification_guard=verification_guard
            )
        except (KafkaError, OSError) as e:
            code = append_error(e.code if isinstance(e, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR)
            quiet = isinstance(e, KafkaError) and e.code == ErrorCode.KAFKA_STORAGE_ERROR  # storage logged it
            log.log(
                logging.DEBUG if quiet else logging.ERROR,
                "cannot append to %s for group %r: %s",
                OFFSETS_TOPIC,
                result.group_id,
                e,
            )
            self._fail_completions(result.completions, code)
            fallback = self.coordinator.on_append_failed(result)
            self._complete(fallback.completions)
            raise KafkaError(code, str(e)) from e
        for index, record in enumerate(result.records):
            self.coordinator.replay(info.first_offset + index, result.producer_id, record)
        self._broker.data_appended()
        return plog

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker was appended to `partition`: materialise or drop the pending offsets."""
        del partition  # pending offsets are kept per producer, whatever their partition
        self.coordinator.replay_end_txn_marker(producer_id, committed)

    async def _durable(self, plog: PartitionLog | None) -> None:
        if plog is None or not plog.config.ack_waits_for_fsync:
            return
        end = plog.log_end_offset
        if plog.needs_flush(end):
            await self._broker.flusher.wait_durable([(plog, end)])

    async def _deliver(self, result: Result[Any], plog: PartitionLog | None) -> None:
        if result.completions:
            await self._durable(plog)
            self._complete(result.completions)
        elif not isinstance(result.response, Parked):
            await self._durable(plog)

    def _complete(self, completions: list[tuple[int, Any]]) -> None:
        for waiter, response in completions:
            future = self._waiters.pop(waiter, None)
            if future is not None and not future.done():
                future.set_result(response)

    def _fail_completions(self, completions: list[tuple[int, Any]], code: ErrorCode) -> None:
        failed: list[tuple[int, Any]] = []
        for waiter, response in completions:
            if isinstance(response, JoinGroupResponse):
                failed.append(
                    (
                        waiter,
                        JoinGroupResponse(error_code=code, member_id=response.member_id, protocol_name=None),
                    )
                )
            elif isinstance(response, SyncGroupResponse):
                failed.append((waiter, SyncGroupResponse(error_code=code)))
        self._complete(failed)

    # --- time --------------------------------------------------------------------------------------------

    def _kick(self) -> None:
        """Wake the timer task when an operation set a deadline earlier than the one it sleeps until."""
        deadline = self.coordinator.next_deadline()
        if deadline is not None and (self._sleep_until is None or deadline < self._sleep_until):
            self._wakeup.set()

    async def _run_timers(self) -> None:
        clock = self._broker.clock
        while True:
            try:
                now = clock.monotonic_ms()
                deadline = self.coordinator.next_deadline()
                if deadline is not None and deadline <= now:
                    self._tick(now)
                    await asyncio.sleep(0)
                    continue
                self._sleep_until = deadline
                self._wakeup.clear()
                timeout = _MAX_SLEEP_S if deadline is None else min(_MAX_SLEEP_S, (deadline - now) / 1000)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group coordinator timer failed")
                await asyncio.sleep(0.1)

    def _tick(self, now: int) -> None:
        for result in self.coordinator.tick(now):
            self._run_background(result)

    def expire_offsets(self) -> None:
        """offsets.retention.minutes: append tombstones for expired offsets and empty groups."""
        if OFFSETS_TOPIC not in self._broker.metadata.topics:
            return
        for result in self.coordinator.expire_offsets():
            self._run_background(result)

    def _run_background(self, result: Result[Any]) -> None:
        """Apply a result nobody waits for (timers, expiry) and deliver its completions in a task."""
        try:
            plog = self._append(result)
        except KafkaError:
            return
        if result.completions:
            task = asyncio.create_task(self._deliver(result, plog))
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)


def load_partition(coordinator: GroupCoordinator, plog: PartitionLog) -> int:
    """Replay one partition of `__consumer_offsets` from its log start to its high watermark."""
    key_cache: dict[bytes, object] = {}
    return sum(coordinator.load_batch(batch, key_cache) for batch in scan_batches(plog))
