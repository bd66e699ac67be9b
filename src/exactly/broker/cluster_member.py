"""A broker's membership of a replicated cluster on ZooKeeper (Kafka's `KafkaServer` + `KafkaZkClient`
in ZooKeeper mode, with brokers learning leadership by watching ZooKeeper rather than from LeaderAndIsr;
../shared/reference/replication.md §1-§3).

What it does, in the order of `start()`:
1. connects (`zookeeper.connect`, `zookeeper.session.timeout.ms`) and creates Kafka's persistent paths;
2. registers `/brokers/ids/<id>` (ephemeral; its czxid is the broker epoch). An ephemeral left by this
   broker's previous, killed process is waited out until its session expires;
3. watches the live brokers, the controller, the topics (assignments), every partition's state znode and
   the brokers being drained, into a `MetadataCache`; each partition state that names this broker goes
   to the replica manager (`become_leader_or_follower`), which starts or stops fetching;
4. takes part in the controller election (exactly.broker.controller).

ACLs and SCRAM credentials are the cluster's too: `security` (exactly.broker.security_store) loads them
from ZooKeeper before the broker registers, keeps them current, and is what the ACL and SCRAM handlers
write through. Client quotas and dynamic broker configs likewise: `dynamic_configs`
(exactly.broker.config_store), written through `alter_client_quotas` and `set_broker_configs`. Replica
fetchers connect to peers with `ClusterConfig.inter_broker_security`.

Admin writes (topic create, add partitions, delete, topic configs, quotas, broker configs) wait for
ZooKeeper while it is out of reach, until the request's deadline, then answer REQUEST_TIMED_OUT
(`_until_connected`, Kafka's `retryRequestsUntilConnected`).

Leaders change only the ISR, by a write of the state znode conditional on the partition epoch (its
version): a leader that lost its session, or whose partition moved on, fails that write and can never
shrink the ISR to itself (the direct ZooKeeper path Kafka used before AlterPartition).

Producer ids come in blocks of 1000 from `/latest_producer_id_block`, claimed by a conditional update, so
brokers never hand out the same id; the next block is fetched in the background before the current one
runs out.

Topics are created by any broker: the assignment (exactly.cluster.assignment over the live brokers and
their racks) goes to `/config/topics/<t>` and `/brokers/topics/<t>`; the controller then creates the
partitions' states, and the creating broker answers once it sees a leader for every partition.

Controlled shutdown: the broker creates `/exactly/controlled_shutdown/<id>`; the controller moves every
partition it leads elsewhere and takes it out of the ISRs; the broker waits until it leads nothing that
has another replica (at most `controlled.shutdown.*` retries x backoff), then stops.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kazoo.exceptions import KazooException

from exactly.broker.config import BrokerConfig, ConfigError
from exactly.broker.config_store import ZkConfigStore
from exactly.broker.controller import Controller
from exactly.broker.event_waits import wait_event
from exactly.broker.replica_fetcher import FetcherConfig, ReplicaFetchers
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.security_store import ZkSecurityStore
from exactly.broker.zookeeper import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    SessionState,
    Watch,
    ZnodeStat,
    ZooKeeper,
)
from exactly.client.security import ClientSecurity
from exactly.cluster import znodes
from exactly.cluster.assignment import BrokerMetadata, assign_new_partitions, assign_replicas
from exactly.cluster.metadata import ClusterMetadata, ScramCredential, TopicInfo
from exactly.cluster.metadata_cache import MetadataCache
from exactly.cluster.znodes import (
    BrokerRegistration,
    EntityConfig,
    PartitionState,
    ProducerIdBlock,
    RegisteredEndpoint,
    TopicAssignment,
)
from exactly.errors import ErrorCode, ExactlyError, KafkaError
from exactly.quotas.entities import QuotaEntity
from exactly.replication.partition import Partition
from exactly.security.acls import AclBinding
from exactly.security.inter_broker import inter_broker_security

log = logging.getLogger(__name__)

__all__ = ["ClusterConfig", "ClusterMember"]

_STOP_STEP_S = 5.0  # the most closing the fetchers, then the ZooKeeper session, may take at stop
T = TypeVar("T")
RECONNECT_POLL_S = 0.1  # how often a request waiting for the ZooKeeper session looks again


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    broker_id: int
    zookeeper_connect: str
    session_timeout_ms: int = 18_000
    rack: str | None = None
    inter_broker_listener: str = "PLAINTEXT"
    replica_lag_time_max_ms: int = 30_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    unclean_leader_election_enable: bool = False
    cluster_id: str = "exactly-cluster"
    fetcher: FetcherConfig = field(default_factory=FetcherConfig)
    # how to reach a peer's inter-broker listener (TLS, SASL: exactly.security.inter_broker); None: plain
    inter_broker_security: ClientSecurity | None = None


def cluster_config(config: BrokerConfig) -> ClusterConfig:
    """The cluster settings of a broker's configuration (Kafka's names: see exactly.broker.config).
    ConfigError when the inter-broker listener's client settings cannot be used."""
    name = config.inter_broker_listener_name or config.listeners[0].name
    listener = next(x for x in config.listeners if x.name == name)
    try:
        security = inter_broker_security(listener, config.properties)
    except ValueError as e:  # InterBrokerConfigError, TlsConfigError
        raise ConfigError(str(e)) from None
    return ClusterConfig(
        broker_id=config.node_id,
        zookeeper_connect=config.zookeeper_connect,
        session_timeout_ms=config.zookeeper_session_timeout_ms,
        rack=config.broker_rack,
        inter_broker_listener=name,
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        controlled_shutdown_enable=config.controlled_shutdown_enable,
        controlled_shutdown_max_retries=config.controlled_shutdown_max_retries,
        controlled_shutdown_retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
        auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
        leader_imbalance_check_interval_seconds=config.leader_imbalance_check_interval_seconds,
        leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
        unclean_leader_election_enable=config.log.unclean_leader_election_enable,
        cluster_id=config.cluster_id,
        fetcher=FetcherConfig(
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes,
            partition_max_bytes=config.replica_fetch_max_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
            socket_timeout_ms=config.replica_socket_timeout_ms,
        ),
        inter_broker_security=security,
    )


class ClusterMember:
    def __init__(
        self,
        config: ClusterConfig,
        replicas: ReplicaManager,
        metadata: ClusterMetadata,
        endpoints: Callable[[], tuple[RegisteredEndpoint, ...]],
        topic_configs_changed: Callable[[str], None],
    ) -> None:
        self.config = config
        self.replicas = replicas
        self.metadata = metadata
        self.cache = MetadataCache()
        self.zk = ZooKeeper(config.zookeeper_connect, config.session_timeout_ms)
        self._endpoints = endpoints
        self._topic_configs_changed = topic_configs_changed
        self.broker_epoch = -1
        self.fetchers = ReplicaFetchers(
            config.broker_id,
            lambda broker_id: self.cache.endpoint(broker_id, config.inter_broker_listener),
            replicas.wakeups.appended,
            config.fetcher,
            config.inter_broker_security,
        )
        replicas.fetchers = self.fetchers
        replicas.isr_writer = self._write_isr
        replicas.isr_eligible = self._isr_eligible
        replicas.leadership_current = self._leadership_current
        self.controller = Controller(self)
        self.security = ZkSecurityStore(self.zk, metadata)  # ACLs and SCRAM credentials of the cluster
        # client quotas and dynamic broker configs of the cluster
        self.dynamic_configs = ZkConfigStore(self.zk, metadata, config.broker_id)
        self._watches: dict[str, Watch] = {}
        self._topic_watches: dict[str, list[Watch]] = {}
        self._pid_blocks: collections.deque[range] = collections.deque()
        self._pid_next = 0
        self._configs_seen: dict[str, dict[str, str]] = {}
        self._states_seen: set[tuple[str, int]] = set()  # partitions whose state watch has delivered
        self._pid_refill: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._session_up = asyncio.Event()  # set on each CONNECTED (requests waiting for ZooKeeper)
        self._view_current = True  # False from a LOST session until the internal topics' states are re-read
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    # --- start and stop ----------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.zk.start()
        for path in znodes.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        await self._ensure_cluster_id()
        await self.security.start()
        await self.dynamic_configs.start()
        self.zk.on_state(self._on_session_state)
        await self._register()
        self._watch_children(znodes.BROKER_IDS, self._brokers_changed)
        self._watch_data(znodes.CONTROLLER, self._controller_changed)
        self._watch_children(znodes.TOPICS, self._topics_changed)
        self._watch_children(znodes.CONTROLLED_SHUTDOWN, self._draining_changed)
        await self._load_view()
        await self._claim_producer_ids()
        await self.controller.start()

    async def _load_view(self, timeout_s: float = 10.0) -> None:
        """Wait until this broker's view holds every topic ZooKeeper has and the state of each of their
        partitions (the broker answers no request before: Metadata would leave topics out), then delete
        the local logs of replicas the cluster no longer assigns here (topics deleted or partitions moved
        while this broker was down). A view still incomplete after `timeout_s` lets the broker start; the
        stray logs are removed once the view is whole."""
        if not await self._view_loaded(timeout_s):
            log.warning(
                "the topics' assignments did not all load in %.0f s (missing: %s); stray logs are removed "
                "once they have",
                timeout_s,
                ", ".join(await self._view_missing()) or "none now",
            )
            self._spawn(self._remove_stray_logs_when_loaded())
            return
        self._remove_stray_logs()

    async def _view_missing(self, at_most: int = 5) -> list[str]:
        """Up to `at_most` topics or partitions ZooKeeper has that this broker's view does not hold yet."""
        missing: list[str] = []
        for topic in await self.zk.get_children(znodes.TOPICS) or []:
            assignment = self.cache.assignments.get(topic)
            if assignment is None:
                missing.append(topic)
            else:
                missing.extend(
                    f"{topic}-{p}" for p in assignment.partitions if (topic, p) not in self._states_seen
                )
            if len(missing) >= at_most:
                break
        return missing[:at_most]

    async def _view_loaded(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while await self._view_missing(1):
            if time.monotonic() > deadline:
                return False
            self._changed.clear()
            await wait_event(self._changed, 0.2)
        return True

    async def _remove_stray_logs_when_loaded(self) -> None:
        while not self._stopping and not await self._view_loaded(60.0):
            missing = await self._view_missing()
            log.warning("still waiting for the topics' assignments: %s", ", ".join(missing))
        if not self._stopping:
            self._remove_stray_logs()

    def _remove_stray_logs(self) -> None:
        me = self.config.broker_id
        for topic, index in self.replicas.logs.partitions():
            assignment = self.cache.assignments.get(topic)
            replicas = assignment.partitions.get(index, ()) if assignment is not None else ()
            if me not in replicas:
                log.info(
                    "removing the stray log %s-%d: the cluster does not place it on this broker", topic, index
                )
                self.replicas.stop_replica(topic, index)

    async def _ensure_cluster_id(self) -> None:
        with contextlib.suppress(NodeExistsError):
            await self.zk.create(
                "/cluster/id", f'{{"version":"1","id":"{self.config.cluster_id}"}}'.encode(), makepath=True
            )

    async def stop(self) -> None:
        """Leave the cluster: a controlled shutdown first (when enabled), then close the session."""
        self._stopping = True
        if self.config.controlled_shutdown_enable and self.zk.connected:
            try:
                await self._controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
        await self.controller.stop()
        for watch in self._watches.values():
            watch.cancel()
        for watches in self._topic_watches.values():
            for watch in watches:
                watch.cancel()
        for task in list(self._tasks):
            task.cancel()
        self.security.stop()
        self.dynamic_configs.stop()
        for what, stopping in (
            ("the replica fetchers", self.fetchers.stop()),
            ("the ZooKeeper session", self.zk.stop()),
        ):
            try:
                async with asyncio.timeout(_STOP_STEP_S):
                    await stopping
            except TimeoutError:  # the session expires by itself; the process is going away anyway
                log.warning("%s did not stop within %.0f s", what, _STOP_STEP_S)

    async def _controlled_shutdown(self) -> None:
        me = self.config.broker_id
        with contextlib.suppress(NodeExistsError):
            await self.zk.create(znodes.controlled_shutdown_path(me), b"", ephemeral=True)
        deadline = time.monotonic() + (
            self.config.controlled_shutdown_max_retries
            * self.config.controlled_shutdown_retry_backoff_ms
            / 1000
        )
        while time.monotonic() < deadline:
            remaining = self.movable_led_partitions()
            if not remaining:
                log.info("controlled shutdown: broker %d leads no replicated partition", me)
                return
            self._changed.clear()
            await wait_event(self._changed, 0.5)
        log.warning(
            "controlled shutdown: still leading %d partitions; stopping anyway",
            len(self.movable_led_partitions()),
        )

    @property
    def registered(self) -> bool:
        """This broker is registered in ZooKeeper and its session is up (readiness, /readyz)."""
        return self.broker_epoch >= 0 and self._session_up.is_set() and not self._stopping

    def movable_led_partitions(self) -> list[tuple[str, int]]:
        """The partitions this broker leads that the controller can move elsewhere: another in-sync
        replica is live and not being drained (with none, waiting would not help: the last broker of a
        cluster that stops does not wait)."""
        me = self.config.broker_id
        return [
            key
            for key, (state, _) in self.cache.states.items()
            if state.leader == me and any(b != me and self.cache.is_live(b) for b in state.isr)
        ]

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a cluster task failed", exc_info=task.exception())

    # --- the session and the registration ----------------------------------------------------------------

    def _on_session_state(self, state: SessionState) -> None:
        log.info("ZooKeeper session %s", state.name)
        if state is SessionState.CONNECTED:
            self._session_up.set()
        else:
            self._session_up.clear()
        if state is SessionState.LOST:
            self._view_current = False
            self.controller.resign("the ZooKeeper session expired")
        elif state is SessionState.CONNECTED and not self._stopping:
            self._spawn(self._after_reconnect())

    def _leadership_current(self) -> bool:
        """The replica manager's `leadership_current`: whether this broker may still trust that it leads
        what it leads. Not while its ZooKeeper connection is down: the server expires the session a third
        of the session timeout after kazoo gives the connection up, and the controller then elects other
        leaders while this broker still believes its old view (a coordinator answering from that view
        would serve offsets and transactions another broker has moved on from). Not after a LOST session
        either, until `_after_reconnect` has read the coordinators' partitions' states again."""
        return self._view_current and self.zk.connected_now

    async def _after_reconnect(self) -> None:
        me = self.config.broker_id
        found = await self.zk.get(znodes.broker_path(me))
        if found is None or found[1].ephemeralOwner != self.zk.session_id:
            await self._register()  # a new session: a new broker epoch (Kafka re-registers the same way)
        if not self._view_current:
            await self._reread_internal_leadership()
        await self.controller.campaign()

    async def _reread_internal_leadership(self) -> None:
        """After a LOST session: the current state of each internal topic's partition this broker led
        (the watches deliver it too, but in their own time), then the view is current again."""
        led = [
            (p.topic, p.index)
            for p in self.replicas.partitions()
            if p.is_leader and (info := self.metadata.topics.get(p.topic)) is not None and info.internal
        ]
        for topic, index in led:
            found = await self.zk.get(znodes.partition_state_path(topic, index))
            self._state_changed(topic, index, *(found if found is not None else (None, None)))
        self._view_current = True
        log.info("the leadership of %d internal partition(s) was read again after a new session", len(led))

    def _registration(self) -> BrokerRegistration:
        return BrokerRegistration(
            self.config.broker_id, self._endpoints(), self.config.rack, int(time.time() * 1000)
        )

    async def _register(self) -> None:
        """Create our ephemeral registration; wait out one left by a previous, killed process of ours."""
        path = znodes.broker_path(self.config.broker_id)
        data = self._registration().encode()
        deadline = time.monotonic() + 2 * self.config.session_timeout_ms / 1000 + 5
        warned = False
        while True:
            try:
                await self.zk.create(path, data, ephemeral=True)
                break
            except NodeExistsError:
                found = await self.zk.get(path)
                if found is not None and found[1].ephemeralOwner == self.zk.session_id:
                    await self.zk.set(path, data)
                    break
                if time.monotonic() > deadline:
                    raise ExactlyError(
                        f"broker id {self.config.broker_id} is registered by another live broker"
                    ) from None
                if not warned:
                    log.warning(
                        "broker id %d is still registered by an earlier session; waiting for it to expire",
                        self.config.broker_id,
                    )
                    warned = True
                await asyncio.sleep(0.25)
        found = await self.zk.get(path)
        assert found is not None
        self.broker_epoch = found[1].czxid
        log.info(
            "registered broker %d in ZooKeeper (broker epoch %d)", self.config.broker_id, self.broker_epoch
        )

    # --- watches -----------------------------------------------------------------------------------------

    def _watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        self._watches[path] = self.zk.watch_children(path, callback)

    def _watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> None:
        self._watches[path] = self.zk.watch_data(path, callback)

    def _notify(self) -> None:
        self.cache.changed()
        self._changed.set()
        self.controller.poke()

    def _brokers_changed(self, children: list[str]) -> None:
        ids = {int(c) for c in children if c.isdigit()}
        for gone in set(self.cache.brokers) - ids:
            del self.cache.brokers[gone]
            self.cache.broker_epochs.pop(gone, None)
            watch = self._watches.pop(znodes.broker_path(gone), None)
            if watch is not None:
                watch.cancel()
            log.info("broker %d left the cluster", gone)
        for new in ids:
            path = znodes.broker_path(new)
            if path not in self._watches:
                self._watches[path] = self.zk.watch_data(
                    path, functools.partial(self._broker_registered, new)
                )
        self._notify()

    def _broker_registered(self, broker_id: int, data: bytes | None, stat: ZnodeStat | None) -> None:
        if data is None:
            self.cache.brokers.pop(broker_id, None)
            self.cache.broker_epochs.pop(broker_id, None)
        else:
            try:
                registration = BrokerRegistration.decode(broker_id, data)
            except ExactlyError as e:
                log.error("broker %d's registration is unreadable: %s", broker_id, e)
                return
            epoch = stat.czxid if stat is not None else -1
            bounced = self.cache.broker_epochs.get(broker_id) not in (None, epoch)
            self.cache.brokers[broker_id] = registration
            self.cache.broker_epochs[broker_id] = epoch
            if bounced or broker_id in self.fetchers.following():
                self.fetchers.broker_changed(broker_id)
        self._notify()

    def _controller_changed(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        if data is None:
            self.cache.controller_id = -1
            if not self._stopping:
                self._spawn(self.controller.campaign())
        else:
            try:
                self.cache.controller_id = znodes.ControllerRegistration.decode(data).broker_id
            except ExactlyError as e:
                log.error("the controller znode is unreadable: %s", e)
        self._notify()

    def _draining_changed(self, children: list[str]) -> None:
        self.cache.shutting_down = {int(c) for c in children if c.isdigit()}
        self._notify()

    def _topics_changed(self, children: list[str]) -> None:
        names = set(children)
        for gone in set(self._topic_watches) - names:
            for watch in self._topic_watches.pop(gone):
                watch.cancel()
            self._forget_topic(gone)
        for name in names - set(self._topic_watches):
            self._topic_watches[name] = [
                self.zk.watch_data(
                    znodes.topic_path(name), functools.partial(self._assignment_changed, name)
                ),
                self.zk.watch_data(
                    znodes.config_path("topics", name), functools.partial(self._topic_config_changed, name)
                ),
            ]
        self._notify()

    def _forget_topic(self, name: str) -> None:
        assignment = self.cache.assignments.pop(name, None)
        if assignment is None:
            return
        for index in assignment.partitions:
            self.cache.states.pop((name, index), None)
            if self.replicas.partition(name, index) is not None:
                self.replicas.stop_replica(name, index)
        self.metadata.forget_topic(name)
        self._configs_seen.pop(name, None)
        log.info("topic %s deleted", name)

    def _assignment_changed(self, topic: str, data: bytes | None, stat: ZnodeStat | None) -> None:
        if data is None:
            return
        try:
            assignment = TopicAssignment.decode(data)
        except ExactlyError as e:
            log.error("the assignment of topic %s is unreadable: %s", topic, e)
            return
        old = self.cache.assignments.get(topic)
        self.cache.assignments[topic] = assignment
        # the topic's configs: its config znode's watch may have delivered them before this one
        configs = self.topic_configs(topic)
        self.metadata.mirror_topic(TopicInfo(topic, assignment.topic_id, len(assignment.partitions), configs))
        if old is None:
            self._topic_configs_changed(topic)  # its logs take them before any replica is made
        watches = self._topic_watches.setdefault(topic, [])
        known = set(old.partitions) if old is not None else set()
        for index in assignment.partitions:
            if index not in known:
                watches.append(
                    self.zk.watch_data(
                        znodes.partition_state_path(topic, index),
                        functools.partial(self._state_changed, topic, index),
                    )
                )
            elif old is not None and old.partitions[index] != assignment.partitions[index]:
                found = self.cache.states.get((topic, index))
                if found is not None:
                    self._apply_state(topic, index, *found)
        self._notify()

    def _topic_config_changed(self, topic: str, data: bytes | None, stat: ZnodeStat | None) -> None:
        if data is None:
            return
        try:
            configs = EntityConfig.decode(data).configs
        except ExactlyError as e:
            log.error("the configs of topic %s are unreadable: %s", topic, e)
            return
        info = self.metadata.topics.get(topic)
        if info is not None:
            self.metadata.mirror_topic(TopicInfo(topic, info.topic_id, info.partitions, dict(configs)))
        self._configs_seen[topic] = dict(configs)
        self._topic_configs_changed(topic)
        self._notify()

    def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's config overrides as its config znode last said (the watches of a new topic's
        assignment and configs deliver in either order)."""
        if topic in self._configs_seen:
            return dict(self._configs_seen[topic])
        info = self.metadata.topics.get(topic)
        return dict(info.configs) if info is not None else {}

    def _state_changed(self, topic: str, index: int, data: bytes | None, stat: ZnodeStat | None) -> None:
        self._states_seen.add((topic, index))
        if data is None:
            self.cache.states.pop((topic, index), None)
            self._notify()
            return
        try:
            state = PartitionState.decode(data)
        except ExactlyError as e:
            log.error("the state of %s-%d is unreadable: %s", topic, index, e)
            return
        version = stat.version if stat is not None else 0
        self.cache.states[(topic, index)] = (state, version)
        self._apply_state(topic, index, state, version)
        self._notify()

    def _apply_state(self, topic: str, index: int, state: PartitionState, version: int) -> None:
        assignment = self.cache.assignments.get(topic)
        if assignment is None:
            return
        replicas = tuple(assignment.partitions.get(index, ()))
        me = self.config.broker_id
        partition = self.replicas.partition(topic, index)
        if me not in replicas:
            if partition is not None and not self._stopping:
                self.replicas.stop_replica(topic, index)  # moved away by a reassignment
            return
        if topic not in self.metadata.topics:
            return
        if (
            partition is not None
            and partition.is_leader
            and state.leader == me
            and state.leader_epoch == partition.leader_epoch
            and partition.replicas == replicas
        ):  # an ISR change (ours or the controller's); a new replica set goes through make_leader
            self.replicas.isr_updated(partition, state.isr, version)
            return
        self.replicas.become_leader_or_follower(
            topic,
            index,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            replicas=replicas,
            partition_epoch=version,
        )

    def _isr_eligible(self, partition: Partition, broker_id: int) -> bool:
        """A follower may join the ISR when its broker is live, not being drained, and not being removed
        by a reassignment (Kafka stops those replicas before they could rejoin)."""
        if not self.cache.is_live(broker_id):
            return False
        assignment = self.cache.assignments.get(partition.topic)
        return assignment is None or broker_id not in assignment.removing.get(partition.index, ())

    # --- the leader's ISR changes ------------------------------------------------------------------------

    async def _write_isr(self, partition: Partition, isr: tuple[int, ...]) -> int | None:
        """The replica manager's `isr_writer`: write the ISR conditionally on the partition epoch (Kafka's
        direct ZooKeeper path); the new partition epoch, or None when a newer state won."""
        key = (partition.topic, partition.index)
        found = self.cache.states.get(key)
        controller_epoch = found[0].controller_epoch if found is not None else 0
        state = PartitionState(self.config.broker_id, partition.leader_epoch, isr, controller_epoch)
        path = znodes.partition_state_path(*key)
        try:
            stat = await self.zk.set(path, state.encode(), version=partition.partition_epoch)
        except BadVersionError:
            current = await self.zk.get(path)
            if current is not None and current[0] == state.encode():
                return current[1].version  # our write landed before the connection dropped
            log.info("%s-%d: the ISR change lost to a newer partition state", *key)
            return None
        except NoNodeError:
            return None
        log.info("%s-%d: ISR is now %s (partition epoch %d)", key[0], key[1], list(isr), stat.version)
        self.cache.states[key] = (state, stat.version)
        return stat.version

    # --- producer ids ------------------------------------------------------------------------------------

    def next_producer_id(self) -> int:
        """The next id of this broker's blocks; the next block is claimed before the current one runs out."""
        while self._pid_blocks and self._pid_next >= self._pid_blocks[0].stop:
            self._pid_blocks.popleft()
            if self._pid_blocks:
                self._pid_next = self._pid_blocks[0].start
        if not self._pid_blocks:
            self._refill_producer_ids()
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "waiting for a new producer id block")
        pid = self._pid_next
        self._pid_next += 1
        if len(self._pid_blocks) == 1 and self._pid_blocks[0].stop - self._pid_next < znodes.BLOCK_SIZE // 5:
            self._refill_producer_ids()
        return pid

    def _refill_producer_ids(self) -> None:
        if self._pid_refill is None:
            self._pid_refill = asyncio.get_running_loop().create_task(self._refill())

    async def _refill(self) -> None:
        try:
            await self._claim_producer_ids()
        finally:
            self._pid_refill = None

    async def _claim_producer_ids(self) -> None:
        """Claim the next block of `/latest_producer_id_block` with a conditional update (loop on a race)."""
        while True:
            found = await self.zk.get(znodes.PRODUCER_ID_BLOCK)
            current = ProducerIdBlock.decode(found[0]) if found is not None and found[0] else None
            block = znodes.next_block(current, self.config.broker_id)
            try:
                if found is None:
                    await self.zk.create(znodes.PRODUCER_ID_BLOCK, block.encode())
                else:
                    await self.zk.set(znodes.PRODUCER_ID_BLOCK, block.encode(), version=found[1].version)
            except (BadVersionError, NodeExistsError):
                continue
            if not self._pid_blocks:
                self._pid_next = block.start
            self._pid_blocks.append(range(block.start, block.end + 1))
            return

    async def _until_connected(self, request: Callable[[], Coroutine[Any, Any, T]], deadline: float) -> T:
        """`request()`, made again while ZooKeeper is out of reach (the connection lost, the session
        expired and not yet replaced) until `deadline` (Kafka's `retryRequestsUntilConnected`); then
        REQUEST_TIMED_OUT, which clients retry, rather than an unknown server error."""
        while True:
            try:
                return await request()
            except (ConnectionLoss, SessionExpiredError) as e:
                if time.monotonic() >= deadline or self._stopping:
                    raise KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper is out of reach ({type(e).__name__})"
                    ) from None
                log.info("ZooKeeper is out of reach (%s); the request waits for it", type(e).__name__)
                await asyncio.sleep(RECONNECT_POLL_S)  # the session's state arrives through the loop
                if not self.zk.connected:
                    self._session_up.clear()
                    await wait_event(self._session_up, deadline - time.monotonic())

    async def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            try:
                await self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                await self.zk.set(path, data)

    # --- topics (any broker) -----------------------------------------------------------------------------

    def broker_metadata(self) -> list[BrokerMetadata]:
        return [
            BrokerMetadata(b, r.rack)
            for b, r in sorted(self.cache.brokers.items())
            if b not in self.cache.shutting_down
        ]

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, tuple[int, ...]] | None,
        timeout_s: float,
    ) -> TopicInfo:
        if assignment is None:
            assignment = assign_replicas(self.broker_metadata(), partitions, replication_factor)
        topic_id = uuid.uuid4()
        deadline = time.monotonic() + timeout_s
        config_path, topic_path = znodes.config_path("topics", name), znodes.topic_path(name)
        encoded = EntityConfig(configs).encode()
        await self._until_connected(lambda: self._set_or_create(config_path, encoded), deadline)
        try:
            await self._until_connected(
                lambda: self.zk.create(topic_path, TopicAssignment(topic_id, assignment).encode()), deadline
            )
        except NodeExistsError:
            # ours when a retry follows a create that landed before its connection dropped
            found = await self._until_connected(lambda: self.zk.get(topic_path), deadline)
            if found is None or TopicAssignment.decode(found[0]).topic_id != topic_id:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists") from None
        await self.wait_for_leaders(name, range(len(assignment)), max(0.0, deadline - time.monotonic()))
        info = self.metadata.topics.get(name)
        if info is None:
            return TopicInfo(name, topic_id, len(assignment), configs)
        return info

    async def add_partitions(self, name: str, total: int, timeout_s: float) -> TopicInfo:
        current = self.cache.assignments.get(name)
        if current is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        if total <= len(current.partitions):
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {len(current.partitions)} partitions, which is higher than the "
                f"requested {total}.",
            )
        new = assign_new_partitions(current.partitions, self.broker_metadata(), total)
        merged = {**current.partitions, **new}
        path = znodes.topic_path(name)
        deadline = time.monotonic() + timeout_s
        found = await self._until_connected(lambda: self.zk.get(path), deadline)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        updated = TopicAssignment(current.topic_id, merged, current.adding, current.removing).encode()
        version = found[1].version
        try:
            await self._until_connected(lambda: self.zk.set(path, updated, version=version), deadline)
        except BadVersionError:
            # ours when a retry follows a write that landed before its connection dropped
            again = await self._until_connected(lambda: self.zk.get(path), deadline)
            if again is None or again[0] != updated:
                raise KafkaError(
                    ErrorCode.REASSIGNMENT_IN_PROGRESS, f"topic {name!r} changed meanwhile"
                ) from None
        await self.wait_for_leaders(
            name, range(len(current.partitions), total), max(0.0, deadline - time.monotonic())
        )
        return self.metadata.topics[name]

    async def delete_topic(self, name: str, timeout_s: float = 30.0) -> TopicInfo:
        info = self.metadata.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(NodeExistsError):  # also: a retried create that had landed
            await self._until_connected(lambda: self.zk.create(znodes.delete_topic_path(name), b""), deadline)
        return info

    async def set_topic_configs(self, name: str, configs: dict[str, str], timeout_s: float = 30.0) -> None:
        path, data = znodes.config_path("topics", name), EntityConfig(configs).encode()
        await self._until_connected(lambda: self._set_or_create(path, data), time.monotonic() + timeout_s)

    # --- client quotas and dynamic broker configs (any broker) -------------------------------------------

    async def alter_client_quotas(
        self, entity: QuotaEntity, changes: dict[str, float | None], timeout_s: float = 30.0
    ) -> None:
        """Set `entity`'s quotas in ZooKeeper for the whole cluster (None removes one)."""
        await self._admin_write(
            lambda: self.dynamic_configs.alter_client_quotas(entity, changes), timeout_s, "the client quotas"
        )

    async def set_broker_configs(
        self, resource: str, configs: dict[str, str], timeout_s: float = 30.0
    ) -> None:
        """Replace the run-time configs of `resource` ("" = the cluster default, or a broker id)."""
        await self._admin_write(
            lambda: self.dynamic_configs.set_broker_configs(resource, configs),
            timeout_s,
            "the broker configs",
        )

    # --- ACLs and SCRAM credentials (any broker) ---------------------------------------------------------

    async def change_acls(
        self, bindings: list[AclBinding], *, add: bool, timeout_s: float = 30.0
    ) -> list[AclBinding]:
        """Add (or remove) ACL bindings for the whole cluster; those that changed. Waits for ZooKeeper
        (REQUEST_TIMED_OUT past `timeout_s`); KafkaError UNKNOWN_SERVER_ERROR when it cannot be written."""
        security = self.security
        change = security.create_acls if add else security.delete_acls
        return await self._admin_write(lambda: change(bindings), timeout_s, "the ACLs")

    async def change_scram_credential(
        self, user: str, mechanism: str, credential: ScramCredential | None, timeout_s: float = 30.0
    ) -> None:
        """Set (or, with None, delete) a user's SCRAM credential for the whole cluster, as `change_acls`."""
        security = self.security
        await self._admin_write(
            lambda: (
                security.set_scram_credential(user, mechanism, credential)
                if credential is not None
                else security.delete_scram_credential(user, mechanism)
            ),
            timeout_s,
            "the SCRAM credential",
        )

    async def _admin_write(
        self, write: Callable[[], Coroutine[Any, Any, T]], timeout_s: float, what: str
    ) -> T:
        try:
            return await self._until_connected(write, time.monotonic() + timeout_s)
        except KafkaError:
            raise
        except (ExactlyError, KazooException, OSError) as e:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot write {what} to ZooKeeper: {e}") from e

    async def wait_for_leaders(self, topic: str, partitions: range, timeout_s: float) -> None:
        """Until this broker's view has a leader for each of `partitions` (Kafka's CreateTopics waits the
        same way for the metadata to show them), at most `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            missing = [
                i
                for i in partitions
                if self.cache.leader_of(topic, i) < 0 or topic not in self.metadata.topics
            ]
            if not missing:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"topic {topic!r}: partitions {missing[:5]} have no leader yet",
                )
            self._changed.clear()
            await wait_event(self._changed, min(remaining, 0.5))
