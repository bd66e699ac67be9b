"""The controller (Kafka's `KafkaController` in ZooKeeper mode): one broker at a time, elected through
ZooKeeper, decides every partition's leader and ISR.

Election (Kafka's `registerControllerAndIncrementControllerEpoch`): one multi-op creates the ephemeral
`/controller` and sets `/controller_epoch` to epoch + 1 at the version read; whoever wins keeps that
znode version, and every later write of the controller is a multi-op that checks it first, so a deposed
controller (its session expired, another one elected) can change nothing. Every broker watches
`/controller` and campaigns when it disappears.

Level-triggered: each event (brokers, topics, drained brokers, a new term) pokes the controller, which
then goes over every partition and applies `exactly.cluster.reconcile.decide` to what its broker's view
holds (each write conditional on the state znode's version: a decision made on a stale view fails and is
made again on the next pass). Topic deletion: a child of `/admin/delete_topics` makes it remove the
topic's znodes; brokers then stop and delete their replicas. Preferred-replica elections come from
`/admin/preferred_replica_election` (ElectLeaders) and, with `auto.leader.rebalance.enable`, from the
periodic imbalance check.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING

from exactly.broker.event_waits import wait_event
from exactly.broker.zookeeper import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    Op,
    Watch,
    ZnodeStat,
    check,
    create_op,
    set_op,
)
from exactly.cluster import reassignment, znodes
from exactly.cluster.reconcile import Decision, decide, decide_election, partitions_to_rebalance
from exactly.cluster.znodes import ControllerRegistration, PartitionState, TopicAssignment
from exactly.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from exactly.broker.cluster_member import ClusterMember

_ELECTION_ATTEMPTS = 3  # decisions of one ElectLeaders partition whose state changes under it
log = logging.getLogger(__name__)

__all__ = ["Controller"]


class Controller:
    def __init__(self, member: ClusterMember) -> None:
        self.member = member
        self.active = False
        self.epoch = -1
        self._epoch_version = -1
        self._poked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watches: list[Watch] = []
        self._deletions: list[str] = []
        self._deleted: set[str] = set()  # deleted topics still in this broker's view (watches lag)
        self._preferred: list[tuple[str, int]] | None = None
        self._campaigning = False
        self._next_rebalance = 0.0

    async def start(self) -> None:
        await self.campaign()

    async def stop(self) -> None:
        self.resign("the broker is stopping")

    def poke(self) -> None:
        if self.active:
            self._poked.set()

    def resign(self, reason: str) -> None:
        if not self.active:
            return
        log.info(
            "broker %d resigns as controller (epoch %d): %s", self.member.config.broker_id, self.epoch, reason
        )
        self.active = False
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def campaign(self) -> None:
        """Try to become the controller (nothing happens while another broker is)."""
        if self.active or self._campaigning or self.member._stopping:
            return
        self._campaigning = True
        try:
            await self._elect()
        finally:
            self._campaigning = False

    async def _elect(self) -> None:
        zk = self.member.zk
        me = self.member.config.broker_id
        if await zk.exists(znodes.CONTROLLER) is not None:
            return
        found = await zk.get(znodes.CONTROLLER_EPOCH)
        if found is None:
            with contextlib.suppress(NodeExistsError):
                await zk.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(0))
            found = await zk.get(znodes.CONTROLLER_EPOCH)
            assert found is not None
        epoch = znodes.decode_controller_epoch(found[0]) + 1
        registration = ControllerRegistration(me, int(time.time() * 1000))
        try:
            await zk.commit(
                [
                    create_op(znodes.CONTROLLER, registration.encode(), ephemeral=True),
                    set_op(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch), found[1].version),
                ]
            )
        except (NodeExistsError, BadVersionError):
            return  # another broker won
        stat = await zk.exists(znodes.CONTROLLER_EPOCH)
        assert stat is not None
        self.epoch, self._epoch_version, self.active = epoch, stat.version, True
        log.info("broker %d is the controller (epoch %d)", me, epoch)
        self._watches.append(zk.watch_children(znodes.DELETE_TOPICS, self._deletions_changed))
        self._watches.append(zk.watch_data(znodes.PREFERRED_ELECTION, self._preferred_changed))
        self._next_rebalance = time.monotonic() + self.member.config.leader_imbalance_check_interval_seconds
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller")
        self._poked.set()

    def _deletions_changed(self, children: list[str]) -> None:
        self._deletions = list(children)
        self.poke()

    def _preferred_changed(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        if data is None:
            return
        try:
            self._preferred = [
                (p["topic"], int(p["partition"])) for p in json.loads(data.decode()).get("partitions", [])
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("unreadable %s: %s", znodes.PREFERRED_ELECTION, e)
            self._preferred = []
        self.poke()

    async def _run(self) -> None:
        while self.active:
            try:
                await wait_event(self._poked, 5.0)
                self._poked.clear()
                await asyncio.sleep(0.01)  # let a burst of watch events land: one pass for all of them
                await self._pass()
            except asyncio.CancelledError:
                raise
            except _Deposed as e:
                self.resign(str(e))
            except Exception:
                log.exception("controller pass failed; retrying")
                await asyncio.sleep(0.5)
                self._poked.set()

    async def _pass(self) -> None:
        member = self.member
        cache = member.cache
        live = set(cache.brokers)
        draining = cache.shutting_down & live
        unclean = member.config.unclean_leader_election_enable
        for topic in list(self._deletions):
            await self._delete_topic(topic)
        self._deleted &= set(cache.assignments)
        for topic, assignment in list(cache.assignments.items()):
            if topic in self._deletions or topic in self._deleted:
                continue
            topic_unclean = member.topic_configs(topic).get("unclean.leader.election.enable")
            topic_allows_unclean = unclean if topic_unclean is None else topic_unclean == "true"
            for index, replicas in assignment.partitions.items():
                found = cache.states.get((topic, index))
                state, version = found if found is not None else (None, -1)
                decision = decide(replicas, state, live, draining, self.epoch, unclean=topic_allows_unclean)
                if decision is not None:
                    await self._write(topic, index, decision, version)
        await self._complete_reassignments()
        if self._preferred is not None:
            wanted, self._preferred = self._preferred, None
            await self.elect_leaders(wanted, unclean=False)
            with contextlib.suppress(NoNodeError):
                await member.zk.delete(znodes.PREFERRED_ELECTION)
        if member.config.auto_leader_rebalance_enable and time.monotonic() >= self._next_rebalance:
            self._next_rebalance = time.monotonic() + member.config.leader_imbalance_check_interval_seconds
            await self._rebalance()

    async def elect_leaders(
        self, partitions: list[tuple[str, int]], *, unclean: bool
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders on the controller (Kafka's `KafkaController.electLeaders`): each partition's
        outcome — NONE (elected), ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE or
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION."""
        if not self.active:
            return dict.fromkeys(partitions, (ErrorCode.NOT_CONTROLLER, "this broker is not the controller"))
        cache = self.member.cache
        live = {b for b in cache.brokers if b not in cache.shutting_down}
        outcome: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        for topic, index in partitions:
            assignment = cache.assignments.get(topic)
            found = cache.states.get((topic, index))
            if assignment is None or found is None or index not in assignment.partitions:
                outcome[(topic, index)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such partition as {topic}-{index}",
                )
                continue
            for attempt in range(_ELECTION_ATTEMPTS):
                decided = decide_election(
                    assignment.partitions[index],
                    found[0],
                    live,
                    self.epoch,
                    unclean=unclean,
                    name=f"{topic}-{index}",
                )
                if not isinstance(decided, Decision):
                    outcome[(topic, index)] = decided
                    break
                outcome[(topic, index)] = await self._write(topic, index, decided, found[1])
                if outcome[(topic, index)][0] is ErrorCode.NONE or not self.active:
                    break
                # The state changed under the decision (an ISR change by the leader, say): decide again
                # from what is in ZooKeeper now, as Kafka's controller retries its conditional updates.
                current = await self.member.zk.get(znodes.partition_state_path(topic, index))
                if current is None or attempt + 1 == _ELECTION_ATTEMPTS:
                    break
                data, stat = current
                found = (PartitionState.decode(data), stat.version)
        return outcome

    # --- reassignments (KIP-455; exactly.cluster.reassignment) --------------------------------------------

    async def alter_reassignments(
        self, changes: list[tuple[str, int, list[int] | None]]
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments on the controller: start, replace or cancel (None) each partition's
        reassignment by a conditional write of its topic znode."""
        if not self.active:
            return {
                (t, p): (ErrorCode.NOT_CONTROLLER, "this broker is not the controller") for t, p, _ in changes
            }
        outcome: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        by_topic: dict[str, list[tuple[int, list[int] | None]]] = {}
        for topic, partition, target in changes:
            by_topic.setdefault(topic, []).append((partition, target))
        registered = set(self.member.cache.brokers)
        for topic, wanted in by_topic.items():
            found = await self.member.zk.get(znodes.topic_path(topic))
            if found is None:
                for partition, _ in wanted:
                    outcome[(topic, partition)] = (
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Unable to find a topic named {topic}.",
                    )
                continue
            assignment = TopicAssignment.decode(found[0])
            changed = assignment
            for partition, target in wanted:
                try:
                    if partition not in changed.partitions:
                        raise KafkaError(
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"Unable to find partition {topic}:{partition}.",
                        )
                    if target is None:
                        changed = reassignment.cancel(changed, partition)
                    else:
                        reassignment.check_target(topic, partition, target, registered)
                        changed = reassignment.start(changed, partition, target)
                except KafkaError as e:
                    outcome[(topic, partition)] = (e.code, e.message)
                    continue
                outcome[(topic, partition)] = (ErrorCode.NONE, None)
            if changed is not assignment:
                code = await self._write_assignment(topic, changed, found[1].version)
                if code is not ErrorCode.NONE:
                    for partition, _ in wanted:
                        if outcome[(topic, partition)][0] == ErrorCode.NONE:
                            outcome[(topic, partition)] = (code, "the topic changed meanwhile; retry")
                else:
                    log.info("reassignment of %s: %s", topic, dict(wanted))
        self._poked.set()
        return outcome

    async def _write_assignment(self, topic: str, assignment: TopicAssignment, version: int) -> ErrorCode:
        guard = check(znodes.CONTROLLER_EPOCH, self._epoch_version)
        try:
            await self.member.zk.commit(
                [guard, set_op(znodes.topic_path(topic), assignment.encode(), version)]
            )
        except (BadVersionError, NoNodeError):
            await self._check_still_controller()
            return ErrorCode.REASSIGNMENT_IN_PROGRESS
        return ErrorCode.NONE

    async def _complete_reassignments(self) -> None:
        cache = self.member.cache
        live = {b for b in cache.brokers if b not in cache.shutting_down}
        for topic, partition, assignment in reassignment.reassigning(cache.assignments):
            found = cache.states.get((topic, partition))
            if found is None:
                continue
            done = reassignment.complete(assignment, partition, found[0], live, self.epoch)
            if done is None:
                continue
            if done.state is not None:
                code, _ = await self._write(
                    topic, partition, Decision(done.state, "reassignment completed"), found[1]
                )
                if code is not ErrorCode.NONE:
                    continue
            stat = await self.member.zk.exists(znodes.topic_path(topic))
            if (
                stat is not None
                and await self._write_assignment(topic, done.assignment, stat.version) is ErrorCode.NONE
            ):
                log.info(
                    "%s-%d: reassigned to %s", topic, partition, list(done.assignment.partitions[partition])
                )

    async def _rebalance(self) -> None:
        cache = self.member.cache
        assignments = {
            (t, i): tuple(r) for t, a in cache.assignments.items() for i, r in a.partitions.items()
        }
        leaders = {key: state.leader for key, (state, _) in cache.states.items()}
        percentage = self.member.config.leader_imbalance_per_broker_percentage
        wanted = partitions_to_rebalance(assignments, leaders, percentage)
        if wanted:
            log.info(
                "leader imbalance above %d%%: preferred elections for %d partitions", percentage, len(wanted)
            )
            await self.elect_leaders(wanted, unclean=False)

    async def _write(
        self, topic: str, index: int, decision: Decision, version: int
    ) -> tuple[ErrorCode, str | None]:
        """Write a decision conditionally (NONE, or the reason it did not land: decided again later)."""
        zk = self.member.zk
        path = znodes.partition_state_path(topic, index)
        guard = check(znodes.CONTROLLER_EPOCH, self._epoch_version)
        try:
            if version < 0:  # a new partition: its parents too, and only while its topic exists
                ops: list[Op] = [guard, check(znodes.topic_path(topic), -1)]
                if await zk.exists(znodes.partitions_path(topic)) is None:
                    ops.append(create_op(znodes.partitions_path(topic)))
                if await zk.exists(znodes.partition_path(topic, index)) is None:
                    ops.append(create_op(znodes.partition_path(topic, index)))
                await zk.commit([*ops, create_op(path, decision.state.encode())])
            else:
                await zk.commit([guard, set_op(path, decision.state.encode(), version)])
        except (BadVersionError, NodeExistsError, NoNodeError):
            await self._check_still_controller()
            log.info("%s-%d: the state changed under the controller; deciding again", topic, index)
            self._poked.set()
            return ErrorCode.NOT_CONTROLLER, "the partition's state changed meanwhile; retry"
        log.info(
            "%s-%d: leader %d, epoch %d, ISR %s (%s)",
            topic,
            index,
            decision.state.leader,
            decision.state.leader_epoch,
            list(decision.state.isr),
            decision.reason,
        )
        return ErrorCode.NONE, None

    async def _check_still_controller(self) -> None:
        stat = await self.member.zk.exists(znodes.CONTROLLER_EPOCH)
        if stat is None or stat.version != self._epoch_version:
            raise _Deposed("another controller was elected")

    async def _delete_topic(self, topic: str) -> None:
        zk = self.member.zk
        await self._check_still_controller()
        with contextlib.suppress(NoNodeError):
            await zk.delete(znodes.topic_path(topic), recursive=True)
        with contextlib.suppress(NoNodeError):
            await zk.delete(znodes.config_path("topics", topic))
        with contextlib.suppress(NoNodeError):
            await zk.delete(znodes.delete_topic_path(topic))
        if topic in self._deletions:
            self._deletions.remove(topic)
        self._deleted.add(topic)
        log.info("deleted topic %s", topic)


class _Deposed(Exception):
    pass
